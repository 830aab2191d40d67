"""Forgetting: deleting and editing episodes so that nothing derived from the old text
survives anywhere (ARCHITECTURE.md, "Deletion").

One transaction per command, holding the conversation's CHAIN lock and then its GRAPH
lock (always in that order, so a deletion cannot deadlock with another deletion, and
appends or consolidation, which take one of them, wait or go first). Only the affected
subgraph is loaded; memory/forgetting/rules.py decides, this module loads and writes.

Decisions beyond Algorithm 1, and why:

- Every deleted message leaves a tombstone, so a redelivered or late copy is refused.
  A delete for a message never stored leaves one too (status ``tombstoned``); a delete
  that finds a tombstone is a no-op (``already_deleted``).
- A connective anchor keeps its id, type and relations; its name becomes ``anchor:<id>``
  and its embedding is cleared, since every mention that gave it that name (and the
  vector made from it) was deleted.
- A relation or entity that lost the episode but keeps other support is re-rendered
  from its surviving witnesses' own wording (memory.graph.wording, planned and written by
  memory.forgetting.rewording): every wording drawn from the episode is cleared, so no
  sentence, name form or summary it contributed outlives it.
- A dirtied community's label and summary are cleared along with its search document.
- Rolling-context entries that drew on the episode are rewritten to the entity's
  surviving name and type, or dropped (forgetting_rules.prune_rolling_context).
- A running summary that drew on the episode is cleared and marked dirty in the same
  transaction, then rebuilt from the surviving episodes afterwards.
- An answer that used the episode may quote it: its stored answer text is replaced by
  ``ANSWER_WITHDRAWN`` and its evidence link dropped. The question stays, since it is the
  asker's own text, not the deleted message's, and the audit log needs who asked what.
- The audit log records ids and counts only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Text,
    and_,
    bindparam,
    cast,
    delete,
    exists,
    func,
    literal,
    or_,
    select,
    text,
    union,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.communities.run import note_changed_relations
from memory.consolidation.context_store import Stored, in_order, load_context, save_context
from memory.consolidation.summary import rebuild_summary
from memory.core import Memory
from memory.episodes.exchange_vectors import (
    exchange_vectors_of,
    refresh_exchange_vectors,
)
from memory.forgetting.rewording import RewordPlan, plan_rewording, write_rewording
from memory.forgetting.rules import (
    ContextChange,
    Decision,
    EntityFacts,
    RelationFacts,
    SupplyGraph,
    decide_deletion,
    prune_rolling_context,
)
from memory.graph.writes import entity_document_text
from memory.models.embedder import Embedder, EmbeddingBatch
from memory.store.audit import write_audit
from memory.store.documents import Document, episode_document_text, upsert_documents
from memory.store.ledger import Usage, record_usage
from memory.store.locks import LockPurpose, lock_conversation
from memory.store.schema import (
    AnswerEvidence,
    AnswerTrace,
    Checkpoint,
    Community,
    CommunityMember,
    Entity,
    EntityProvenance,
    Episode,
    Relation,
    RelationProvenance,
    SearchDocument,
    Tombstone,
)
from memory.validation import check_text, normalize_id

ANSWER_WITHDRAWN = "[answer withdrawn: a message it drew on was deleted or edited]"


@dataclass
class Retraction:
    """What taking one episode's support out of the derived state changed (ids, counts)."""

    relations_removed: list[int] = field(default_factory=list)
    relations_kept: list[int] = field(default_factory=list)
    relations_restored: list[int] = field(default_factory=list)
    entities_removed: list[int] = field(default_factory=list)
    entities_anchored: list[int] = field(default_factory=list)
    entities_kept: list[int] = field(default_factory=list)
    communities_dirtied: list[int] = field(default_factory=list)
    relations_reworded: list[int] = field(default_factory=list)  # kept, shown in a surviving witness's words
    entities_reworded: list[int] = field(default_factory=list)
    documents_removed: int = 0
    context_entries_dropped: int = 0
    context_entries_pruned: int = 0
    summary_cleared: bool = False
    answers_withdrawn: list[int] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {k: (len(v) if isinstance(v, list) else int(v)) for k, v in asdict(self).items()}


