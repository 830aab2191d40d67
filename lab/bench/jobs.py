"""``stashbird bench jobs``: scheduler processes sharing one database under a steady load.

``--conversations`` conversations (default 20) each receive ``--rate`` messages a second
(default 5; LoCoMo turns, re-timed to now) for ``--duration`` seconds, ingested by this
process (the fast path). ``--processes`` (default 2) ``stashbird jobs run`` subprocesses
share the background work on the same database: consolidation (offline extractor),
community membership and regeneration. Every ``--delete-every`` seconds a consolidated
message that supports a member of a clean community is deleted.

Figures:
- consolidation lag: from a message's arrival (``ingested_at``) until the checkpoint
  covers it, sampled every 0.5 s; messages still waiting at the end count with their age;
  also per conversation (the lowest and highest median and p99: a conversation that
  starves shows here);
- regeneration lag: from a deletion until each community it dirtied is clean again
  (regenerated or dissolved); communities still dirty at the end count with their age;
- duplicate work: runs of one item by two processes at once, messages consolidated more
  than once, chunks extracted and then dropped because another run saved them first;
- each process's CPU: seconds (user + system) from the start of the load, and share of
  the workers' total; and how busy it was: the share of the time from the start of the
  load until the last run ended during which it was running an item of some job (what
  is left is polling and idling between firings);
- CPU per message: this process per message ingested (embedding and storing each
  message, plus the watching), the workers per message consolidated (with the
  community jobs and the polling), the database server per message ingested (every
  server process, exited ones included, when the server runs on this machine), and the
  rate their sum allows on this machine's cores, load aside.
After the load stops, the workers get up to ``--drain`` seconds to finish the backlog.

``--idle M`` adds M quiet conversations beside them (bulk-inserted: two old messages
each, consolidated, written once and nothing waiting), the many channels of a hosted
deployment where nothing happens. Before the load, with the N conversations each
holding one waiting message, the discovery of one tick (every default job's ``due``,
as each firing asks it) is timed ``--ticks`` times: its cost should follow the
conversations that are due, not all N + M. ``--duration 0`` measures only that.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psutil

from bot.runtime import build_embedder
from bot.settings import Settings
from jobs import JobSettings
from jobs.work import default_jobs
from lab.bench.common import DEFAULT_LOCOMO, load_locomo, median, percentile
from lab.probes import (
    add_idle_conversations,
    backend_pid,
    consolidated_messages,
    consolidation_lags,
    deletable_messages,
    dirty_among,
    drop_embedded_database,
    job_runs,
    waiting_ages,
)
from memory import (
    ConversationRef,
    Memory,
    Message,
    Principal,
    backlog,
    forget,
    ingest,
    open_memory,
    resolve_conversation,
    start_embedded,
)

BENCH = Principal.operator("bench")
DATABASE = "stashbird_bench_jobs"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--locomo", default=str(DEFAULT_LOCOMO), help="folder of LoCoMo files (message texts)")
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--rate", type=float, default=5.0, help="messages per second per conversation")
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of load")
    parser.add_argument("--processes", type=int, default=2, help="scheduler processes")
    parser.add_argument("--delete-every", type=float, default=5.0, help="seconds between deletions")
    parser.add_argument("--drain", type=float, default=60.0, help="seconds the workers get to finish after the load")
    parser.add_argument("--interval", type=float, default=1.0, help="STASHBIRD_JOBS_INTERVAL of the workers")
    parser.add_argument("--consolidate-tokens", type=int, default=2000, help="STASHBIRD_CONSOLIDATE_TOKENS of the workers")
    parser.add_argument("--idle", type=int, default=0, help="quiet conversations added beside the loaded ones")
    parser.add_argument("--ticks", type=int, default=10, help="discovery ticks timed before the load")


@dataclass
class Observed:
    lags_by_conversation: dict[int, list[float]] = field(default_factory=dict)
    regeneration_lags: list[float] = field(default_factory=list)
    watermarks: dict[int, int] = field(default_factory=dict)
    waiting: dict[int, tuple[int, float]] = field(default_factory=dict)  # community -> (conversation, dirtied at)
    ingested: int = 0
    deleted: int = 0
    unfinished: int = 0  # messages still waiting when the drain ended (counted with their age)
    ticks: list[float] = field(default_factory=list)  # ms of each timed discovery tick

    def lag(self, conversation_id: int, lags: list[float]) -> None:
        self.lags_by_conversation.setdefault(conversation_id, []).extend(lags)

    @property
    def consolidation_lags(self) -> list[float]:
        return [lag for lags in self.lags_by_conversation.values() for lag in lags]


async def _start_workers(count: int, url: str, args: argparse.Namespace) -> list[asyncio.subprocess.Process]:
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "STASHBIRD_JOBS_INTERVAL": str(args.interval),
        "STASHBIRD_CONSOLIDATE_TOKENS": str(args.consolidate_tokens),
        "STASHBIRD_CONSOLIDATE_IDLE_SECONDS": "10",
        "STASHBIRD_LLM_BASE_URL": "",
        "STASHBIRD_LLM_API_KEY": "",
    }
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot.cli",
            "jobs",
            "run",
            env=env,
            stderr=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
        )
        for _ in range(count)
    ]
    for worker in workers:
        assert worker.stderr is not None
        while b"running" not in await worker.stderr.readline():
            if worker.returncode is not None:
                raise RuntimeError("a scheduler process failed to start")
    return workers


async def _feed(
    memory: Memory, ref: ConversationRef, turns: list[tuple[str, str]], args: argparse.Namespace, seen: Observed, stop_at: float
) -> None:
    """Ingest the messages that are due, once a second: ``rate`` a second on average."""
    sent = 0
    start = time.monotonic()
    while time.monotonic() < stop_at:
        due = int((time.monotonic() - start) * args.rate) - sent
        batch = [
            Message(f"b{sent + i}", speaker, speaker, text, datetime.now(UTC))
            for i, (speaker, text) in enumerate(turns[sent % len(turns) :][:due])
        ]
        if batch:
            await ingest(memory, ref, batch, principal=BENCH)
            sent += len(batch)
            seen.ingested += len(batch)
        await asyncio.sleep(1.0)


async def _watch(memory: Memory, ids: dict[int, ConversationRef], seen: Observed) -> None:
    """Record consolidation lags of newly covered messages and regeneration lags."""
    for cid in ids:
        rows = await consolidation_lags(memory, cid, seen.watermarks.get(cid, 0))
        if rows:
            seen.lag(cid, [lag for _, lag in rows])
            seen.watermarks[cid] = max(episode for episode, _ in rows)
        waiting = [c for c, (owner, _) in seen.waiting.items() if owner == cid]
        if waiting:
            dirty = await dirty_among(memory, cid, waiting)
            for community in set(waiting) - dirty:
                seen.regeneration_lags.append(time.monotonic() - seen.waiting.pop(community)[1])


async def _delete_one(memory: Memory, ids: dict[int, ConversationRef], rng: random.Random, seen: Observed) -> None:
    cid = rng.choice(sorted(ids))
    candidates = await deletable_messages(memory, cid)
    if not candidates:
        return
    report = await forget(memory, ids[cid], rng.choice(candidates), principal=BENCH)
    now = time.monotonic()
    for community in set(report.retraction.communities_dirtied) - set(seen.waiting):
        seen.waiting[community] = (cid, now)
    seen.deleted += 1


async def _observe(
    memory: Memory, ids: dict[int, ConversationRef], args: argparse.Namespace, seen: Observed, stop_at: float
) -> None:
    """Watch every 0.5 s and delete every ``delete_every`` s while the load runs and
    during the drain (communities appear only after the first consolidations); the
    drain ends when nothing waits (after at least one deletion) or ``drain`` s passed."""
    rng = random.Random(13)
    next_delete = time.monotonic() + args.delete_every
    drain_until = stop_at + args.drain
    while time.monotonic() < drain_until:
        await _watch(memory, ids, seen)
        if time.monotonic() >= next_delete:
            await _delete_one(memory, ids, rng, seen)
            next_delete = time.monotonic() + args.delete_every
        if time.monotonic() >= stop_at and seen.deleted and not seen.waiting:
            items = await backlog(memory, principal=BENCH)
            if not any(b.unconsolidated_messages or b.warm_communities for b in items):
                break
        await asyncio.sleep(0.5)
    for cid in ids:  # what never got done counts with its age
        ages = await waiting_ages(memory, cid)
        seen.lag(cid, ages)
        seen.unfinished += len(ages)
    now = time.monotonic()
    seen.regeneration_lags += [now - since for _, since in seen.waiting.values()]


async def _time_ticks(memory: Memory, args: argparse.Namespace) -> list[float]:
    """Milliseconds of each tick's discovery: every default job's ``due`` once."""
    jobs = default_jobs(JobSettings(consolidate_tokens=args.consolidate_tokens, consolidate_idle_seconds=10))
    ticks = []
    for _ in range(args.ticks):
        started = time.perf_counter()
        for job in jobs:
            await job.due(memory)
        ticks.append((time.perf_counter() - started) * 1000)
    return ticks


async def _runs(memory: Memory) -> tuple[list[dict[str, Any]], int]:
    """Every run in the log, and how many messages the checkpoints cover."""
    return await job_runs(memory), await consolidated_messages(memory)


def _duplicates(runs: list[dict[str, Any]], consolidated: int, seen: Observed) -> dict[str, int]:
    last_end: dict[tuple[int, str], datetime] = {}
    overlapping = 0
    for run in runs:
        key = (run["conversation_id"], run["job"])
        if key in last_end and run["started_at"] < last_end[key]:
            overlapping += 1
        if run["finished_at"] is not None:
            last_end[key] = max(last_end.get(key, run["finished_at"]), run["finished_at"])
    done = [r for r in runs if r["job"] == "consolidation" and r["status"] == "ok"]
    episodes = sum(int(r["result"].get("episodes", 0)) for r in done)
    return {
        "overlapping_runs": overlapping,
        "messages_consolidated_twice": max(0, episodes - consolidated - seen.deleted),
        "chunks_saved_by_another_run": sum(1 for r in done if r["result"].get("stopped")),
        "runs": len(runs),
        "messages_consolidated": consolidated,
        "failed_runs": sum(1 for r in runs if r["status"] == "failed"),
    }


def _busy(runs: list[dict[str, Any]], pids: list[int], since: datetime) -> list[float]:
    """Per worker (by pid, which its owner id names), the share of the time from ``since``
    until the last run ended that it spent inside runs of any job (overlaps counted once)."""
    ended = [r["finished_at"] for r in runs if r["finished_at"] is not None]
    if not ended:
        return [0.0 for _ in pids]
    window = max((max(ended) - since).total_seconds(), 1e-9)
    shares = []
    for pid in pids:
        spans = sorted(
            (max(r["started_at"], since), r["finished_at"])
            for r in runs
            if r["finished_at"] is not None and r["owner"].split(":")[-2] == str(pid) and r["finished_at"] > since
        )
        busy, reach = 0.0, since
        for start, end in spans:
            if end > reach:
                busy += (end - max(start, reach)).total_seconds()
                reach = end
        shares.append(round(busy / window, 3))
    return shares


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


async def _server_cpu(memory: Memory) -> float | None:
    """CPU seconds the database server used so far: the postmaster, its exited children
    (counted in its own times) and its live ones. None when the server is elsewhere."""
    backend = await backend_pid(memory)
    try:
        postmaster = psutil.Process(backend).parent()
        if postmaster is None:
            return None
        times = postmaster.cpu_times()
        total = float(times.user + times.system + times.children_user + times.children_system)
        for child in postmaster.children():
            try:
                total += _cpu(child)
            except psutil.Error:
                continue
        return total
    except psutil.Error:
        return None


async def _stop(workers: list[asyncio.subprocess.Process]) -> list[float]:
    handles = [psutil.Process(w.pid) for w in workers]
    cpu = [_cpu(h) for h in handles]  # before exit, while the processes still exist
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        await asyncio.wait_for(worker.wait(), 60)
    return cpu


def _texts(args: argparse.Namespace) -> list[list[tuple[str, str]]]:
    corpus = load_locomo(args.locomo)
    return [[(t.message.speaker_name, t.message.text) for t in c.turns] for c in corpus]


def _database(settings: Settings) -> str:
    if settings.database.url:
        return settings.database.url
    drop_embedded_database(settings.database.data_dir, DATABASE)
    return start_embedded(settings.database.data_dir, DATABASE)


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    texts = _texts(args)
    url = _database(settings)
    memory = await open_memory(url, build_embedder(settings.models))
    seen = Observed()
    try:
        refs = [ConversationRef("bench", "jobs", f"c{n}-{uuid.uuid4().hex[:6]}") for n in range(args.conversations)]
        ids = {}
        await add_idle_conversations(memory, args.idle)
        for ref in refs:  # a first message creates the conversation
            hello = Message("b-first", "bench", "bench", "Hello everyone.", datetime.now(UTC))
            await ingest(memory, ref, [hello], principal=BENCH)
            ids[await resolve_conversation(memory, ref, principal=BENCH)] = ref
        seen.ticks = await _time_ticks(memory, args)
        workers = await _start_workers(args.processes, url, args)
        started_cpu = [_cpu(psutil.Process(w.pid)) for w in workers]  # start-up (imports, the embedding model) apart
        own_cpu, server_cpu = time.process_time(), await _server_cpu(memory)
        started, started_at = time.monotonic(), datetime.now(UTC)
        stop_at = started + args.duration
        try:
            await asyncio.gather(
                *(_feed(memory, ref, texts[n % len(texts)], args, seen, stop_at) for n, ref in enumerate(refs)),
                _observe(memory, ids, args, seen, stop_at),
            )
        finally:
            cpu = [used - before for used, before in zip(await _stop(workers), started_cpu, strict=True)]
        wall = time.monotonic() - started
        server_after = await _server_cpu(memory)
        server_used = None if server_cpu is None or server_after is None else server_after - server_cpu
        driver = [time.process_time() - own_cpu, server_used]
        runs, consolidated = await _runs(memory)
        duplicates = _duplicates(runs, consolidated, seen)
        busy = _busy(runs, [w.pid for w in workers], started_at)
    finally:
        await memory.close()
    return _result(args, seen, Workers(cpu, busy), driver, wall, duplicates)


def _per_message(seen: Observed, workers: list[float], driver: list[float | None], consolidated: int) -> dict[str, Any]:
    """CPU ms per message, by where it was spent: this process per message ingested, the
    workers per message consolidated (a backlog left at the end is not charged to them),
    the database per message ingested; their sum is what a message costs in the steady
    state, and the rate it allows with every core of this machine busy."""
    ingestion, server = driver
    per = {
        "driver_ms": round(ingestion * 1000 / max(seen.ingested, 1), 1) if ingestion is not None else None,
        "workers_ms": round(sum(workers) * 1000 / max(consolidated, 1), 1),
        "server_ms": round(server * 1000 / max(seen.ingested, 1), 1) if server is not None else None,
    }
    total = sum(v for v in per.values() if v is not None)
    cores = psutil.cpu_count() or 1
    ceiling = round(cores * 1000 / total, 1) if total else None
    return {**per, "total_ms": round(total, 1), "cores": cores, "ceiling_per_second": ceiling}


@dataclass(frozen=True)
class Workers:
    """Per worker process: CPU seconds from the start of the load, and busy share (``_busy``)."""

    cpu: list[float]
    busy: list[float]


def _fairness(seen: Observed) -> dict[str, Any]:
    """The lowest and highest per-conversation median and p99 of the consolidation lag."""
    medians = [median(lags) for lags in seen.lags_by_conversation.values() if lags]
    p99s = [percentile(lags, 0.99) for lags in seen.lags_by_conversation.values() if lags]
    return {
        "median_range": [min(medians), max(medians)] if medians else None,
        "p99_range": [min(p99s), max(p99s)] if p99s else None,
    }


def _result(
    args: argparse.Namespace,
    seen: Observed,
    workers: Workers,
    driver: list[float | None],
    wall: float,
    duplicates: dict[str, int],
) -> dict[str, Any]:
    lags, regen, cpu = seen.consolidation_lags, seen.regeneration_lags, workers.cpu
    total_cpu = sum(cpu) or 1.0
    return {
        "bench": "jobs",
        "conversations": args.conversations,
        "idle_conversations": args.idle,
        "discovery_tick_ms": {"ticks": len(seen.ticks), "median": median(seen.ticks), "p99": percentile(seen.ticks, 0.99)},
        "rate_per_conversation": args.rate,
        "duration_seconds": args.duration,
        "processes": args.processes,
        "messages_ingested": seen.ingested,
        "ingest_rate": round(seen.ingested / args.duration, 1) if args.duration else 0.0,
        "consolidation_lag": {
            "messages": len(lags),
            "median": median(lags),
            "p99": percentile(lags, 0.99),
            "unfinished": seen.unfinished,
            "per_conversation": _fairness(seen),
        },
        "regeneration_lag": {
            "deletions": seen.deleted,
            "communities": len(regen),
            "median": median(regen),
            "p99": percentile(regen, 0.99),
            "still_dirty": len(seen.waiting),
        },
        "duplicate_work": duplicates,
        "cpu": [
            {
                "process": i,
                "cpu_seconds": round(c, 1),
                "share_of_workers": round(c / total_cpu, 3),
                "cores": round(c / wall, 2),
                "busy": busy,
            }
            for i, (c, busy) in enumerate(zip(cpu, workers.busy, strict=True))
        ],
        "cpu_per_message": _per_message(seen, cpu, driver, duplicates["messages_consolidated"]),
        "load_average": [round(load, 1) for load in os.getloadavg()],
        "wall_seconds": round(wall, 1),
    }


def _render_fairness(fairness: dict[str, Any]) -> str:
    if fairness["median_range"] is None:
        return "per conversation: no lags"
    (low_median, high_median), (low_p99, high_p99) = fairness["median_range"], fairness["p99_range"]
    return f"per conversation: median {low_median:.1f}-{high_median:.1f} s, p99 {low_p99:.1f}-{high_p99:.1f} s (lowest-highest)"


def render(result: dict[str, Any]) -> str:
    c, r, d = result["consolidation_lag"], result["regeneration_lag"], result["duplicate_work"]
    t = result["discovery_tick_ms"]
    duplicates = d["overlapping_runs"] + d["messages_consolidated_twice"] + d["chunks_saved_by_another_run"]
    lines = [
        f"{result['conversations']} conversations x {result['rate_per_conversation']:g} msg/s "
        f"for {result['duration_seconds']:g} s, "
        f"{result['processes']} scheduler processes; {result['messages_ingested']} messages ingested "
        f"({result['ingest_rate']:g}/s)",
        f"discovery tick with {result['conversations']} due and {result['idle_conversations']} idle conversations: "
        f"median {t['median']:.1f} ms, p99 {t['p99']:.1f} ms over {t['ticks']} ticks (every default job's due once)",
        f"consolidation lag: median {c['median']:.1f} s, p99 {c['p99']:.1f} s over {c['messages']} messages, "
        f"{c['unfinished']} of them still waiting at the end (counted with their age) (target p99 < 60 s)",
        _render_fairness(c["per_conversation"]),
        f"regeneration lag after {r['deletions']} deletions: median {r['median']:.1f} s, p99 {r['p99']:.1f} s over "
        f"{r['communities']} communities, {r['still_dirty']} of them still dirty at the end (target p99 < 30 s)",
        f"duplicate work: {duplicates} ({d['overlapping_runs']} overlapping runs, {d['messages_consolidated_twice']} messages "
        f"consolidated twice, {d['chunks_saved_by_another_run']} chunks saved by another run) over {d['runs']} runs, "
        f"{d['failed_runs']} failed",
    ]
    lines += [
        f"process {p['process']}: {p['cpu_seconds']} CPU s, {p['share_of_workers']:.0%} of the workers' CPU, "
        f"{p['cores']} cores on average, busy with runs {p['busy']:.0%} of the time"
        for p in result["cpu"]
    ]
    m = result["cpu_per_message"]
    server = "n/a (remote server)" if m["server_ms"] is None else f"{m['server_ms']:g}"
    lines.append(
        f"CPU per message: {m['total_ms']:g} ms (driver {m['driver_ms']:g} per message ingested, workers "
        f"{m['workers_ms']:g} per message consolidated ({result['duplicate_work']['messages_consolidated']}), database "
        f"{server} per message ingested); {m['cores']} cores allow about {m['ceiling_per_second']} msg/s; "
        f"load average {' '.join(f'{x:g}' for x in result['load_average'])}"
    )
    return "\n".join(lines)
