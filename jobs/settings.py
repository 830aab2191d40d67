"""The scheduler's settings, each default written here once (bot/settings.py reads and
bounds the environment variables that override them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JobSettings:
    interval_seconds: float = 5.0  # how often each job looks for due work
    consolidate_tokens: int = 2_000  # consolidate once this much text waits ...
    consolidate_idle_seconds: float = 60.0  # ... or the conversation was quiet this long
    consolidate_max_wait_seconds: float = 30.0  # ... or its oldest waiting message is this old
    consolidate_max_tokens: int = 4_000  # one run takes at most this much of the oldest waiting text (0: all)
    lease_seconds: float = 60.0  # a claim held by a dead process is free after this
    shutdown_grace: float = 10.0  # a running item may finish for this long on shutdown
    misfire_grace_seconds: int = 30  # a firing this late is skipped (the next one runs)
    rebuild_share: float = 0.2  # full community rebuild past this share of new entities
    shed_messages: int = 5_000  # past this many messages waiting for consolidation, derived work is shed (0: never)
    shed_retry_seconds: float = 30.0  # a conversation whose work was shed is looked at again after this
