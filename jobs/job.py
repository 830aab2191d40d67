"""What a job is: a name, a ``due`` query (which items need work now), a ``work``
coroutine for one item and its APScheduler options. Apart from the scheduler, so that
the core's jobs (jobs/work.py) and the scheduler that runs them (jobs/scheduler.py) both
import it and neither imports the other's module in a circle."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from memory import ConversationRef, Memory


@dataclass(frozen=True)
class WorkItem:
    """One item of a job's work: a conversation (id 0 and no ref for global work)."""

    conversation_id: int
    conversation: ConversationRef | None = None


Due = Callable[[Memory], Awaitable[list[WorkItem]]]
Work = Callable[[Memory, WorkItem], Awaitable[dict[str, Any]]]
Prepare = Callable[[Memory], Awaitable[None]]


@dataclass(frozen=True)
class Job:
    """A scheduled job. ``coalesce``: missed firings run once, not once each;
    ``max_instances``: firings of this job that may overlap in one process;
    ``misfire_grace_time``: seconds late a firing may still run (later ones are skipped)."""

    name: str
    due: Due
    work: Work
    interval: float
    coalesce: bool = True
    max_instances: int = 1
    misfire_grace_time: int | None = 30
    prepare: Prepare | None = None  # loads what ``work`` needs; run once, before the first item