@dataclass
class DeletionReport:
    conversation_id: int
    platform_message_id: str
    status: str  # deleted | tombstoned (never stored: refused if it arrives) | already_deleted
    episode_id: int | None = None
    chain: dict[str, int | None] = field(default_factory=dict)  # the reconnected neighbours
    retraction: Retraction = field(default_factory=Retraction)
    summary_rebuilt: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "counts": self.retraction.counts()}


@dataclass
class EditReport:
    conversation_id: int
    platform_message_id: str
    status: str  # edited (and queued for consolidation) | unchanged | outdated | unknown | deleted
    episode_id: int | None = None
    retraction: Retraction = field(default_factory=Retraction)
    summary_rebuilt: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "counts": self.retraction.counts()}


# --- loading the affected subgraph ---------------------------------------------------


def _witness(link: Any, owner: Any, conversation_id: int, episode_id: int) -> Any:
    """Another episode supporting the owner, if any: the rules only ask whether support
    beyond the deleted episode exists, and a hub entity may have thousands."""
    episode = link.class_.episode_id
    mine = link.class_.conversation_id == conversation_id
    return select(episode).where(mine, link == owner, episode != episode_id).limit(1).scalar_subquery()


def _holds(link: Any, owner: Any, conversation_id: int, episode_id: int) -> Any:
    return exists().where(link.class_.conversation_id == conversation_id, link == owner, link.class_.episode_id == episode_id)


def _support(holds: bool, witness: int | None, episode_id: int) -> frozenset[int]:
    return frozenset(([episode_id] if holds else []) + ([witness] if witness is not None else []))


async def _load_relations(session: AsyncSession, conversation_id: int, episode_id: int, ids: Any) -> dict[int, RelationFacts]:
    rows = await session.execute(
        select(
            Relation.id,
            Relation.subject_id,
            Relation.object_id,
            Relation.status,
            Relation.superseded_by,
            _holds(RelationProvenance.relation_id, Relation.id, conversation_id, episode_id),
            _witness(RelationProvenance.relation_id, Relation.id, conversation_id, episode_id),
        ).where(Relation.conversation_id == conversation_id, Relation.id.in_(ids))
    )
    return {
        r: RelationFacts(s, o, _support(holds, witness, episode_id), by if status == "superseded" else None)
        for r, s, o, status, by, holds, witness in rows
    }


def _ids(values: Iterable[int]) -> Any:
    return select(func.unnest(cast(sorted(values), ARRAY(BigInteger))))


@dataclass(frozen=True)
class Affected:
    graph: SupplyGraph


