"""``stashbird bench serve``: a separately started ``stashbird serve`` driven through the
Slack stand-in. Three phases, all through signed Events API requests:

1. a storm of mixed events (creates, edits, deletes, redeliveries, mentions, deletes
   before creates) into several channels, ``--concurrency`` requests in flight: events
   acknowledged per second and ack latency p50/p99;
2. a steady stream (``--rate`` messages a second: their ack latency, p50/p99) with
   ``--mentions`` questions among it, one at a time: time from the mention to the
   posted answer, p50/p99 (offline);
3. the same stream with ``--deletes`` deletions of stored messages: time from the
   delete event to the message being gone from memory (its episode and search
   documents go in one transaction), p50/p99.

Finally the stored state is compared with the stand-in's history (nothing lost,
resurrected or duplicated). The served process runs without the core's jobs and the
sweep (``STASHBIRD_SERVE_JOBS=0``): the figures are the chat path's, not consolidation's
(the VACUUM after chat deletions runs: it is part of that path).
Targets: ack p99 < 300 ms, answer p99 < 1 s, delete p99 < 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from bot.runtime import build_embedder
from bot.settings import Settings
from lab.bench.common import percentile
from lab.probes import drop_embedded_database
from lab.standins.serve_process import start_serve, stop_serve
from lab.standins.slack_standin import SlackStandIn
from lab.standins.slack_storm import Storm
from memory import ConversationRef, Memory, Principal, inbox_backlog, messages, open_memory, start_embedded, stored_messages

BENCH = Principal.operator("bench-serve")
DATABASE = "stashbird_bench_serve"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--events", type=int, default=2000, help="storm events (default 2000)")
    parser.add_argument("--channels", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight during the storm")
    parser.add_argument("--rate", type=float, default=10.0, help="background messages a second in phases 2 and 3")
    parser.add_argument("--mentions", type=int, default=40)
    parser.add_argument("--deletes", type=int, default=40)


async def _settled(memory: Memory, timeout: float = 600) -> float:
    """Wait for the inbox to empty; returns the seconds waited."""
    started = time.perf_counter()
    while (await inbox_backlog(memory, principal=BENCH)).pending and time.perf_counter() - started < timeout:
        await asyncio.sleep(0.1)
    return time.perf_counter() - started


@contextlib.asynccontextmanager
async def _background(slack: SlackStandIn, channels: list[str], rate: float, acks: list[float]) -> AsyncIterator[None]:
    """A steady stream of new messages; each acknowledgement's latency goes to ``acks``."""

    async def stream() -> None:
        n = 0
        while True:
            n += 1
            channel = channels[n % len(channels)]
            message = slack.message(channel, "U3", f"Background note {n} about the schedule.")
            acks.append((await slack.deliver(slack.envelope({**message, "channel": channel}))).seconds)
            await asyncio.sleep(1 / rate)

    task = asyncio.create_task(stream())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _mention_latencies(slack: SlackStandIn, channels: list[str], count: int) -> list[float]:
    latencies: list[float] = []
    for n in range(count):
        before = len(slack.posted)
        started = time.perf_counter()
        ts = await slack.mention(channels[n % len(channels)], "U2", "what did we say about the offsite venue?")
        while not any(p.get("thread_ts") == ts for p in slack.posted[before:]):
            if time.perf_counter() - started > 30:
                raise RuntimeError(f"no answer to mention {ts} within 30 s")
            await asyncio.sleep(0.005)
        answer = next(p for p in slack.posted[before:] if p.get("thread_ts") == ts)
        latencies.append(answer["received"] - started)
    return latencies


async def _delete_latencies(slack: SlackStandIn, memory: Memory, channels: list[str], count: int) -> list[float]:
    latencies: list[float] = []
    for n in range(count):
        channel = channels[n % len(channels)]
        ts = sorted(slack.history(channel), key=float)[-1 - n // len(channels)]
        ref = ConversationRef("slack", slack.team, channel)
        since = datetime.fromtimestamp(float(ts), UTC)
        started = time.perf_counter()
        await slack.delete(channel, ts)
        while any(m.message_id == ts for m in await stored_messages(memory, ref, principal=BENCH, since=since)):
            if time.perf_counter() - started > 30:
                raise RuntimeError(f"message {ts} still stored 30 s after its delete")
            await asyncio.sleep(0.005)
        latencies.append(time.perf_counter() - started)
    return latencies


async def _mismatches(slack: SlackStandIn, memory: Memory, channels: list[str]) -> int:
    wrong = 0
    for channel in channels:
        listed = await messages(memory, ConversationRef("slack", slack.team, channel), principal=BENCH)
        stored = {str(m["message_id"]): str(m["text"]) for m in listed}
        wrong += len(listed) - len(stored) + len(set(stored.items()) ^ set(slack.history(channel).items()))
    return wrong


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(values, 0.5) * 1000, 1), "p99_ms": round(percentile(values, 0.99) * 1000, 1)}


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    if settings.database.url:
        url = settings.database.url
    else:
        drop_embedded_database(settings.database.data_dir, DATABASE)
        url = start_embedded(settings.database.data_dir, DATABASE)
    memory = await open_memory(url, build_embedder(settings.models))
    channels = [f"CBENCH{n:02d}" for n in range(args.channels)]
    try:
        async with SlackStandIn() as slack:
            process, port = await start_serve(slack, url)
            slack.events_url = f"http://127.0.0.1:{port}/slack/events"
            try:
                storm = await Storm(slack, channels).run(args.events, args.concurrency)
                drained = await _settled(memory)
                steady: list[float] = []
                async with _background(slack, channels, args.rate, steady):
                    answers = await _mention_latencies(slack, channels, args.mentions)
                    deletes = await _delete_latencies(slack, memory, channels, args.deletes)
                await _settled(memory)
                wrong = await _mismatches(slack, memory, channels)
            finally:
                await stop_serve(process)
    finally:
        await memory.close()
    return {
        "bench": "serve",
        "events": storm.events,
        "kinds": storm.kinds,
        "acked_per_second": round(storm.acked / storm.seconds, 1),
        "ack": _ms(storm.ack_seconds),
        "steady_ack": _ms(steady),
        "rate": args.rate,
        "storm_processed_after_seconds": round(storm.seconds + drained, 1),
        "mention_to_answer": _ms(answers),
        "delete_to_unsearchable": _ms(deletes),
        "state_mismatches": wrong,
    }


def render(result: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"storm: {result['events']} events {result['kinds']}",
            f"  acknowledged {result['acked_per_second']}/s; ack latency p50 {result['ack']['p50_ms']} ms, "
            f"p99 {result['ack']['p99_ms']} ms (target p99 < 300 ms)",
            f"  all processed {result['storm_processed_after_seconds']} s after the first event",
            f"steady stream of {result['rate']} messages/s: ack latency p50 {result['steady_ack']['p50_ms']} ms, "
            f"p99 {result['steady_ack']['p99_ms']} ms",
            f"mention to answer (offline): p50 {result['mention_to_answer']['p50_ms']} ms, "
            f"p99 {result['mention_to_answer']['p99_ms']} ms (target p99 < 1 s)",
            f"delete to unsearchable: p50 {result['delete_to_unsearchable']['p50_ms']} ms, "
            f"p99 {result['delete_to_unsearchable']['p99_ms']} ms (target p99 < 1 s)",
            f"stored state vs platform history: {result['state_mismatches']} mismatches",
        ]
    )
