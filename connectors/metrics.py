"""The chat service's Prometheus metrics, in one registry that ``/metrics`` exposes.

Declared here, once, so that every connector and the service count into the same
series: a connector increments what it sees (frames it could not parse, reconnects,
whether it is up), the service what it does (events accepted, refused and failed, acks,
answers, deletions). A registry of its own, not the library's global one, so that tests
and several services in one process never see each other's counts by accident.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

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


def exposition() -> bytes:
    """The registry in the Prometheus text format (what ``GET /metrics`` returns)."""
    return generate_latest(REGISTRY)
