"""The chat service's Prometheus metrics, in one registry that ``/metrics`` exposes, and
its health report (``/healthz``: ``health_report``, ``health_problems``, ``WorkerHealth``),
here because the report reads the backlog the gauges show, and sets them as it goes.

Declared here, once, so that every connector and the service count into the same
series: a connector increments what it sees (frames it could not parse, reconnects,
whether it is up), the service what it does. Who counts what, so nothing is counted twice:

- ``EVENTS``: accepted, duplicate and failed by the inbox intake (connectors.intake),
  for every platform; refused by the connector that refused it (it knows the raw type).
- ``ACK_SECONDS``: Slack's HTTP acknowledgement by the HTTP edge (bot/http_server.py),
  everything else (Socket Mode, the Discord gateway) by ``ChatService.accept``.
- ``PROCESSED``, ``REPLIES``, ``DELETIONS``, ``WORKER_FAILURES``: the service (replies
  through its outbox, connectors.outbox; worker failures through its ``WorkerHealth``).
- the inbox, outbox and consolidation gauges, and which derived work is shed: set from
  the database when ``/metrics`` or ``/healthz`` is read (``observe_backlog``,
  ``observe_consolidation``), whichever process runs the scheduler.
- ``PARSE_ERRORS``, ``RECONNECTS``: the connectors; ``CONNECTOR_UP``: the connectors
  and ``/healthz`` (from each ``Platform.connected``).

A registry of its own, not the library's global one, so that tests and several services
in one process never see each other's counts by accident.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from memory import InboxBacklog, Memory, Principal, inbox_backlog

log = logging.getLogger(__name__)

REGISTRY = CollectorRegistry(auto_describe=True)

EVENTS = Counter(
    "stashbird_events_total",
    "Platform events by outcome (accepted, duplicate, refused, failed)",
    ["platform", "type", "outcome"],
    registry=REGISTRY,
)
ACK_SECONDS = Histogram(
    "stashbird_ack_seconds",
    "Time from receiving a platform event to acknowledging it",
    ["platform"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)
PARSE_ERRORS = Counter(
    "stashbird_parse_errors_total",
    "Platform frames that could not be parsed and were skipped",
    ["platform", "frame"],
    registry=REGISTRY,
)
CONNECTOR_UP = Gauge("stashbird_connector_up", "1 while the platform connection is up", ["platform"], registry=REGISTRY)
RECONNECTS = Counter("stashbird_reconnects_total", "Platform connections re-established", ["platform"], registry=REGISTRY)

PROCESSED = Counter(
    "stashbird_events_processed_total",
    "Inbox events processed, by outcome (done, rejected as bad input, failed after the last attempt)",
    ["platform", "type", "outcome"],
    registry=REGISTRY,
)
REPLIES = Counter(
    "stashbird_replies_total",
    "Replies (answers, admin results): posted, retried (platform refused or unreachable), given up",
    ["platform", "outcome"],
    registry=REGISTRY,
)
DELETIONS = Counter(
    "stashbird_deletions_total",
    "Message deletions applied from the chat, by the core's status (deleted, tombstoned, ...)",
    ["platform", "status"],
    registry=REGISTRY,
)
SWEEP_REFUSED = Counter(
    "stashbird_sweep_refused_total",
    "Sweeps of a channel that forgot nothing because the history lacked too many checked messages",
    ["platform"],
    registry=REGISTRY,
)
WORKER_FAILURES = Counter(
    "stashbird_worker_failures_total",
    "Rounds of the service's loops (inbox, reply) that failed and were retried (e.g. the database away)",
    ["loop"],
    registry=REGISTRY,
)
INBOX_PENDING = Gauge("stashbird_inbox_pending", "Inbox events waiting to be processed", registry=REGISTRY)
INBOX_FAILED = Gauge("stashbird_inbox_failed", "Inbox events given up on, kept for an operator", registry=REGISTRY)
INBOX_OLDEST = Gauge("stashbird_inbox_oldest_seconds", "Age of the oldest pending inbox event (0: none)", registry=REGISTRY)
REPLIES_PENDING = Gauge("stashbird_replies_pending", "Replies waiting to be posted", registry=REGISTRY)
REPLIES_FAILED = Gauge("stashbird_replies_failed", "Replies given up on, kept for an operator", registry=REGISTRY)
REPLIES_OLDEST = Gauge("stashbird_replies_oldest_seconds", "Age of the oldest reply waiting (0: none)", registry=REGISTRY)
CONSOLIDATION_BACKLOG = Gauge(
    "stashbird_consolidation_backlog_messages", "Stored messages not yet consolidated, all conversations", registry=REGISTRY
)
CONSOLIDATION_LAG = Gauge(
    "stashbird_consolidation_lag_seconds", "Age of the oldest message waiting for consolidation (0: none)", registry=REGISTRY
)

BACKLOG_SHEDDING = Gauge(
    "stashbird_backlog_shedding",
    "1 while the job's work is shed because the consolidation backlog passed STASHBIRD_BACKLOG_SHED_MESSAGES",
    ["job"],
    registry=REGISTRY,
)


def observe_backlog(backlog: InboxBacklog) -> None:
    """Set the inbox and outbox gauges from the inbox's backlog (memory.InboxBacklog)."""
    INBOX_PENDING.set(backlog.pending)
    INBOX_FAILED.set(backlog.failed)
    INBOX_OLDEST.set(backlog.oldest_pending_seconds or 0.0)
    REPLIES_PENDING.set(backlog.replies_pending)
    REPLIES_FAILED.set(backlog.replies_failed)
    REPLIES_OLDEST.set(backlog.oldest_reply_seconds or 0.0)


