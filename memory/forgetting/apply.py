"""Applying a retraction: the planned writes, in order, each through its record kind's
writer (memory.store.<kind>); this module orders them and writes nothing itself.

The graph's part is ``graph_steps`` (memory.forgetting.rules, pure): relations,
entities, provenance, communities and their search documents. Then the re-worded
records (memory.forgetting.rewording), the checkpoint and rolling context, the answers
that used the episode and, for a deletion, the episode itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncSession

from memory.episodes.exchange_vectors import refresh_exchange_vectors
from memory.forgetting.plan import Retraction, RetractionPlan, plan_retraction
from memory.forgetting.rewording import write_rewording
from memory.forgetting.rules import Decision, Step, graph_steps
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
    """Rolling context and summary lose the episode; an edited episode is queued again."""
    if plan.checkpoint is None:
        return
    if plan.context.dropped or plan.context.pruned:
        await save_context(session, conversation_id, plan.stored_context, plan.context.entries)
    await checkpoints.forget_episode(
        session, plan.checkpoint, plan.episode_id, clear_summary=plan.summary_drew_on, requeue=requeue
    )


async def retract_support(
    session: AsyncSession, conversation_id: int, episode_id: int, embedder: Embedder, *, requeue: bool
) -> Retraction:
    """Take one episode's support out of everything derived from it (the shared half of
    delete and edit); the caller holds both locks and handles the episode row."""
    plan = await plan_retraction(session, conversation_id, episode_id, for_update=True)
    retraction = plan.retraction()
    steps = graph_steps(plan.decision, episode_id if requeue else None)
    retraction.documents_removed = await run_steps(session, conversation_id, steps)
    await write_rewording(session, conversation_id, episode_id, plan.rewording, embedder)
    await _update_checkpoint(session, conversation_id, plan, requeue)
    retraction.answers_withdrawn = await answers.withdraw_answers(session, conversation_id, episode_id, ANSWER_WITHDRAWN)
    return retraction


async def remove_episode(session: AsyncSession, conversation_id: int, episode: Episode) -> tuple[dict[str, int | None], int]:
    """Unlink an episode from its chain and drop it with its search document, leave a
    tombstone, then recompute the searched vector of the message after it, which held a
    share of the deleted one's. Returns the neighbours that were joined and the search
    documents removed."""
    removed = await documents.remove_documents(session, conversation_id, "episode", [episode.id])
    await episodes.remove_episode(session, conversation_id, episode.id, episode.prev_id, episode.next_id)
    await episodes.leave_tombstone(session, conversation_id, episode.platform_message_id)
    if episode.next_id is not None:
        await refresh_exchange_vectors(session, conversation_id, [episode.next_id])
    return {"prev": episode.prev_id, "next": episode.next_id}, removed
