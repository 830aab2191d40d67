"""Communities of a conversation: full builds, incremental membership, regeneration.

- **Build**: label propagation (memory/communities/propagation.py) over every entity and
  the active relations between them. A group with the same members as an existing
  community keeps it (summary and document untouched); other communities are replaced
  by new ones, which start dirty and get their summaries from regeneration.
- **Incremental membership**: after consolidation, each entity newer than the last pass
  joins the community most common among its neighbours; that community is marked dirty
  (its search document goes until it is regenerated). When the share of the entities
  whose place in the graph changed since the last build passes ``community_rebuild_share``,
  a full build runs instead: entities new since then, the ends of relations new since
  then, of relations superseded since then, and of relations a deletion removed or
  restored since then (recorded by ``memory.store.communities.note_changed_relations``,
  as a removed relation leaves no row to find).
- **Regeneration**: a dirty community is re-summarised from its surviving members and
  their active relations, or dissolved when fewer than two named members survive; the
  most used lately first (answers count uses: memory/communities/use.py), ties the one
  dirty the longest first. The scheduler takes at most a few per run, and no cold one
  (not used lately): that one waits, dirty, until an answer uses it.

Reads take the conversation's GRAPH lock briefly so that the ids they see cover every
committed consolidation; label propagation and summaries (LLM, embeddings) run outside
any transaction; writes take the lock again and re-check what they read, and go through
memory.store.communities (and memory.store.documents for the search documents).
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import BigInteger, cast, func, literal_column, or_, select, union
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from memory.communities.propagation import (
    groups,
    join_communities,
    label_propagation,
    rebuild_due,
    weighted_graph,
)
from memory.communities.summary import (
    CommunityInputs,
    Fact,
    Member,
    Summary,
    llm_summary,
    offline_summary,
)
from memory.communities.use import decayed_sql, warm_sql
from memory.core import Memory
from memory.store import communities as store
from memory.store import documents
from memory.store.documents import Document
from memory.store.ledger import Usage, record_usage
from memory.store.locks import LockPurpose, lock_conversation
from memory.store.schema import (
    Community,
    CommunityMember,
    CommunityState,
    Entity,
    EntityProvenance,
    Relation,
    RelationProvenance,
)


@dataclass
class CommunityReport:
    conversation_id: int
    rebuilt: bool = False
    created: int = 0
    kept: int = 0
    replaced: int = 0
    joined: int = 0  # entities that joined a community incrementally
    regenerated: int = 0
    dissolved: int = 0
    skipped: int = 0  # changed while being summarised: left dirty for the next pass
    llm_fallbacks: int = 0

    def add(self, other: CommunityReport) -> None:
        for name in ("created", "kept", "replaced", "joined", "regenerated", "dissolved", "skipped", "llm_fallbacks"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.rebuilt = self.rebuilt or other.rebuilt

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Graph:
    nodes: list[int]
    edges: list[tuple[int, int]]
    top_entity: int
    top_relation: int
    changed: frozenset[int] = frozenset()  # changed_entity_ids when read: a build accounts for these


def _active(conversation_id: int) -> Any:
    return (Relation.conversation_id == conversation_id) & (Relation.status == "active")


async def _tops(session: AsyncSession, conversation_id: int) -> tuple[int, int]:
    top_entity = (await session.execute(select(func.max(Entity.id)).where(Entity.conversation_id == conversation_id))).scalar()
    top_relation = (
        await session.execute(select(func.max(Relation.id)).where(Relation.conversation_id == conversation_id))
    ).scalar()
    return int(top_entity or 0), int(top_relation or 0)


async def _load_graph(memory: Memory, conversation_id: int) -> _Graph:
    async with memory._sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.GRAPH)
        nodes = list((await session.execute(select(Entity.id).where(Entity.conversation_id == conversation_id))).scalars())
        edges = [
            (s, o)
            for s, o in await session.execute(select(Relation.subject_id, Relation.object_id).where(_active(conversation_id)))
        ]
        changed = (
            await session.execute(
                select(CommunityState.changed_entity_ids).where(CommunityState.conversation_id == conversation_id)
            )
        ).scalar()
        return _Graph(nodes, edges, *await _tops(session, conversation_id), frozenset(changed or ()))


async def _memberships(session: AsyncSession, conversation_id: int) -> dict[int, frozenset[int]]:
    rows = await session.execute(
        select(CommunityMember.community_id, CommunityMember.entity_id).where(CommunityMember.conversation_id == conversation_id)
    )
    members: dict[int, set[int]] = {}
    for community_id, entity_id in rows:
        members.setdefault(community_id, set()).add(entity_id)
    return {c: frozenset(m) for c, m in members.items()}


async def _drop_communities(session: AsyncSession, conversation_id: int, ids: list[int]) -> None:
    if ids:
        await documents.remove_documents(session, conversation_id, "community", ids)
        await store.delete_communities(session, conversation_id, ids)


async def build(memory: Memory, conversation_id: int) -> CommunityReport:
    """Rebuild the conversation's communities by label propagation (summaries come from
    ``regenerate``)."""
    graph = await _load_graph(memory, conversation_id)
    labels = await asyncio.to_thread(label_propagation, weighted_graph(graph.nodes, graph.edges), memory.params.community_rounds)
    found = [frozenset(g) for g in groups(labels)]
    report = CommunityReport(conversation_id, rebuilt=True)
    async with memory._sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.GRAPH)
        existing = await _memberships(session, conversation_id)
        unchanged = {members: c for c, members in existing.items() if members in set(found)}
        await _drop_communities(session, conversation_id, sorted(set(existing) - set(unchanged.values())))
        alive = set((await session.execute(select(Entity.id).where(Entity.conversation_id == conversation_id))).scalars())
        for members in found:
            if members in unchanged:
                report.kept += 1
                continue
            surviving = sorted(members & alive)  # an entity deleted since the graph was read is left out
            if len(surviving) < 2:
                continue
            await store.create_community(session, conversation_id, surviving)
            report.created += 1
        report.replaced = len(existing) - len(unchanged)
        await store.save_state(session, conversation_id, graph.top_entity, graph.top_relation, built=graph.changed)
    return report


async def _changed_share(session: AsyncSession, conversation_id: int, state: CommunityState) -> tuple[int, int]:
    """(entities whose place in the graph changed since the last build, all entities)."""
    in_conversation = Relation.conversation_id == conversation_id
    moved = in_conversation & ((Relation.id > state.built_relation_id) | (Relation.superseded_by > state.built_relation_id))
    touched = union(
        select(Entity.id).where(Entity.conversation_id == conversation_id, Entity.id > state.built_entity_id),
        select(Relation.subject_id).where(moved),
        select(Relation.object_id).where(moved),
        select(func.unnest(cast(list(state.changed_entity_ids or ()), ARRAY(BigInteger)))),
    ).subquery()
    changed = (
        await session.execute(
            select(func.count())
            .select_from(Entity)
            .where(Entity.conversation_id == conversation_id, Entity.id.in_(select(touched)))
        )
    ).scalar_one()
    total = (
        await session.execute(select(func.count()).select_from(Entity).where(Entity.conversation_id == conversation_id))
    ).scalar_one()
    return int(changed), int(total)


async def _join(session: AsyncSession, conversation_id: int, state: CommunityState, report: CommunityReport) -> None:
    """Newcomers since the last pass join their neighbours' most common community."""
    newcomers = list(
        (
            await session.execute(
                select(Entity.id).where(
                    Entity.conversation_id == conversation_id,
                    Entity.id > state.seen_entity_id,
                    ~Entity.id.in_(select(CommunityMember.entity_id).where(CommunityMember.conversation_id == conversation_id)),
                )
            )
        ).scalars()
    )
    if not newcomers:
        return
    edges = [
        (s, o)
        for s, o in await session.execute(
            select(Relation.subject_id, Relation.object_id).where(
                _active(conversation_id), or_(Relation.subject_id.in_(newcomers), Relation.object_id.in_(newcomers))
            )
        )
    ]
    neighbours = {e for edge in edges for e in edge} - set(newcomers)
    membership = dict(
        (e, c)
        for c, e in await session.execute(
            select(func.min(CommunityMember.community_id), CommunityMember.entity_id)
            .where(CommunityMember.conversation_id == conversation_id, CommunityMember.entity_id.in_(sorted(neighbours)))
            .group_by(CommunityMember.entity_id)
        )
    )
    joined = join_communities(newcomers, edges, membership)
    if not joined:
        return
    await store.add_members(session, conversation_id, [(c, e) for e, c in sorted(joined.items())])
    dirtied = sorted(set(joined.values()))
    await store.mark_dirty(session, conversation_id, dirtied, clear_summary=False)
    await documents.remove_documents(session, conversation_id, "community", dirtied)
    report.joined += len(joined)


