"""Applying a retraction: the planned writes, in order, each through its record kind's
writer (memory.store.<kind>); this module orders them and writes nothing itself.

The graph's part is ``graph_steps`` (memory.forgetting.rules, pure): relations,
entities, provenance, communities and their search documents. Then the re-worded
records (memory.forgetting.rewording), the checkpoint and rolling context, the answers
that used the episode and, for a deletion, the episode itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from memory.episodes.exchange_vectors import refresh_exchange_vectors
from memory.forgetting.plan import Retraction, RetractionPlan, plan_retractions
from memory.forgetting.rewording import write_rewording
from memory.forgetting.rules import Decision, Step, chain_joins, graph_steps
from memory.graph.writes import set_currency
from memory.models.embedder import Embedder
from memory.store import answers, checkpoints, communities, documents, entities, episodes, provenance, relations
from memory.store.rolling_context import save_context
from memory.store.schema import Episode

ANSWER_WITHDRAWN = "[answer withdrawn: a message it drew on was deleted or edited]"

_Writer = Callable[[AsyncSession, int, Step], Awaitable[int | None]]

# The writer of each step, by (record kind, action); only ``documents`` steps count.
_WRITERS: dict[tuple[str, str], _Writer] = {
    ("provenance", "drop_episode"): lambda s, c, step: provenance.drop_episode_links(s, c, step.ids[0]),
    ("communities", "note_changed"): lambda s, c, step: communities.note_changed_relations(s, c, step.ids),
    ("relations", "restore"): lambda s, c, step: set_currency(s, c, step.ids),
    ("relations", "unlink_superseders"): lambda s, c, step: relations.unlink_superseders(s, c, step.ids, step.entities),
    ("relations", "delete"): lambda s, c, step: relations.delete_relations(s, c, step.ids),
    ("entities", "anchor"): lambda s, c, step: entities.make_anchors(s, c, step.ids),
    ("entities", "delete"): lambda s, c, step: entities.delete_entities(s, c, step.ids),
    ("communities", "dirty"): lambda s, c, step: communities.mark_dirty(s, c, step.ids, clear_summary=True),
    ("documents", "remove"): lambda s, c, step: documents.remove_documents(s, c, step.document_kind, step.ids),
}


async def run_steps(session: AsyncSession, conversation_id: int, steps: tuple[Step, ...]) -> int:
    """Run planned steps in order; returns the search documents they removed."""
    removed = 0
    for step in steps:
        removed += await _WRITERS[(step.kind, step.action)](session, conversation_id, step) or 0
    return removed


async def apply_decision(session: AsyncSession, conversation_id: int, decision: Decision) -> int:
    """Write a deletion decision's graph changes (the episode's own rows aside); returns
    the search documents removed. Shared by Stashbird's rule and the benchmark's
    comparison policies."""
    return await run_steps(session, conversation_id, graph_steps(decision))


async def _update_checkpoint(session: AsyncSession, conversation_id: int, plan: RetractionPlan, requeue: bool) -> None:
    """Rolling context and summary lose the episodes; an edited episode is queued again."""
    if plan.checkpoint is None:
        return
    if plan.context.dropped or plan.context.pruned:
        await save_context(session, conversation_id, plan.stored_context, plan.context.entries)
    await checkpoints.forget_episodes(
        session, plan.checkpoint, plan.episode_ids, clear_summary=plan.summary_drew_on, requeue=requeue
    )


async def retract_support(
    session: AsyncSession, conversation_id: int, episode_ids: Collection[int], embedder: Embedder, *, edited: int | None = None
) -> Retraction:
    """Take the episodes' support out of everything derived from them (the shared half
    of delete, edit and a batch: memory.forgetting.batch); ``edited``: the one episode of
    an edit, whose row stays and is queued again. The caller holds both locks and
    handles the episode rows."""
    plan = await plan_retractions(session, conversation_id, episode_ids, for_update=True)
    retraction = plan.retraction()
    retraction.documents_removed = await run_steps(session, conversation_id, graph_steps(plan.decision, edited))
    await write_rewording(session, conversation_id, plan.episode_ids, plan.rewording, embedder)
    await _update_checkpoint(session, conversation_id, plan, edited is not None)
    retraction.answers_withdrawn = await answers.withdraw_answers(session, conversation_id, plan.episode_ids, ANSWER_WITHDRAWN)
    return retraction


@dataclass(frozen=True)
class Removed:
    """Episode rows about to go: (previous, next) and platform message id by id."""

    links: dict[int, tuple[int | None, int | None]]
    message_ids: dict[int, str]


async def unlink_episodes(
    session: AsyncSession, conversation_id: int, gone: Removed
) -> tuple[list[tuple[int | None, int | None]], int]:
    """Put episodes out of every reader's reach, their rows aside: their search documents
    go, the chain is joined over each run of them, a tombstone marks each (which also
    keeps a stored one out of any answer's evidence: memory.retrieval.evidence), and the
    searched vector of each message after a run, which held a share of a deleted one's,
    is recomputed. ``gone`` must be read under the chain lock. Returns the neighbours
    joined and the search documents removed."""
    ids = sorted(gone.links)
    joins = chain_joins(gone.links)
    removed = await documents.remove_documents(session, conversation_id, "episode", ids)
    await episodes.unlink_episodes(session, conversation_id, ids, [(p, n) for p, n in joins if p is not None and n is not None])
    await episodes.leave_tombstones(session, conversation_id, [gone.message_ids[e] for e in ids])
    following = [n for _, n in joins if n is not None]
    if following:
        await refresh_exchange_vectors(session, conversation_id, following)
    return joins, removed


async def remove_episodes(
    session: AsyncSession, conversation_id: int, gone: Removed
) -> tuple[list[tuple[int | None, int | None]], int]:
    """``unlink_episodes``, then drop the rows."""
    joins, removed = await unlink_episodes(session, conversation_id, gone)
    await episodes.drop_episodes(session, conversation_id, sorted(gone.links))
    return joins, removed


async def remove_episode(session: AsyncSession, conversation_id: int, episode: Episode) -> tuple[dict[str, int | None], int]:
    """``remove_episodes`` for one episode; returns its neighbours, now joined, and the
    search documents removed."""
    gone = Removed({episode.id: (episode.prev_id, episode.next_id)}, {episode.id: episode.platform_message_id})
    _, removed = await remove_episodes(session, conversation_id, gone)
    return {"prev": episode.prev_id, "next": episode.next_id}, removed
