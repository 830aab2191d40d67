"""Scheduled work: the scheduler decides when, the memory core does the work, and work
items are claimed in Postgres so any number of processes can run the scheduler.

``Scheduler(memory, settings)`` starts with the core's jobs (jobs/work.py); other parts
add theirs with ``register(Job(...))``.

``JobSettings`` is imported at once (every command reads the settings at start-up,
bot/settings.py); the other names when first used, since they load the memory core.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from jobs.settings import JobSettings

if TYPE_CHECKING:
    from jobs.job import Job, WorkItem
    from jobs.scheduler import ItemResult, Scheduler

_WHERE = {"Job": "jobs.job", "WorkItem": "jobs.job", "ItemResult": "jobs.scheduler", "Scheduler": "jobs.scheduler"}
__all__ = ["ItemResult", "Job", "JobSettings", "Scheduler", "WorkItem"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'jobs' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
