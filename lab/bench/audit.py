"""``stashbird bench audit``: latency of the audit queries an admin runs from chat
(``about``, ``provenance`` with its dry run, ``stats``) on a large conversation.

The conversation is the forgetting benchmark's synthetic one (``memory.load_bulk_graph``:
100K messages, 20K topic entities, two speaker hubs each
supported by half the messages, 120K relations, communities), in a database of its own
without the HNSW index, which none of these queries uses, and with a checkpoint at its
last message, as a conversation that is served and consolidated has. Each query runs as the
operator through the public API, audit-log write included, on names and messages
picked at random; the first few calls warm connections and plans and are not counted.

Wall-clock latency on a shared machine measures the other processes too, so each query's
CPU time per call is printed beside it: this process's, plus that of the database
server processes serving this database (read from /proc, Linux), the latency the query
would have on an idle machine, less its round trips' waits.
"""

from __future__ import annotations

import argparse
import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bot.progress import progress
from bot.settings import Settings
from lab.bench.common import bench_memory, median, percentile
from lab.probes import drop_vector_index, load_bulk_graph, mark_consolidated, server_pids
from memory import ConversationRef, Memory, Principal, about, provenance, stats

OPERATOR = Principal.operator("bench")
WARM_UP = 5
QUERIES = ("about", "provenance", "stats")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="100000", help="comma-separated conversation sizes in messages (default 100000)")
    parser.add_argument("--calls", type=int, default=200, help="timed calls per query and size (default 200)")
    parser.add_argument("--seed", type=int, default=14)


def _calls(memory: Memory, ref: ConversationRef, size: int, rng: random.Random) -> dict[str, Callable[[], Awaitable[Any]]]:
    """One call of each query on a random name or message (a topic by its name, now and
    then misspelled; or a speaker hub, whose relations are the most numerous)."""

    def name() -> str:
        if rng.random() < 0.05:
            return f"Speaker {rng.randrange(2)}"
        topic = f"topic {rng.randrange(max(2, size // 5))}"
        return topic.replace("topic", "topik") if rng.random() < 0.2 else topic

    return {
        "about": lambda: about(memory, ref, name(), principal=OPERATOR),
        "provenance": lambda: provenance(memory, ref, f"b{rng.randrange(size)}", principal=OPERATOR),
        "stats": lambda: stats(memory, ref, principal=OPERATOR),
    }


async def _server_cpu(memory: Memory) -> float:
    """Seconds of CPU used so far by the server processes serving this database (0 where
    /proc cannot tell, e.g. a remote server)."""
    ticks = 0
    for pid in await server_pids(memory):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


async def _timed(memory: Memory, call: Callable[[], Awaitable[Any]], calls: int, bar: Any) -> dict[str, float]:
    timings: list[float] = []
    cpu = time.process_time(), await _server_cpu(memory)
    for index in range(calls + WARM_UP):
        if index == WARM_UP:
            cpu = time.process_time(), await _server_cpu(memory)
        began = time.perf_counter()
        await call()
        if index >= WARM_UP:
            timings.append((time.perf_counter() - began) * 1000)
        bar.update(1)
    client, server = time.process_time() - cpu[0], await _server_cpu(memory) - cpu[1]
    return {
        "median_ms": round(median(timings), 2),
        "p99_ms": round(percentile(timings, 0.99), 2),
        "cpu_ms_per_call": round((client + server) * 1000 / calls, 2),
    }


async def latency(memory: Memory, run: str, size: int, calls: int, seed: int) -> dict[str, Any]:
    ref = ConversationRef("bench-audit", run, f"latency-{size}")
    began = time.perf_counter()
    await load_bulk_graph(memory, ref, size)
    await mark_consolidated(memory, ref)  # consolidated up to its last message, as a served one would be
    row: dict[str, Any] = {"messages": size, "load_seconds": round(time.perf_counter() - began, 1), "calls": calls}
    queries = _calls(memory, ref, size, random.Random(seed))
    with progress(calls * len(QUERIES), f"audit at {size}") as bar:
        for query, call in queries.items():
            row[query] = await _timed(memory, call, calls, bar)
    row["load_average"] = round(os.getloadavg()[0], 1)  # the machine may be shared: read the figures with it
    return row


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    sizes = [int(s) for s in str(args.sizes).split(",") if s.strip()]
    async with bench_memory(settings, "stashbird_bench_audit") as memory:
        await drop_vector_index(memory)
        rows = [await latency(memory, uuid.uuid4().hex[:6], size, args.calls, args.seed) for size in sizes]
    return {"bench": "audit", "latency": rows}


def render(result: dict[str, Any]) -> str:
    lines = []
    for row in result["latency"]:
        lines.append(
            f"audit queries on a conversation of {row['messages']:,} messages (loaded in {row['load_seconds']} s; "
            f"{row['calls']} calls each; load average {row['load_average']} on {os.cpu_count()} cores):"
        )
        lines += [
            f"  {query:<11} median {row[query]['median_ms']:>7} ms   p99 {row[query]['p99_ms']:>7} ms   "
            f"CPU per call {row[query]['cpu_ms_per_call']:>6} ms   (target p99 < 100 ms)"
            for query in QUERIES
        ]
    return "\n".join(lines)
