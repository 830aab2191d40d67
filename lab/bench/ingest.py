"""``stashbird bench ingest``: the fast path against the local embedder alone.

Appends the LoCoMo turns (one conversation per file) and reports, from the same run, the
embedder's own throughput on the same texts, the fast path's throughput (validate,
store, chain, embed, index), single-message store-and-search latency and peak memory.
"""

from __future__ import annotations

import argparse
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from bot.settings import Settings
from lab.bench.common import (
    add_locomo_argument,
    bench_memory,
    load_locomo,
    median,
    peak_rss_mb,
    percentile,
)
from lab.probes import recall
from memory import ConversationRef, LocalEmbedder, Memory, Message, Principal, ingest, validate_message

BENCH = Principal.operator("bench")


def configure(parser: argparse.ArgumentParser) -> None:
    add_locomo_argument(parser)
    parser.add_argument("--singles", type=int, default=200, help="single messages timed one by one")


async def _single_latencies(memory: Memory, count: int) -> list[float]:
    """Store one message at a time, then find it by full-text search: the time until it
    is retrievable."""
    ref = ConversationRef("bench", "", f"singles-{uuid.uuid4().hex[:8]}")
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    latencies: list[float] = []
    for index in range(count):
        marker = f"zq{uuid.uuid4().hex[:10]}"
        fields = {"id": f"s{index}", "author": "bench", "text": f"status update {marker}", "ts": start + timedelta(seconds=index)}
        began = time.perf_counter()
        message = validate_message(fields)
        await ingest(memory, ref, [message], principal=BENCH)
        found = await recall(memory, ref, marker, k=1, search="full_text")
        latencies.append((time.perf_counter() - began) * 1000)
        if found.message_ids() != {f"s{index}"}:
            raise RuntimeError(f"message {index} was not searchable after it was stored")
    return latencies


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    conversations = load_locomo(args.locomo)
    messages: list[tuple[str, list[Message]]] = [(c.name, [t.message for t in c.turns]) for c in conversations]
    texts = [m.document_text for _, batch in messages for m in batch]
    embedder = LocalEmbedder()
    embedder.embed_sync(texts[:64])  # warm-up outside the timings

    began = time.perf_counter()
    for start in range(0, len(texts), 64):
        embedder.embed_sync(texts[start : start + 64])
    embed_seconds = time.perf_counter() - began

    run_id = uuid.uuid4().hex[:6]
    async with bench_memory(settings, "stashbird_bench_ingest", embedder) as memory:
        began = time.perf_counter()
        stored = 0
        for name, batch in messages:
            counts = await ingest(memory, ConversationRef("bench", run_id, f"locomo-{name}"), batch, principal=BENCH)
            stored += counts.stored
        ingest_seconds = time.perf_counter() - began
        latencies = await _single_latencies(memory, args.singles)

    embed_rate = len(texts) / embed_seconds
    ingest_rate = stored / ingest_seconds
    return {
        "bench": "ingest",
        "turns": len(texts),
        "stored": stored,
        "embedder_alone_per_second": round(embed_rate, 1),
        "fast_path_per_second": round(ingest_rate, 1),
        "fast_path_share_of_embedder": round(ingest_rate / embed_rate, 3),
        "single_message_ms": {
            "count": len(latencies),
            "median": round(median(latencies), 2),
            "p99": round(percentile(latencies, 0.99), 2),
        },
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def render(result: dict[str, Any]) -> str:
    single = result["single_message_ms"]
    return "\n".join(
        [
            f"LoCoMo turns: {result['turns']} (stored {result['stored']})",
            f"embedder alone:  {result['embedder_alone_per_second']:8.1f} texts/s",
            f"fast path:       {result['fast_path_per_second']:8.1f} messages/s "
            f"({result['fast_path_share_of_embedder']:.0%} of the embedder alone; target >= 80%)",
            f"single message stored and searchable: median {single['median']} ms, p99 {single['p99']} ms "
            f"over {single['count']} (target median < 50 ms)",
            f"peak memory (this process): {result['peak_rss_mb']} MB",
        ]
    )
