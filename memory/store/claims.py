"""Work items claimed in Postgres with leases, and the run log (migration 0007; the
tables are ``JobClaim`` and ``JobRun`` in memory/store/schema.py). The scheduler reaches
them through the core's commands (memory/commands/claims.py).

An item is a (conversation, claim name) row of ``job_claims``. A process claims it by
locking the row with ``FOR UPDATE SKIP LOCKED`` (so two processes never wait on each
other) and, if no live lease holds it, writing its owner id and a lease expiry. It
renews the lease while it works and clears it when done. A process killed mid-job
renews nothing, so its item becomes claimable again when the lease runs out: that is
the only way an item held by a dead process is freed, and why the lease must outlast
the renewal interval by a good margin. Every statement names the conversation. Times
are the transaction's ``now()`` (each transaction here is a few statements long): Citus
refuses volatile functions such as ``clock_timestamp()`` in an UPDATE of a distributed
table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

_UPSERT = "INSERT INTO job_claims (conversation_id, job) VALUES (:c, :j) ON CONFLICT DO NOTHING"
_LOCK_FREE = (
    "SELECT owner FROM job_claims WHERE conversation_id = :c AND job = :j "
    "AND (lease_expires_at IS NULL OR lease_expires_at < now()) FOR UPDATE SKIP LOCKED"
)
_TAKE = (
    "UPDATE job_claims SET owner = :o, claimed_at = now(), "
    "lease_expires_at = now() + make_interval(secs => :lease) WHERE conversation_id = :c AND job = :j"
)
_ABANDON = (
    "UPDATE job_runs SET status = 'abandoned', finished_at = now() WHERE conversation_id = :c AND job = :j AND status = 'running'"
)
_START = "INSERT INTO job_runs (conversation_id, job, owner, started_at) VALUES (:c, :j, :o, now()) RETURNING id"
_RENEW = (
    "UPDATE job_claims SET lease_expires_at = now() + make_interval(secs => :lease) "
    "WHERE conversation_id = :c AND job = :j AND owner = :o RETURNING 1"
)
_RELEASE = "UPDATE job_claims SET owner = NULL, lease_expires_at = NULL WHERE conversation_id = :c AND job = :j AND owner = :o"
_FINISH = (
    "UPDATE job_runs SET status = :s, result = CAST(:r AS jsonb), finished_at = now() WHERE conversation_id = :c AND id = :id"
)


@dataclass(frozen=True)
class Claim:
    conversation_id: int
    job: str
    owner: str
    run_id: int


async def claim(engine: AsyncEngine, conversation_id: int, job: str, owner: str, lease: float) -> Claim | None:
    """Take the item if no live lease holds it; runs of a dead holder are marked abandoned."""
    key = {"c": conversation_id, "j": job}
    async with engine.begin() as connection:
        await connection.execute(text(_UPSERT), key)
        if (await connection.execute(text(_LOCK_FREE), key)).first() is None:
            return None
        await connection.execute(text(_TAKE), {**key, "o": owner, "lease": lease})
        await connection.execute(text(_ABANDON), key)
        run_id = (await connection.execute(text(_START), {**key, "o": owner})).scalar_one()
    return Claim(conversation_id, job, owner, int(run_id))


async def renew(engine: AsyncEngine, held: Claim, lease: float) -> bool:
    """Extend the lease; False when it was lost (expired and taken by another process)."""
    async with engine.begin() as connection:
        row = await connection.execute(text(_RENEW), {"c": held.conversation_id, "j": held.job, "o": held.owner, "lease": lease})
        return row.first() is not None


async def release(engine: AsyncEngine, held: Claim, status: str, result: dict[str, Any]) -> None:
    """Record how the run ended and free the item (only if this process still holds it)."""
    async with engine.begin() as connection:
        await connection.execute(
            text(_FINISH),
            {"c": held.conversation_id, "id": held.run_id, "s": status, "r": json.dumps(result, default=str)},
        )
        await connection.execute(text(_RELEASE), {"c": held.conversation_id, "j": held.job, "o": held.owner})


_LAST_RUNS = text(
    "/* multi-shard: jobs-status */ "
    "SELECT DISTINCT ON (r.conversation_id, r.job) r.conversation_id, r.job, r.owner, "
    "CASE WHEN r.status = 'running' AND (c.owner IS DISTINCT FROM r.owner OR c.lease_expires_at IS NULL "
    "OR c.lease_expires_at < now()) THEN 'abandoned' ELSE r.status END, r.result, r.started_at, r.finished_at "
    "FROM job_runs r LEFT JOIN job_claims c ON c.conversation_id = r.conversation_id AND c.job = r.job "
    "WHERE r.conversation_id = ANY(:ids) ORDER BY r.conversation_id, r.job, r.id DESC"
)


@dataclass(frozen=True)
class RunRecord:
    conversation_id: int
    job: str
    owner: str
    status: str
    result: dict[str, Any]
    started_at: datetime
    finished_at: datetime | None


async def last_runs(engine: AsyncEngine, conversation_ids: list[int]) -> dict[tuple[int, str], RunRecord]:
    """The newest run of each job for each of these conversations.

    A run left ``running`` whose owner no longer holds the item's live lease is reported
    ``abandoned``: a process killed after its item's work committed and before the run
    was recorded leaves nothing due, so no claim ever marks that run (``claim`` marks
    only the runs of an item it takes again)."""
    async with engine.connect() as connection:
        rows = await connection.execute(_LAST_RUNS, {"ids": conversation_ids})
        return {(row[0], row[1]): RunRecord(*row) for row in rows}
