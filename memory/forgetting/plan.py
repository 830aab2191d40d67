"""Planning a retraction: everything taking one episode's support out (or a batch's:
memory.forgetting.batch) would change,
decided before anything is written, so that the deletion applies it
(memory.forgetting.apply) and the audit's dry run reports it. Reads only.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import BigInteger, and_, any_, cast, func, or_, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from memory.forgetting.rewording import RewordPlan, plan_rewording
from memory.forgetting.rules import ContextChange, Decision, decide_deletions, prune_rolling_context
from memory.forgetting.subgraph import Affected, load_subgraph
from memory.graph.writes import entity_document_text
from memory.store.database import custom_plans
from memory.store.rolling_context import Stored, in_order, load_context
from memory.store.schema import AnswerEvidence, Checkpoint, Entity, SearchDocument


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


async def _context_change(
    session: AsyncSession, conversation_id: int, episode_ids: frozenset[int], gone_entities: set[int], rewording: RewordPlan
) -> tuple[Stored, ContextChange]:
    """The rolling-context entries the episodes or a re-worded entity touch, and what
    they become (forgetting_rules.prune_rolling_context): rewritten to their entity's
    surviving name and type, as re-rendered, or dropped."""
    reworded = {c.entity_id: c.rendered for c in rewording.entities}
    stored = await load_context(session, conversation_id, episode_ids, gone_entities | set(reworded))
    context = in_order(stored)
    drew_on = {e.get("entity_id") for e in context if episode_ids.intersection(e.get("episode_ids", []))}
    drew_on -= gone_entities | set(reworded)
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
    return stored, prune_rolling_context(context, episode_ids, gone_entities, names, reworded)


@dataclass(frozen=True)
class RetractionPlan:
    """What taking the support of ``episode_ids`` (one, or a batch) out would change,
    decided before anything is written: the deletion applies it, the audit's dry run
    reports it."""

    episode_ids: frozenset[int]
    affected: Affected
    decision: Decision
    checkpoint: Checkpoint | None
    rewording: RewordPlan
    stored_context: Stored  # the rolling-context rows ``context`` was computed from
    context: ContextChange
    answers: tuple[int, ...]  # answer traces whose evidence holds one of the episodes (a dry run's only)

    @property
    def summary_drew_on(self) -> bool:
        return self.checkpoint is not None and not self.episode_ids.isdisjoint(self.checkpoint.summary_episode_ids or [])

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
    nothing. ``for_update``: a writer's plan (``plan_retractions``)."""
    return await plan_retractions(session, conversation_id, [episode_id], for_update=for_update)


async def plan_retractions(
    session: AsyncSession, conversation_id: int, episode_ids: Collection[int], *, for_update: bool
) -> RetractionPlan:
    """The plan of taking a set of episodes out at once (``decide_deletions``): what
    deleting them one by one would leave, from one load and one decision. A writer's plan
    (``for_update``) locks the checkpoint row for the writes that follow and leaves
    ``answers`` empty: withdrawing them names them as it deletes their links.

    The rest of the transaction is planned with its values (``custom_plans``): in the
    largest conversation of a 100K-message store the generic plans of the subgraph's
    two loads took 5-7 ms each where a custom plan takes under 1 ms (deletion median
    in that conversation 43-51 ms against 26-31 ms, three alternated runs of 60). At
    1M messages, where planning a statement on search_documents (250 indexes) costs
    about a millisecond more each time, the medians were even (33-41 ms both)."""
    gone = frozenset(episode_ids)
    await custom_plans(session)
    affected = await load_subgraph(session, conversation_id, gone)
    decision = decide_deletions(affected.graph, gone)
    query = select(Checkpoint).where(Checkpoint.conversation_id == conversation_id)
    checkpoint = (await session.execute(query.with_for_update() if for_update else query)).scalar_one_or_none()
    gone_entities = set(decision.entities_removed | decision.entities_anchored)
    rewording = await plan_rewording(
        session, conversation_id, gone, sorted(decision.relations_kept), sorted(decision.entities_kept)
    )
    stored, context = (
        await _context_change(session, conversation_id, gone, gone_entities, rewording)
        if checkpoint is not None
        else ({}, ContextChange([], 0, 0))
    )
    answers: tuple[int, ...] = ()
    if not for_update:  # a writer's DELETE ... RETURNING names them (memory.store.answers)
        traces = (
            select(AnswerEvidence.trace_id)
            .where(AnswerEvidence.conversation_id == conversation_id, AnswerEvidence.episode_id == any_(_array(gone)))
            .distinct()
            .order_by(AnswerEvidence.trace_id)
        )
        answers = tuple((await session.execute(traces)).scalars())
    return RetractionPlan(gone, affected, decision, checkpoint, rewording, stored, context, answers)


def _array(values: Collection[int]) -> Any:
    return cast(sorted(values), ARRAY(BigInteger))


async def documents_to_remove(
    session: AsyncSession, conversation_id: int, decision: Decision, episode_ids: Collection[int]
) -> int:
    """The search documents that applying ``decision`` and removing the episodes would
    remove: the records ``apply_decision`` deletes, anchors or dirties, and the episodes'."""
    kinds = {
        "relation": decision.relations_removed,
        "entity": decision.entities_anchored | decision.entities_removed,
        "community": decision.communities_dirtied,
        "episode": frozenset(episode_ids),
    }
    matches = or_(
        *(and_(SearchDocument.kind == k, SearchDocument.ref_id == any_(_array(ids))) for k, ids in kinds.items() if ids)
    )
    query = select(func.count()).select_from(SearchDocument).where(SearchDocument.conversation_id == conversation_id, matches)
    return int((await session.execute(query)).scalar_one())