async def update_membership(memory: Memory, conversation_id: int, rebuild_share: float | None = None) -> CommunityReport:
    """After consolidation: place new entities incrementally, or rebuild when the changed
    share passes the threshold (or nothing was built yet)."""
    share = memory.params.community_rebuild_share if rebuild_share is None else rebuild_share
    report = CommunityReport(conversation_id)
    async with memory._sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.GRAPH)
        state = await session.get(CommunityState, conversation_id, with_for_update=True)
        rebuild = state is None or rebuild_due(*await _changed_share(session, conversation_id, state), share)
        if state is not None and not rebuild:
            await _join(session, conversation_id, state, report)
            await store.save_state(session, conversation_id, *await _tops(session, conversation_id), built=None)
    return await build(memory, conversation_id) if rebuild else report


# --- regeneration ---------------------------------------------------------------------


async def _inputs(session: AsyncSession, conversation_id: int, community_id: int) -> CommunityInputs:
    member_ids = select(CommunityMember.entity_id).where(
        CommunityMember.conversation_id == conversation_id, CommunityMember.community_id == community_id
    )
    support = (
        select(func.count())
        .where(EntityProvenance.conversation_id == conversation_id, EntityProvenance.entity_id == Entity.id)
        .correlate(Entity)
        .scalar_subquery()
    )
    members = tuple(
        Member(*row)
        for row in await session.execute(
            select(Entity.id, Entity.name, Entity.type, support, Entity.is_anchor)
            .where(Entity.conversation_id == conversation_id, Entity.id.in_(member_ids))
            .order_by(Entity.id)
        )
    )
    relation_support = (
        select(func.count())
        .where(RelationProvenance.conversation_id == conversation_id, RelationProvenance.relation_id == Relation.id)
        .correlate(Relation)
        .scalar_subquery()
    )
    facts = tuple(
        Fact(*row)
        for row in await session.execute(
            select(Relation.id, Relation.fact, relation_support)
            .where(_active(conversation_id), Relation.subject_id.in_(member_ids), Relation.object_id.in_(member_ids))
            .order_by(Relation.id)
        )
    )
    return CommunityInputs(community_id, members, facts)