async def load_subgraph(session: AsyncSession, conversation_id: int, episode_id: int) -> Affected:
    """The part of the graph deleting ``episode_id`` can change (see SupplyGraph).

    Each query names its rows through the provenance, endpoint and supersession indexes
    (unions of id sets, never an OR that would scan the conversation), so the cost
    follows what is affected, not the size of the memory.
    """
    holding_r = select(RelationProvenance.relation_id).where(
        RelationProvenance.conversation_id == conversation_id, RelationProvenance.episode_id == episode_id
    )
    superseded = select(Relation.id).where(Relation.conversation_id == conversation_id, Relation.superseded_by.in_(holding_r))
    relations = await _load_relations(session, conversation_id, episode_id, union(holding_r, superseded))
    holding_e = select(EntityProvenance.entity_id).where(
        EntityProvenance.conversation_id == conversation_id, EntityProvenance.episode_id == episode_id
    )
    endpoints = {e for rel in relations.values() for e in rel.endpoints}
    communities_of = (
        select(func.array_agg(CommunityMember.community_id))
        .where(CommunityMember.conversation_id == conversation_id, CommunityMember.entity_id == Entity.id)
        .scalar_subquery()
    )
    rows = (
        await session.execute(
            select(
                Entity.id,
                _holds(EntityProvenance.entity_id, Entity.id, conversation_id, episode_id),
                _witness(EntityProvenance.entity_id, Entity.id, conversation_id, episode_id),
                communities_of,
            ).where(Entity.conversation_id == conversation_id, Entity.id.in_(union(holding_e, _ids(endpoints))))
        )
    ).all()
    entities = {e: EntityFacts(_support(holds, witness, episode_id)) for e, holds, witness, _ in rows}
    communities: dict[int, set[int]] = {}
    for entity_id, _, _, held_by in rows:
        for community_id in held_by or ():
            communities.setdefault(community_id, set()).add(entity_id)
    unsupported = [e for e, facts in entities.items() if not facts.support - {episode_id}]
    if unsupported:
        touching = union(
            select(Relation.id).where(Relation.conversation_id == conversation_id, Relation.subject_id.in_(unsupported)),
            select(Relation.id).where(Relation.conversation_id == conversation_id, Relation.object_id.in_(unsupported)),
        )
        more = await _load_relations(session, conversation_id, episode_id, touching)
        relations.update({r: rel for r, rel in more.items() if r not in relations})
    return Affected(SupplyGraph(relations, entities, {c: frozenset(m) for c, m in communities.items()}))


# --- writing a decision --------------------------------------------------------------


async def _with_documents(session: AsyncSession, conversation_id: int, kind: str, model: Any, ids: list[int], change: Any) -> int:
    """Drop the search documents of the records ``ids``, then apply ``change`` (a DELETE
    or UPDATE of ``model``) to them: two statements, not one with modifying CTEs, which
    Citus would not route to the conversation's shard. Returns the documents removed."""
    documents = await session.execute(
        delete(SearchDocument).where(
            SearchDocument.conversation_id == conversation_id, SearchDocument.kind == kind, SearchDocument.ref_id.in_(ids)
        )
    )
    await session.execute(change.where(model.conversation_id == conversation_id, model.id.in_(ids)))
    return int(getattr(documents, "rowcount", 0) or 0)


async def apply_decision(session: AsyncSession, conversation_id: int, decision: Decision) -> int:
    """Write a deletion decision's graph changes; returns the search documents removed.

    Shared by Stashbird's rule and the benchmark's comparison policies. A restored
    relation is made current before its superseder goes, and every other link to a
    relation that goes is cleared (the key has no ON DELETE action: see migration 0010).
    """
    await note_changed_relations(session, conversation_id, decision.relations_removed | decision.relations_restored)
    if decision.relations_restored:
        restored = list(decision.relations_restored)
        await session.execute(
            update(Relation)
            .where(Relation.conversation_id == conversation_id, Relation.id.in_(restored))
            .values(status="active", superseded_by=None, invalid_at=None)
        )
        await session.execute(
            update(SearchDocument)
            .where(
                SearchDocument.conversation_id == conversation_id,
                SearchDocument.kind == "relation",
                SearchDocument.ref_id.in_(restored),
            )
            .values(is_current=True)
        )
    await _unlink_superseders(session, conversation_id, decision)
    anchor = update(Entity).values(
        name=literal("anchor:") + cast(Entity.id, Text), summary="", attributes={}, embedding=None, is_anchor=True
    )
    changes = (
        ("relation", Relation, decision.relations_removed, delete(Relation)),
        ("entity", Entity, decision.entities_anchored, anchor),
        ("entity", Entity, decision.entities_removed, delete(Entity)),
        ("community", Community, decision.communities_dirtied, update(Community).values(dirty=True, label="", summary="")),
    )
    removed = 0
    for kind, model, ids, change in changes:
        if ids:
            removed += await _with_documents(session, conversation_id, kind, model, sorted(ids), change)
    return removed


