"""The scheduler: one APScheduler ``AsyncIOScheduler`` per process (in-memory job store;
no job store is shared), deciding *when*; the memory core does the work, and the work is
shared between processes through claims in Postgres (jobs/claims.py).

A job is a name, a ``due`` query (which items need work now) and a ``work`` coroutine
for one item, with its APScheduler options set explicitly. Each firing is a pass over
the due items, one at a time: claim (skip it if another process holds it), run while
renewing the lease, record the result, release. After each item the pass asks ``due``
again and takes the first item it has not tried yet: a list read once at the start of
a long pass would go stale (an item that became due meanwhile would wait for the whole
pass and the next firing, and the order, oldest backlog first, would be the order of
long ago), and a process would sit idle between firings while work waits. Trying each
item at most once per pass keeps a pass finite and every item's turn fair. Every
database call is asynchronous, so the event loop never blocks on the database.

A job may also name a ``prepare`` coroutine that loads what its work needs (a language
model takes seconds of CPU to load): ``Scheduler.prepare()`` runs it once, before the
first firing takes an item, so the first item after a start is not seconds late.

Other parts register their own jobs (the chat service's deletion sweep, a VACUUM after
deletions) with ``Scheduler.register``; an item not tied to a conversation uses
conversation id 0.

Shutdown stops taking items, lets a running item finish for ``shutdown_grace`` seconds,
then cancels it; a cancelled item's claim is released at once, so another process can
take it without waiting for the lease to expire.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from jobs import claims
from jobs.job import Job, WorkItem
from jobs.settings import JobSettings
from jobs.work import default_jobs
from memory import Memory

log = logging.getLogger(__name__)


def _not_an_overlap(record: logging.LogRecord) -> bool:
    """Drop APScheduler's warning that a firing was skipped because the last one still
    runs: with ``max_instances=1`` and intervals shorter than a pass, that is the design,
    and it was logged every interval for as long as a pass ran (a line per job every
    0.2 s in the process tests, enough to fill an unread stderr pipe)."""
    return "maximum number of running instances" not in str(record.msg)


@dataclass
class ItemResult:
    job: str
    conversation_id: int
    status: str  # ok | failed | released | skipped (held by another process)
    result: dict[str, Any] = field(default_factory=dict)


def owner_id() -> str:
    """This process's name in claims and the run log."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Scheduler:
    """``Scheduler(memory, settings)``; ``register(job)``; ``start()`` inside a running
    event loop; ``await shutdown()``. ``await run_once()`` runs every job's due items
    once, without APScheduler (cron users, tests). ``await prepare()`` before ``start()``
    loads what the jobs need up front (else the first firing does)."""

    def __init__(
        self, memory: Memory, settings: JobSettings, *, jobs: list[Job] | None = None, only: frozenset[int] | None = None
    ) -> None:
        """``jobs``: instead of the core's; ``only``: work on these conversations alone."""
        self.memory = memory
        self.settings = settings
        self.only = only
        self.owner = owner_id()
        self.jobs: dict[str, Job] = {}
        self._aps: AsyncIOScheduler | None = None
        self._stopping = False
        self._running: set[asyncio.Task[Any]] = set()
        self._first_runs: dict[str, datetime | None] = {}
        self._prepared: set[str] = set()
        self._preparing = asyncio.Lock()
        for job in default_jobs(settings) if jobs is None else jobs:
            self.register(job)

    def register(self, job: Job, *, first_run: datetime | None = None) -> None:
        """Add a job; it first runs at ``first_run`` (default: when the scheduler starts,
        or now if it runs already)."""
        if job.name in self.jobs:
            raise ValueError(f"a job named {job.name!r} is registered already")
        self.jobs[job.name] = job
        self._first_runs[job.name] = first_run
        if self._aps is not None:
            self._schedule(job, first_run or datetime.now(UTC))

    async def prepare(self) -> None:
        """Run each registered job's ``prepare`` once (a failure propagates, and is not retried)."""
        async with self._preparing:
            for job in list(self.jobs.values()):
                if job.name not in self._prepared:
                    self._prepared.add(job.name)
                    if job.prepare is not None:
                        await job.prepare(self.memory)

    def start(self) -> None:
        logging.getLogger("apscheduler.scheduler").addFilter(_not_an_overlap)  # added once however often
        self._aps = AsyncIOScheduler(timezone=UTC)
        now = datetime.now(UTC)
        for job in self.jobs.values():
            self._schedule(job, self._first_runs.get(job.name) or now)
        self._aps.start()

    def _schedule(self, job: Job, first_run: datetime) -> None:
        assert self._aps is not None
        self._aps.add_job(
            self._fire,
            "interval",
            args=[job.name],
            id=job.name,
            name=job.name,
            seconds=job.interval,
            next_run_time=first_run,
            coalesce=job.coalesce,
            max_instances=job.max_instances,
            misfire_grace_time=job.misfire_grace_time,
            replace_existing=True,
        )

    async def shutdown(self) -> None:
        self._stopping = True
        if self._running:
            await asyncio.wait(set(self._running), timeout=self.settings.shutdown_grace)
        if self._aps is not None and self._aps.running:
            self._aps.shutdown(wait=False)  # cancels what still runs
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    async def run_once(self) -> list[ItemResult]:
        """Every job once, in registration order."""
        results: list[ItemResult] = []
        for name in self.jobs:
            results += await self.run_job(name)
        return results

    async def _fire(self, name: str) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._running.add(task)
        try:
            await self._prepare_quietly()
            await self.run_job(name)
        except Exception:  # a failed due query must not stop the schedule
            log.exception("job %s failed", name)
        finally:
            self._running.discard(task)

    async def _prepare_quietly(self) -> None:
        """``prepare`` for a firing: a failure is logged and the work runs anyway (its
        items then fail, each on the record, as they would have without it)."""
        try:
            await self.prepare()
        except Exception:
            log.exception("preparing the jobs failed")

    async def run_job(self, name: str) -> list[ItemResult]:
        """One pass: every item the job finds due, each claimed and run by at most one
        process; ``due`` is asked again after each item (see the module doc)."""
        job = self.jobs[name]
        results: list[ItemResult] = []
        tried: set[int] = set()
        while not self._stopping:
            item = await self._next_item(job, tried)
            if item is None:
                break
            tried.add(item.conversation_id)
            results.append(await self._run_item(job, item))
        return results

    async def _next_item(self, job: Job, tried: set[int]) -> WorkItem | None:
        """The first due item of this pass not tried yet (``due`` lists them in the order
        they should be done)."""
        for item in await job.due(self.memory):
            if item.conversation_id not in tried and (self.only is None or item.conversation_id in self.only):
                return item
        return None

    async def _run_item(self, job: Job, item: WorkItem) -> ItemResult:
        lease = self.settings.lease_seconds
        held = await claims.claim(self.memory, item.conversation_id, job.name, self.owner, lease)
        if held is None:
            return ItemResult(job.name, item.conversation_id, "skipped")
        work = asyncio.ensure_future(job.work(self.memory, item))
        heartbeat = asyncio.ensure_future(self._keep(held, work))
        status, result = "failed", {}
        try:
            result, status = await work, "ok"
        except asyncio.CancelledError:
            status, result = "released", {"reason": "shut down" if self._stopping else "lease lost"}
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this process is shutting down; the heartbeat cancelling the work is not
        except Exception as error:
            log.warning("%s of conversation %s failed: %s", job.name, item.conversation_id, error)
            result = {"error": f"{type(error).__name__}: {error}"}
        finally:
            heartbeat.cancel()
            work.cancel()
            await claims.release(self.memory, held, status, result)
        return ItemResult(job.name, item.conversation_id, status, result)

    async def _keep(self, held: claims.Claim, work: asyncio.Future[Any]) -> None:
        """Renew the lease every third of it; stop the work if the lease was lost."""
        lease = self.settings.lease_seconds
        while not work.done():
            await asyncio.sleep(lease / 3)
            if not await claims.renew(self.memory, held, lease):
                log.warning("lease of %s/%s lost; stopping", held.job, held.conversation_id)
                work.cancel()
                return