async def _summarise(memory: Memory, inputs: CommunityInputs) -> tuple[Summary, list[float], list[Usage]]:
    params = memory.params
    if memory.llm is not None:
        summary = await llm_summary(memory.llm, inputs, params.community_prompt_tokens, params.community_facts)
    else:
        summary = offline_summary(inputs, params.community_facts)
    batch = await memory.embedder.embed([summary.document_text])
    usage = [*summary.usage, Usage.embedding("community", "embed_community", batch)]
    return summary, list(batch.vectors[0]), usage


async def _still_dirty(session: AsyncSession, conversation_id: int, community_id: int) -> bool:
    dirty = await session.execute(
        select(Community.dirty)
        .where(Community.conversation_id == conversation_id, Community.id == community_id)
        .with_for_update()
    )
    return bool(dirty.scalar())


async def _regenerate_one(memory: Memory, conversation_id: int, community_id: int, report: CommunityReport) -> None:
    async with memory._sessions() as session:
        inputs = await _inputs(session, conversation_id, community_id)
    summary = vector = None
    usage: list[Usage] = []
    if len(inputs.named) >= 2:
        summary, vector, usage = await _summarise(memory, inputs)
    async with memory._sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.GRAPH)
        for item in usage:
            await record_usage(session, conversation_id, item)
        if not await _still_dirty(session, conversation_id, community_id):
            return  # regenerated or dissolved by someone else meanwhile
        now = await _inputs(session, conversation_id, community_id)
        if now.fingerprint() != inputs.fingerprint():
            report.skipped += 1  # changed while summarising: the next pass starts over
        elif summary is None or vector is None:
            await _drop_communities(session, conversation_id, [community_id])
            report.dissolved += 1
        else:
            await store.set_summary(session, conversation_id, community_id, summary.label, summary.text)
            shown = Document("community", community_id, summary.document_text, vector)
            await documents.upsert_documents(session, conversation_id, [shown])
            report.regenerated += 1
            report.llm_fallbacks += summary.fallback is not None


_USE_NOW: ColumnElement[float] = literal_column(decayed_sql("communities.used_score", "communities.used_at"))
_WARM: ColumnElement[bool] = literal_column(warm_sql("communities.used_score", "communities.used_at"))


async def regenerate(
    memory: Memory, conversation_id: int, *, limit: int | None = None, include_cold: bool = True
) -> CommunityReport:
    """Re-summarise dirty communities from their surviving members, or dissolve them: the
    most used lately first (memory/communities/use.py), then the one dirty the longest;
    at most ``limit`` (None: all); cold ones too unless ``include_cold`` is False (the
    scheduler's way: a cold one waits, dirty, until an answer uses it)."""
    report = CommunityReport(conversation_id)
    wanted = select(Community.id).where(Community.conversation_id == conversation_id, Community.dirty)
    if not include_cold:
        wanted = wanted.where(_WARM)
    async with memory._sessions() as session:
        dirty = list(
            (await session.execute(wanted.order_by(_USE_NOW.desc(), Community.updated_at, Community.id).limit(limit))).scalars()
        )
    for community_id in dirty:
        await _regenerate_one(memory, conversation_id, community_id, report)
    return report


async def list_communities(session: AsyncSession, conversation_id: int) -> list[dict[str, object]]:
    """Communities with their members' names; a dirty one shows no label or summary."""
    names = (
        select(func.array_agg(func.distinct(Entity.name)))
        .join(CommunityMember, (CommunityMember.conversation_id == conversation_id) & (CommunityMember.entity_id == Entity.id))
        .where(CommunityMember.community_id == Community.id, Entity.conversation_id == conversation_id, ~Entity.is_anchor)
        .scalar_subquery()
    )
    rows = await session.execute(
        select(Community.id, Community.label, Community.summary, Community.dirty, names)
        .where(Community.conversation_id == conversation_id)
        .order_by(Community.id)
    )
    return [
        {
            "id": community_id,
            "label": "" if dirty else label,
            "summary": "" if dirty else summary,
            "dirty": dirty,
            "members": sorted(members or []),
        }
        for community_id, label, summary, dirty, members in rows
    ]