async def _unlink_superseders(session: AsyncSession, conversation_id: int, decision: Decision) -> None:
    """Clear ``superseded_by`` where it names a relation about to go: one removed by the
    decision or one that deleting a removed entity takes with it (ON DELETE CASCADE)."""
    relations, entities = sorted(decision.relations_removed), sorted(decision.entities_removed)
    if not relations and not entities:
        return
    going = select(Relation.id).where(
        Relation.conversation_id == conversation_id,
        or_(Relation.id.in_(relations), Relation.subject_id.in_(entities), Relation.object_id.in_(entities)),
    )
    await session.execute(
        update(Relation)
        .where(Relation.conversation_id == conversation_id, Relation.superseded_by.in_(going))
        .values(superseded_by=None)
    )


async def documents_to_remove(session: AsyncSession, conversation_id: int, decision: Decision, episode_id: int) -> int:
    """The search documents that applying ``decision`` and removing the episode would
    remove: the records ``apply_decision`` deletes, anchors or dirties, and the episode's."""
    kinds = {
        "relation": decision.relations_removed,
        "entity": decision.entities_anchored | decision.entities_removed,
        "community": decision.communities_dirtied,
        "episode": frozenset([episode_id]),
    }
    matches = or_(*(and_(SearchDocument.kind == k, SearchDocument.ref_id.in_(sorted(ids))) for k, ids in kinds.items() if ids))
    query = select(func.count()).select_from(SearchDocument).where(SearchDocument.conversation_id == conversation_id, matches)
    return int((await session.execute(query)).scalar_one())


async def _withdraw_answers(session: AsyncSession, conversation_id: int, episode_id: int) -> list[int]:
    traces = list(
        (
            await session.execute(
                delete(AnswerEvidence)
                .where(AnswerEvidence.conversation_id == conversation_id, AnswerEvidence.episode_id == episode_id)
                .returning(AnswerEvidence.trace_id)
            )
        ).scalars()
    )
    if traces:
        await session.execute(
            update(AnswerTrace)
            .where(AnswerTrace.conversation_id == conversation_id, AnswerTrace.id.in_(traces))
            .values(answer=ANSWER_WITHDRAWN)
        )
    return sorted(traces)


async def _context_change(
    session: AsyncSession, conversation_id: int, episode_id: int, gone_entities: set[int], rewording: RewordPlan
) -> tuple[Stored, ContextChange]:
    """The rolling-context entries the episode or a re-worded entity touches, and what
    they become (forgetting_rules.prune_rolling_context): rewritten to their entity's
    surviving name and type, as re-rendered, or dropped."""
    reworded = {c.entity_id: c.rendered for c in rewording.entities}
    stored = await load_context(session, conversation_id, episode_id, gone_entities | set(reworded))
    context = in_order(stored)
    drew_on = {e.get("entity_id") for e in context if episode_id in e.get("episode_ids", [])} - gone_entities - set(reworded)
    names = (
        {}
        if not drew_on
        else dict(
            (e, (name, entity_document_text(name, type_, "")))
            for e, name, type_ in (
                await session.execute(
                    select(Entity.id, Entity.name, Entity.type).where(
                        Entity.conversation_id == conversation_id,
                        Entity.id.in_([e for e in drew_on if isinstance(e, int)]),
                        Entity.is_anchor.is_(False),
                    )
                )
            ).all()
        )
    )
    names.update({e: (r.name, entity_document_text(r.name, r.type, "")) for e, r in reworded.items()})
    return stored, prune_rolling_context(context, episode_id, gone_entities, names, reworded)


