"""The core's scheduled jobs: what is due, and the memory command that does it.

- ``consolidation``: conversations whose waiting text passes ``consolidate_tokens``,
  that were quiet for ``consolidate_idle_seconds`` or whose oldest waiting message is
  ``consolidate_max_wait_seconds`` old, oldest backlog first. One run takes at most
  ``consolidate_max_tokens`` of the oldest waiting text: a conversation that fell
  behind catches up in several turns, each after the conversations whose messages
  waited longer (near first-in first-out across conversations), instead of one long
  run during which their older messages wait. It loads the offline extractor's model
  when the scheduler prepares, not during its first run.
  After a run, a conversation past ``own_index_rows(kind)`` documents of a kind gets
  its own vector index (``memory.index_conversation``, built concurrently, once).
- ``communities``: conversations whose graph changed since the last community pass:
  new entities join their neighbours' community, or a full rebuild past
  ``rebuild_share``. Not while the conversation's consolidation is due: the next run
  changes the graph again and the pass would be redone after it, so a conversation
  that fell behind spends its turns catching up and gets one pass when it has.
- ``community_regeneration``: conversations with warm dirty communities (after
  deletions, edits or joins): re-summarised from surviving members, or dissolved. The
  most used lately first (answers count uses of the communities their evidence came
  from, memory/communities/use.py), across conversations and within one; ties: the one
  dirty the longest first; at most ``regenerate_max`` per conversation and run (the
  conversation is due again after it, behind the others). A cold community (not used
  lately) is not regenerated: it stays dirty, its stale summary out of search, until an
  answer uses it, which marks its conversation due. A busy topic's summary is back
  first; a cold one's waits until it is wanted.
- ``summary``: a running summary a deletion cleared and whose rebuild did not finish.
- ``retention``: conversations whose oldest message is past their retention window (the
  conversation's own, else ``STASHBIRD_RETENTION_DAYS``): forgotten through Algorithm 1,
  oldest first, in batches (``memory.apply_retention``), as ``job:retention``. A run
  forgets at most a bounded number; the conversation is due again at once if more is
  past the window (forgetting marks it), so a long history is caught up in turns.

Jobs run in this order in ``run_once``, so one pass takes new messages all the way to
regenerated communities.

Discovery reads only the conversations due by now (``due_backlog``: every write marks
its conversation due), the longest waiting first, at most ``DISCOVERY_LIMIT`` at a time.
A due conversation no job wants now is deferred (``next_look``): to when its waiting
messages become due, or until the next write when nothing waits, but never past the
moment its oldest message passes its retention window. A tick costs what is due, not
what exists.

Backlog shedding (jobs/shed.py): past ``shed_messages`` messages waiting in all
conversations, the community jobs find nothing due (and the summary's past twice that);
a conversation only they want is deferred ``shed_retry_seconds``, and their work runs
once the backlog is back under.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from jobs.job import Due, Job, Prepare, Work, WorkItem
from jobs.settings import JobSettings
from jobs.shed import SHEDDABLE, shed_jobs, shed_warning
from memory import (
    Backlog,
    Memory,
    Principal,
    apply_retention,
    consolidate,
    defer_backlog,
    due_backlog,
    index_conversation,
    prepare_consolidation,
    regenerate_communities,
    regenerate_summary,
    update_communities,
    waiting_backlog,
    watch_retention_default,
)

log = logging.getLogger(__name__)
SCHEDULER = Principal.job("scheduler")
RETENTION = Principal.job("retention")
DISCOVERY_LIMIT = 1000  # due conversations read per discovery; the rest on the next


async def discover(memory: Memory, settings: JobSettings, shed: frozenset[str] = frozenset()) -> list[Backlog]:
    """The due conversations some job wants now; the others are deferred (``next_look``),
    those only shed jobs want to ``shed_retry_seconds`` from now."""
    now = datetime.now(UTC)
    wanted = []
    for item in await due_backlog(memory, principal=SCHEDULER, limit=DISCOVERY_LIMIT):
        look = next_look(item, settings, now, shed)
        if look is not None and look <= now:
            wanted.append(item)
        else:
            await defer_backlog(memory, item, look, principal=SCHEDULER)
    return wanted


async def shedding(memory: Memory, settings: JobSettings) -> frozenset[str]:
    """The jobs shed now, from every conversation's consolidation backlog (jobs.shed)."""
    if settings.shed_messages <= 0:
        return frozenset()
    waiting = await waiting_backlog(memory, principal=SCHEDULER)
    shed = shed_jobs(waiting.messages, settings.shed_messages)
    _log_change(shed, waiting.messages, settings.shed_messages)
    return shed


