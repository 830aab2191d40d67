"""Backlog shedding: when messages arrive faster than consolidation follows, the work
derived from consolidated messages waits, so that consolidation (what questions are
answered from) does not fall further behind.

Messages are searchable the moment they are stored, whatever the backlog; consolidation
is never shed, and catches up oldest message first across conversations
(memory.store.backlog). Past ``shed_messages`` messages waiting in all conversations the
community jobs (new entities joining communities, summaries regenerated) are shed
first; past twice that, the running summary's rebuild as well. A shed item is not lost:
its conversation stays marked and is looked at again ``shed_retry_seconds`` later, and
runs once the backlog is back under the threshold. The service's ``/healthz`` and
``/metrics`` say so from the same figure (bot/http_server.py).
"""

from __future__ import annotations

# Derived work in the order it is shed: each tier past one more multiple of the threshold.
SHED_TIERS: tuple[tuple[str, ...], ...] = (("communities", "community_regeneration"), ("summary",))
SHEDDABLE = frozenset(job for tier in SHED_TIERS for job in tier)


def shed_jobs(waiting_messages: int, threshold: int) -> frozenset[str]:
    """The jobs to skip now: tier ``n`` (1-based) once more than ``n × threshold``
    messages wait; nothing when ``threshold`` is 0 (shedding off). Pure."""
    if threshold <= 0:
        return frozenset()
    return frozenset(job for tier, jobs in enumerate(SHED_TIERS, start=1) if waiting_messages > tier * threshold for job in jobs)


def shed_warning(waiting_messages: int, threshold: int) -> str | None:
    """The health warning while anything is shed (None: nothing is). Pure."""
    shed = shed_jobs(waiting_messages, threshold)
    if not shed:
        return None
    names = ", ".join(job for tier in SHED_TIERS for job in tier if job in shed)
    return (
        f"consolidation backlog: {waiting_messages} messages waiting (STASHBIRD_BACKLOG_SHED_MESSAGES={threshold}); "
        f"shedding {names} until it is back under"
    )