@dataclass(frozen=True)
class RetractionPlan:
    """What taking one episode's support out would change, decided before anything is
    written: the deletion applies it, the audit's dry run reports it."""

    episode_id: int
    affected: Affected
    decision: Decision
    checkpoint: Checkpoint | None
    rewording: RewordPlan
    stored_context: Stored  # the rolling-context rows ``context`` was computed from
    context: ContextChange
    answers: tuple[int, ...]  # answer traces whose evidence holds the episode

    @property
    def summary_drew_on(self) -> bool:
        return self.checkpoint is not None and self.episode_id in (self.checkpoint.summary_episode_ids or [])

    def retraction(self) -> Retraction:
        """The report of this plan, but for the search documents, which the writer counts."""
        decision = self.decision
        return Retraction(
            relations_removed=sorted(decision.relations_removed),
            relations_kept=sorted(decision.relations_kept),
            relations_restored=sorted(decision.relations_restored),
            entities_removed=sorted(decision.entities_removed),
            entities_anchored=sorted(decision.entities_anchored),
            entities_kept=sorted(decision.entities_kept),
            communities_dirtied=sorted(decision.communities_dirtied),
            relations_reworded=sorted(c.relation_id for c in self.rewording.relations),
            entities_reworded=sorted(c.entity_id for c in self.rewording.entities),
            context_entries_dropped=self.context.dropped,
            context_entries_pruned=self.context.pruned,
            summary_cleared=self.summary_drew_on,
            answers_withdrawn=list(self.answers),
        )


async def plan_retraction(session: AsyncSession, conversation_id: int, episode_id: int, *, for_update: bool) -> RetractionPlan:
    """Load what the episode supports and decide with the rules (Algorithm 1); writes
    nothing. ``for_update`` locks the checkpoint row for the writer that follows."""
    affected = await load_subgraph(session, conversation_id, episode_id)
    decision = decide_deletion(affected.graph, episode_id)
    query = select(Checkpoint).where(Checkpoint.conversation_id == conversation_id)
    checkpoint = (await session.execute(query.with_for_update() if for_update else query)).scalar_one_or_none()
    gone = set(decision.entities_removed | decision.entities_anchored)
    rewording = await plan_rewording(
        session, conversation_id, episode_id, sorted(decision.relations_kept), sorted(decision.entities_kept)
    )
    stored, context = (
        await _context_change(session, conversation_id, episode_id, gone, rewording)
        if checkpoint is not None
        else ({}, ContextChange([], 0, 0))
    )
    answers = (
        await session.execute(
            select(AnswerEvidence.trace_id)
            .where(AnswerEvidence.conversation_id == conversation_id, AnswerEvidence.episode_id == episode_id)
            .order_by(AnswerEvidence.trace_id)
        )
    ).scalars()
    return RetractionPlan(episode_id, affected, decision, checkpoint, rewording, stored, context, tuple(answers))


async def _update_checkpoint(session: AsyncSession, conversation_id: int, plan: RetractionPlan, requeue: bool) -> None:
    """Rolling context and summary lose the episode; an edited episode is queued again."""
    checkpoint, episode_id = plan.checkpoint, plan.episode_id
    if checkpoint is None:
        return
    if plan.context.dropped or plan.context.pruned:
        await save_context(session, conversation_id, plan.stored_context, plan.context.entries)
    if plan.summary_drew_on:
        checkpoint.summary = ""
        checkpoint.summary_episode_ids = []
        checkpoint.summary_dirty = True
    pending = [e for e in (checkpoint.pending_episode_ids or []) if e != episode_id]
    if requeue and episode_id <= checkpoint.last_episode_id:
        pending.append(episode_id)
    if pending != list(checkpoint.pending_episode_ids or []):
        checkpoint.pending_episode_ids = pending
    await session.flush()


async def retract_support(
    session: AsyncSession, conversation_id: int, episode_id: int, embedder: Embedder, *, requeue: bool
) -> Retraction:
    """Take one episode's support out of everything derived from it (the shared half of
    delete and edit); the caller holds both locks and handles the episode row."""
    plan = await plan_retraction(session, conversation_id, episode_id, for_update=True)
    if requeue:  # an edit keeps the episode row; a deletion's provenance rows go with it (ON DELETE CASCADE)
        for table in (RelationProvenance, EntityProvenance):
            await session.execute(delete(table).where(table.conversation_id == conversation_id, table.episode_id == episode_id))
    retraction = plan.retraction()
    retraction.documents_removed = await apply_decision(session, conversation_id, plan.decision)
    await write_rewording(session, conversation_id, episode_id, plan.rewording, embedder)
    await _update_checkpoint(session, conversation_id, plan, requeue)
    retraction.answers_withdrawn = await _withdraw_answers(session, conversation_id, episode_id)
    return retraction


