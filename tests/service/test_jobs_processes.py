"""Integration: scheduler processes (real subprocesses) sharing one real database.

Two ``stashbird jobs run`` processes (LLM: the scripted server) consolidate and build
communities for several conversations. The first extraction call hangs; the process
making it is SIGKILLed mid-item, and the other process takes the item over once the
(short) lease expires. Every message is consolidated exactly once and no item is ever
run by two processes at the same time.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

import memory as api
from lab.standins import scripted_memory
from lab.standins.scripted_llm import ScriptedLLMServer
from memory.core import Memory, open_memory
from memory.models.embedder import LocalEmbedder
from memory.store.conversations import ConversationRef
from tests.database.test_consolidation import messages

OPERATOR = api.Principal.operator("test")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def fresh(new_database: Any, embedder: LocalEmbedder) -> AsyncIterator[tuple[str, Memory]]:
    """A database of its own (the schedulers look at every conversation in it), migrated
    here so the subprocesses do not race to migrate it."""
    url = new_database()
    memory = await open_memory(url, embedder)
    yield url, memory
    await memory.close()


async def start(args: list[str], env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *args, cwd=ROOT, env={**os.environ, **env}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )


async def ready(process: asyncio.subprocess.Process, word: bytes = b"running") -> None:
    assert process.stderr is not None
    async with asyncio.timeout(60):
        while word not in await process.stderr.readline():
            assert process.returncode is None


async def drain(process: asyncio.subprocess.Process, into: bytearray) -> None:
    """Read the process's log as it is written: a pipe no one reads fills (64 KB) and
    the next write blocks the process mid-item, so its lease runs out while it waits."""
    assert process.stderr is not None
    while line := await process.stderr.readline():
        into.extend(line)


async def runs(memory: Memory) -> list[dict[str, Any]]:
    async with memory._engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT conversation_id, job, owner, status, result, started_at, finished_at FROM job_runs ORDER BY id")
        )
        return [dict(row._mapping) for row in rows]


async def settled(memory: Memory) -> bool:
    items = await api.backlog(memory, principal=OPERATOR)
    return all(not (b.unconsolidated_messages or b.dirty_communities or b.graph_changed) for b in items)


def hang_first_extraction(llm: ScriptedLLMServer) -> None:
    for operation, handler in scripted_memory.HANDLERS.items():
        llm.on(operation, handler)
    llm.on("summarize_community", lambda request: {"name": "Hikers", "summary": "They hike together."})
    llm.timeout_next(1, seconds=120, operation="extract")


async def test_two_processes_do_every_item_once_and_take_over_a_killed_ones(
    fresh: tuple[str, Memory], scripted_llm: ScriptedLLMServer
) -> None:
    url, memory = fresh
    hang_first_extraction(scripted_llm)
    env = {
        "DATABASE_URL": url,
        "STASHBIRD_JOBS_INTERVAL": "0.2",
        "STASHBIRD_CONSOLIDATE_TOKENS": "0",
        "STASHBIRD_JOB_LEASE_SECONDS": "2",
        "STASHBIRD_LLM_BASE_URL": scripted_llm.base_url,
        "STASHBIRD_LLM_API_KEY": "x",
    }
    workers = [await start([sys.executable, "-m", "bot.cli", "jobs", "run"], env) for _ in range(2)]
    try:
        await asyncio.gather(*(ready(w) for w in workers))
        logs = [bytearray() for _ in workers]
        drains = [asyncio.create_task(drain(w, log)) for w, log in zip(workers, logs, strict=True)]
        refs = [ConversationRef("test", "", f"p-{uuid.uuid4().hex[:8]}") for _ in range(4)]
        for n, ref in enumerate(refs):
            rows = [
                (f"{n}-{i}", speaker, f"{speaker} and {friend} hiked to Lake Tahoe{n} on day {i}.")
                for i, (speaker, friend) in enumerate([("Ann", "Bob"), ("Bob", "Cy"), ("Cy", "Ann"), ("Dee", "Eli")])
            ]
            await api.ingest(memory, ref, messages(rows), principal=OPERATOR)
        async with asyncio.timeout(60):  # the held request: the first recorded may be another, sent at once
            while not (held := [r for r in scripted_llm.chat_requests("extract") if r.outcome == "timeout"]):
                await asyncio.sleep(0.05)
        stuck = next(n for n in range(len(refs)) if f"Tahoe{n} " in held[0].user)
        stuck_id = await api.resolve_conversation(memory, refs[stuck], principal=OPERATOR)
        async with asyncio.timeout(30):
            while not (holder := [r for r in await runs(memory) if r["conversation_id"] == stuck_id]):
                await asyncio.sleep(0.05)
        victim = next(w for w in workers if holder[0]["owner"].split(":")[1] == str(w.pid))
        survivor = next(w for w in workers if w is not victim)
        await asyncio.sleep(1.0)  # mid-item, having renewed its lease
        victim.send_signal(signal.SIGKILL)
        killed_at = datetime.now(UTC)
        async with asyncio.timeout(90):
            while not await settled(memory):
                await asyncio.sleep(0.3)
    finally:
        for worker in workers:
            if worker.returncode is None:
                worker.send_signal(signal.SIGTERM)
        codes = [await asyncio.wait_for(w.wait(), 60) for w in workers]
        await asyncio.gather(*drains)
    assert not any(b"maximum number of running instances" in log for log in logs)  # overlaps are not logged
    assert codes[workers.index(victim)] == -signal.SIGKILL and codes[workers.index(survivor)] == 0

    log = await runs(memory)
    stuck_runs = [r for r in log if (r["conversation_id"], r["job"]) == (stuck_id, "consolidation")]
    taken_over = [(r["owner"].split(":")[1], r["status"]) for r in stuck_runs]
    assert taken_over[:2] == [(str(victim.pid), "abandoned"), (str(survivor.pid), "ok")]
    takeover = [r for r in log if r["conversation_id"] == stuck_id and r["status"] == "ok"][0]
    assert (takeover["started_at"] - killed_at).total_seconds() > 0.5  # only once the renewed lease ran out
    # Only the victim's runs may be left unfinished: one killed after its item's work
    # committed and before the run was recorded is done, so nothing claims it again.
    left = [r for r in log if r["status"] not in ("ok", "abandoned")]
    assert all(r["status"] == "running" and r["owner"].split(":")[1] == str(victim.pid) for r in left), left
    await asyncio.sleep(max(0.0, 2.5 - (datetime.now(UTC) - killed_at).total_seconds()))  # the victim's leases run out
    status = await api.last_runs(memory, sorted({r["conversation_id"] for r in log}), principal=OPERATOR)
    assert not [run for run in status.values() if run.status == "running"]  # the status shows no dead run as running
    done = [r for r in log if r["job"] == "consolidation" and r["status"] == "ok"]
    assert sum(r["result"]["episodes"] for r in done) == 4 * 4  # no message consolidated twice
    assert not any(r["result"]["stopped"] for r in done)
    by_item: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for run in log:
        by_item.setdefault((run["conversation_id"], run["job"]), []).append(run)
    for item_runs in by_item.values():  # one process at a time on each item
        spans = sorted((r["started_at"], r["finished_at"]) for r in item_runs)
        assert all(earlier[1] <= later[0] for earlier, later in zip(spans, spans[1:], strict=False))
    for ref in refs:
        listed = await api.list_communities(memory, ref, principal=OPERATOR)
        assert listed and all(c["summary"] == "They hike together." for c in listed)
