"""The chat service's Prometheus metrics, in one registry that ``/metrics`` exposes.

Declared here, once, so that every connector and the service count into the same
series: a connector increments what it sees (frames it could not parse, reconnects,
whether it is up), the service what it does. Who counts what, so nothing is counted twice:

- ``EVENTS``: accepted, duplicate and failed by the inbox intake (connectors.service),
  for every platform; refused by the connector that refused it (it knows the raw type).
- ``ACK_SECONDS``: Slack's HTTP acknowledgement by the HTTP edge (bot/http_server.py),
  everything else (Socket Mode, the Discord gateway) by ``ChatService.accept``.
- ``PROCESSED``, ``REPLIES``, ``DELETIONS``, ``WORKER_FAILURES``: the service.
- the inbox, outbox and consolidation gauges, and which derived work is shed: set from
  the database when ``/metrics`` or ``/healthz`` is read (``observe_backlog``,
  ``observe_consolidation``), whichever process runs the scheduler.
- ``PARSE_ERRORS``, ``RECONNECTS``: the connectors; ``CONNECTOR_UP``: the connectors
  and ``/healthz`` (from each ``Platform.connected``).

A registry of its own, not the library's global one, so that tests and several services
in one process never see each other's counts by accident.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from memory import InboxBacklog

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