_JOIN_NEIGHBOURS = text(
    "UPDATE episodes SET next_id = CASE WHEN id = :prev THEN :next WHEN next_id = :id THEN NULL ELSE next_id END, "
    "prev_id = CASE WHEN id = :next THEN :prev WHEN prev_id = :id THEN NULL ELSE prev_id END "
    "WHERE conversation_id = :conversation AND (id IN (:prev, :next) OR prev_id = :id OR next_id = :id)"
).bindparams(bindparam("prev", type_=BigInteger), bindparam("next", type_=BigInteger), bindparam("id", type_=BigInteger))
_DROP_DOCUMENT = text("DELETE FROM search_documents WHERE conversation_id = :conversation AND kind = 'episode' AND ref_id = :id")
_DROP_EPISODE = text("DELETE FROM episodes WHERE conversation_id = :conversation AND id = :id")
_TOMBSTONE = text(
    "INSERT INTO tombstones (conversation_id, platform_message_id) VALUES (:conversation, :message) ON CONFLICT DO NOTHING"
)


async def remove_episode(session: AsyncSession, conversation_id: int, episode: Episode) -> tuple[dict[str, int | None], int]:
    """Unlink an episode from its chain (its neighbours first, and any other link to it
    cleared: the chain's keys have no ON DELETE action since migration 0010, so a link
    left behind would fail the deletion), drop it and its search document, leave a
    tombstone, then recompute the searched vector of the message after it, which held a
    share of the deleted one's. Separate statements, not one with modifying CTEs, which
    Citus would not route to the conversation's shard. Returns the neighbours that were
    joined and the search documents removed."""
    keys = {"conversation": conversation_id, "id": episode.id}
    await session.execute(_JOIN_NEIGHBOURS, {**keys, "prev": episode.prev_id, "next": episode.next_id})
    removed = await session.execute(_DROP_DOCUMENT, keys)
    await session.execute(_DROP_EPISODE, keys)
    await session.execute(_TOMBSTONE, {"conversation": conversation_id, "message": episode.platform_message_id})
    if episode.next_id is not None:
        await refresh_exchange_vectors(session, conversation_id, [episode.next_id])
    return {"prev": episode.prev_id, "next": episode.next_id}, int(getattr(removed, "rowcount", 0) or 0)


# --- the commands --------------------------------------------------------------------


async def _find_episode(session: AsyncSession, conversation_id: int, platform_message_id: str) -> Episode | None:
    return (
        await session.execute(
            select(Episode).where(Episode.conversation_id == conversation_id, Episode.platform_message_id == platform_message_id)
        )
    ).scalar_one_or_none()


async def _tombstoned(session: AsyncSession, conversation_id: int, platform_message_id: str) -> bool:
    return (
        await session.execute(
            select(
                exists().where(Tombstone.conversation_id == conversation_id, Tombstone.platform_message_id == platform_message_id)
            )
        )
    ).scalar_one()


async def _audit(session: AsyncSession, conversation_id: int, principal: str, action: str, report: Any) -> None:
    details = report.as_dict()
    details.pop("retraction")  # the counts carry it; ids below
    details["ids"] = {k: v for k, v in asdict(report.retraction).items() if isinstance(v, list)}
    await write_audit(session, conversation_id, principal, action, details)


async def _rebuild_summary_if_cleared(memory: Memory, conversation_id: int, retraction: Retraction) -> bool:
    """The summary was cleared (and marked dirty) in the deleting transaction, so no
    deleted text outlives it even if this fails; regenerate it from what survives."""
    if not retraction.summary_cleared:
        return False
    async with memory.sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.GRAPH)
        await rebuild_summary(memory, session, conversation_id)
    return True