def observe_consolidation(messages: int, lag_seconds: float | None, shedding: dict[str, bool]) -> None:
    """The consolidation backlog, its lag, and for each job that can be shed whether it is."""
    CONSOLIDATION_BACKLOG.set(messages)
    CONSOLIDATION_LAG.set(lag_seconds or 0.0)
    for job, shed in shedding.items():
        BACKLOG_SHEDDING.labels(job).set(int(shed))


def exposition() -> bytes:
    """The registry in the Prometheus text format (what ``GET /metrics`` returns)."""
    return generate_latest(REGISTRY)


@dataclass
class WorkerHealth:
    """What ``/healthz`` says of the service's own loops (the inbox worker, the reply
    loop): when each last finished a round, and the failure it is waiting out, if any."""

    last_round: dict[str, float] = field(default_factory=dict)  # loop -> time.monotonic()
    errors: dict[str, str] = field(default_factory=dict)  # loop -> the failure of its last round

    def failed(self, name: str, error: BaseException) -> None:
        reason = f"{type(error).__name__}: {error}".splitlines()[0][:300]
        if self.errors.get(name) != reason:  # one line per outage, not one per retry
            log.warning("%s worker waiting (%s)", name, reason)
        self.errors[name] = reason
        WORKER_FAILURES.labels(name).inc()

    def succeeded(self, name: str) -> None:
        self.last_round[name] = time.monotonic()
        self.errors.pop(name, None)

    def as_dict(self) -> dict[str, Any]:
        now = time.monotonic()
        return {
            name: {
                "last_round_seconds_ago": round(now - self.last_round[name], 3) if name in self.last_round else None,
                "error": self.errors.get(name),
            }
            for name in ("inbox", "reply")
        }


def health_problems(connectors: Mapping[str, bool], backlog: InboxBacklog | None, stuck_seconds: float) -> list[str]:
    """What keeps the service from being healthy, one line each (empty: healthy): a
    configured connector not connected, the database unreachable, the inbox stuck (its
    oldest pending event older than ``stuck_seconds``). Replies waiting on a platform are
    not a stuck inbox: they are reported in the backlog. Pure."""
    problems = [f"connector {name} is not connected" for name, up in sorted(connectors.items()) if not up]
    if backlog is None:
        problems.append("database unreachable")
    elif backlog.oldest_pending_seconds is not None and backlog.oldest_pending_seconds > stuck_seconds:
        problems.append(
            f"inbox stuck: {backlog.pending} events pending, the oldest for {backlog.oldest_pending_seconds:.0f} s "
            f"(STASHBIRD_INBOX_STUCK_SECONDS={stuck_seconds:g})"
        )
    return problems


async def health_report(
    memory: Memory, connectors: Mapping[str, bool], worker: WorkerHealth, stuck_seconds: float, *, principal: Principal
) -> dict[str, Any]:
    """Database reachable, connectors connected, the inbox moving, the service's loops
    running: ``ok`` when all is well, else ``problems`` names what is not. Sets the
    connector and backlog gauges from what it read, so ``/metrics`` says the same."""
    try:
        backlog = await inbox_backlog(memory, principal=principal)
    except Exception as error:  # noqa: BLE001 - health reports any database failure
        log.warning("health: database unreachable: %s", error)
        backlog = None
    for name, up in connectors.items():
        CONNECTOR_UP.labels(name).set(int(up))
    if backlog is not None:
        observe_backlog(backlog)
    problems = health_problems(connectors, backlog, stuck_seconds)
    problems += [f"{name} worker failing: {error}" for name, error in sorted(worker.errors.items()) if backlog is not None]
    return {
        "ok": not problems,
        "problems": problems,
        "database": backlog is not None,
        "connectors": dict(connectors),
        "backlog": backlog.as_dict() if backlog is not None else None,
        "worker": worker.as_dict(),
    }