_shed_logged: list[frozenset[str]] = [frozenset()]  # what this process last logged as shed


def _log_change(shed: frozenset[str], messages: int, threshold: int) -> None:
    """One log line when shedding starts, widens or ends, not one per tick."""
    if shed != _shed_logged[0]:
        _shed_logged[0] = shed
        if shed:
            log.warning("%s", shed_warning(messages, threshold))
        else:
            log.warning("consolidation backlog back under %d messages (%d waiting): derived work resumes", threshold, messages)


def _due(
    settings: JobSettings,
    name: str,
    select: Callable[[Backlog], bool],
    order: Callable[[Backlog], Any] = lambda b: b.conversation_id,
) -> Due:
    async def due(memory: Memory) -> list[WorkItem]:
        shed = await shedding(memory, settings) if name in SHEDDABLE else frozenset()
        found = await discover(memory, settings, shed)
        if name in shed:
            return []
        waiting = [b for b in found if select(b)]
        return [WorkItem(b.conversation_id, b.conversation) for b in sorted(waiting, key=order)]

    return due


def wanted_by(item: Backlog, settings: JobSettings, now: datetime) -> frozenset[str]:
    """The jobs that want the conversation now. Pure."""
    wants = {
        "consolidation": consolidation_due(settings, now)(item),
        "communities": item.graph_changed,
        "community_regeneration": regeneration_due(item),
        "summary": item.summary_dirty,
        "retention": retention_due(now)(item),
    }
    return frozenset(job for job, want in wants.items() if want)


def next_look(item: Backlog, settings: JobSettings, now: datetime, shed: frozenset[str] = frozenset()) -> datetime | None:
    """When discovery should look at the conversation next: ``now`` while some job not
    shed wants it; when its waiting messages become due (quiet long enough, or the oldest
    waited too long; more messages mark it due anyway), ``shed_retry_seconds`` from now
    while only shed jobs want it, or when its oldest message passes its retention window,
    whichever is sooner; None when nothing waits. Pure."""
    wanted = wanted_by(item, settings, now)
    if wanted - shed:
        return now
    looks = [now + timedelta(seconds=settings.shed_retry_seconds)] if wanted else []
    if item.retention_due is not None:
        looks.append(item.retention_due)
    if item.unconsolidated_messages and item.newest_unconsolidated is not None and item.oldest_unconsolidated is not None:
        looks.append(
            min(
                item.newest_unconsolidated + timedelta(seconds=settings.consolidate_idle_seconds),
                item.oldest_unconsolidated + timedelta(seconds=settings.consolidate_max_wait_seconds),
            )
        )
    return min(looks, default=None)


def consolidation_due(settings: JobSettings, now: datetime | None = None) -> Callable[[Backlog], bool]:
    """Enough waiting text, a quiet conversation, or a message waiting too long (a steady
    trickle is never quiet and may take long to fill the token threshold)."""

    def due(item: Backlog) -> bool:
        if not item.unconsolidated_messages or item.newest_unconsolidated is None or item.oldest_unconsolidated is None:
            return False
        at = now or datetime.now(UTC)
        return (
            item.unconsolidated_tokens >= settings.consolidate_tokens
            or (at - item.newest_unconsolidated).total_seconds() >= settings.consolidate_idle_seconds
            or (at - item.oldest_unconsolidated).total_seconds() >= settings.consolidate_max_wait_seconds
        )

    return due