async def delete_episode(memory: Memory, conversation_id: int, platform_message_id: str, *, principal: str) -> DeletionReport:
    """Delete one message and everything that rested only on it, in one transaction (a
    message not stored yet leaves a tombstone)."""
    message_id = normalize_id(platform_message_id, "message")
    async with memory.sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.CHAIN, LockPurpose.GRAPH)
        episode = await _find_episode(session, conversation_id, message_id)
        if episode is None:
            status = "already_deleted" if await _tombstoned(session, conversation_id, message_id) else "tombstoned"
            if status == "tombstoned":
                await session.execute(insert(Tombstone).values(conversation_id=conversation_id, platform_message_id=message_id))
            report = DeletionReport(conversation_id, message_id, status)
        else:
            retraction = await retract_support(session, conversation_id, episode.id, memory.embedder, requeue=False)
            chain, documents = await remove_episode(session, conversation_id, episode)
            retraction.documents_removed += documents
            report = DeletionReport(conversation_id, message_id, "deleted", episode.id, chain, retraction)
        await _audit(session, conversation_id, principal, "delete_episode", report)
    report.summary_rebuilt = await _rebuild_summary_if_cleared(memory, conversation_id, report.retraction)
    return report


async def edit_episode(
    memory: Memory,
    conversation_id: int,
    platform_message_id: str,
    new_text: str,
    *,
    principal: str,
    edited_at: datetime | None = None,
) -> EditReport:
    """A changed message is a correction: the old version's derived state is retracted as
    in a deletion, the new text is stored in place (chain position and message time
    kept, ``edited_at`` set), re-indexed, and queued for consolidation."""
    message_id = normalize_id(platform_message_id, "message")
    check_text(new_text, "text")
    async with memory.sessions() as session:
        stored = await _find_episode(session, conversation_id, message_id) is not None
    # Embed before taking the locks (an API embedder may be slow); under them only if
    # the message arrived meanwhile.
    embedded = await _embed_episode(memory, new_text) if stored else None
    async with memory.sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.CHAIN, LockPurpose.GRAPH)
        episode = await _find_episode(session, conversation_id, message_id)
        if episode is None:
            status = "deleted" if await _tombstoned(session, conversation_id, message_id) else "unknown"
            report = EditReport(conversation_id, message_id, status)
        elif episode.text == new_text:
            report = EditReport(conversation_id, message_id, "unchanged", episode.id)
        elif edited_at is not None and episode.edited_at is not None and edited_at < episode.edited_at:
            # A platform redelivering an older edit after a newer one: the newer text stands.
            report = EditReport(conversation_id, message_id, "outdated", episode.id)
        else:
            if embedded is None:
                embedded = await _embed_episode(memory, new_text)
            document_text, batch = embedded
            retraction = await retract_support(session, conversation_id, episode.id, memory.embedder, requeue=True)
            episode.text = new_text
            episode.embedding = list(batch.vectors[0])
            episode.edited_at = edited_at or datetime.now(UTC)
            searched = await exchange_vectors_of(
                session, conversation_id, {episode.id: batch.vectors[0]}, {episode.id: episode.prev_id}
            )
            await upsert_documents(
                session,
                conversation_id,
                [Document("episode", episode.id, document_text, searched[episode.id], episode.message_time)],
            )
            if episode.next_id is not None:
                await session.flush()  # the successor's vector is recomputed from the new own vector
                await refresh_exchange_vectors(session, conversation_id, [episode.next_id])
            await record_usage(session, conversation_id, Usage.embedding("ingestion", "embed_episode", batch))
            report = EditReport(conversation_id, message_id, "edited", episode.id, retraction)
        await _audit(session, conversation_id, principal, "edit_episode", report)
    report.summary_rebuilt = await _rebuild_summary_if_cleared(memory, conversation_id, report.retraction)
    return report


async def _embed_episode(memory: Memory, text: str) -> tuple[str, EmbeddingBatch]:
    document_text = episode_document_text(text)
    return document_text, await memory.embedder.embed([document_text])