def retention_due(now: datetime | None = None) -> Callable[[Backlog], bool]:
    """The conversation's oldest message is past its retention window."""
    return lambda item: item.retention_due is not None and item.retention_due <= (now or datetime.now(UTC))


def communities_due(settings: JobSettings, now: datetime | None = None) -> Callable[[Backlog], bool]:
    """The graph changed since the last community pass, and no consolidation is due."""
    consolidating = consolidation_due(settings, now)
    return lambda item: item.graph_changed and not consolidating(item)


def regeneration_due(item: Backlog) -> bool:
    """A dirty community that is not cold waits (cold ones wait for an answer). Pure."""
    return item.warm_communities > 0


def most_used_first(item: Backlog) -> tuple[float, datetime, int]:
    """Community regeneration's order: the conversation whose dirty community was used
    most lately first, then the one with the community dirty the longest. Pure."""
    return (-item.dirty_use, item.dirty_since or datetime.max.replace(tzinfo=UTC), item.conversation_id)


def _ref(item: WorkItem) -> Any:
    assert item.conversation is not None
    return item.conversation


def default_jobs(settings: JobSettings) -> list[Job]:
    every = settings.interval_seconds
    grace = settings.misfire_grace_seconds

    async def prepare_one(memory: Memory) -> None:
        await prepare_consolidation(memory)

    async def consolidate_one(memory: Memory, item: WorkItem) -> dict[str, Any]:
        cap = settings.consolidate_max_tokens or None
        report = (await consolidate(memory, _ref(item), principal=SCHEDULER, max_tokens=cap)).as_dict()
        # Consolidation is where a conversation grows (its messages came just before):
        # past own_index_rows(kind) documents of a kind it gets its own vector index.
        indexes = await index_conversation(memory, _ref(item), principal=SCHEDULER)
        return {**report, "indexes_built": indexes.built} if indexes.built else report

    async def communities_one(memory: Memory, item: WorkItem) -> dict[str, Any]:
        report = await update_communities(memory, _ref(item), principal=SCHEDULER, rebuild_share=settings.rebuild_share)
        return report.as_dict()

    async def regenerate_one(memory: Memory, item: WorkItem) -> dict[str, Any]:
        report = await regenerate_communities(
            memory, _ref(item), principal=SCHEDULER, limit=settings.regenerate_max, include_cold=False
        )
        return report.as_dict()

    async def summary_one(memory: Memory, item: WorkItem) -> dict[str, Any]:
        return {"rebuilt": await regenerate_summary(memory, _ref(item), principal=SCHEDULER)}

    async def prepare_retention(memory: Memory) -> None:
        await watch_retention_default(memory, principal=RETENTION)

    async def retention_one(memory: Memory, item: WorkItem) -> dict[str, Any]:
        return (await apply_retention(memory, _ref(item), principal=RETENTION)).as_dict()

    oldest_first = lambda b: (b.oldest_unconsolidated or datetime.max.replace(tzinfo=UTC), b.conversation_id)  # noqa: E731

    def core(name: str, due: Due, work: Work, prepare: Prepare | None = None) -> Job:
        """Explicit options: missed firings run once; one firing at a time per process (the
        claims share the items between processes); a firing later than ``grace`` is skipped."""
        return Job(name, due, work, every, coalesce=True, max_instances=1, misfire_grace_time=grace, prepare=prepare)

    return [
        core(
            "consolidation",
            _due(settings, "consolidation", consolidation_due(settings), oldest_first),
            consolidate_one,
            prepare_one,
        ),
        core("communities", _due(settings, "communities", communities_due(settings)), communities_one),
        core(
            "community_regeneration",
            _due(settings, "community_regeneration", regeneration_due, most_used_first),
            regenerate_one,
        ),
        core("summary", _due(settings, "summary", lambda b: b.summary_dirty), summary_one),
        core("retention", _due(settings, "retention", lambda b: retention_due()(b)), retention_one, prepare_retention),
    ]
