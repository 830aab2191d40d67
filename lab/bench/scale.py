"""``stashbird bench scale``: a store of many conversations grown step by step to a
million messages, with every index the schema has (HNSW included), and what it costs at each
step: ingest rate, size on disk per million messages, hybrid search and deletion
latency, this process's memory.

The conversations' sizes follow a Zipf law (``--skew``): at 1M messages over 1,000
conversations the largest holds 13% of them and most hold a few hundred, so that both
sides of the search plan are timed: small conversations scanned exactly, the large ones
through their own HNSW indexes (memory.store.vector_indexes; under Citus, through their
shard's HNSW index, filtered by conversation).

At each step (``--steps``, ending at ``--messages``) every conversation grows to its
share by SQL on the server (``lab.synthetic.grow_conversation``: messages of four
words of a pseudo-word vocabulary, each message's vector the sum of the embedder's
vectors of its words, a topic entity and a relation
per five messages, a speaker entity per speaker, a community per 20 topics, all with
provenance and search documents, checkpointed as consolidated); then VACUUM ANALYZE,
under Citus the shards' HNSW index is built anew (dropped before the load: pgvector
builds an index much faster than it inserts into one; the build time is printed), and
the large conversations' own indexes are built as the scheduler builds them. Then ``--ingested`` more
messages go through the real ingest path (``memory.ingest``: validation, the embedder,
exchange vectors, the indexes), and their share of the store is printed. Then, timed:
``--queries`` hybrid searches (a question about two words of the vocabulary, embedded:
what is near it holds its words, as in a real store; half in the
largest conversation, half in conversations drawn at random) and ``--deletes`` deletions
through ``memory.forget`` (the service's rule, audited; half in the largest
conversation), each checked: a search must come back non-empty, a deletion must say
``deleted`` and remove the message's search document. Then, per size band of
conversations (``BANDS``), ``--band-queries`` searches over a few of the band's
conversations: for each kind the plan reads through an HNSW index, the recall@30 of
that scan against the exact scan of the same statement, and the server's planning time
of the search's vector statements beside the search's time (``lab.probes.plan_check``).
Before the timing the store's
files are read once into the OS page cache (those of the nodes on this machine; not with
``--cold``), as a server that has been running holds them, and one untimed round of the
same searches (other questions, other conversations drawn) fills the server's own buffer
cache as serving does; the disk reads made while
timing are printed beside the CPU steal: either one in the latencies says the machine,
not the store, set them.

On a Citus coordinator (``DATABASE_URL``) the tables are distributed first
(``citus-plan --apply``) and the figures add the shards: how many, the rows of the
search documents' shards, and the tasks of a routed search (one shard each). With
``--distribute-after`` the first step is loaded into plain tables instead, indexes
and all, as an operator's store would stand, and only then distributed: the plan's
seconds and the rows it moved into shards are printed, and the step is measured on the
distributed tables.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from bot.settings import Settings
from lab.bench.common import (
    BENCH,
    bench_memory,
    busy_ms,
    cpu_times,
    disk_reads_kb,
    median,
    peak_rss_mb,
    percentile,
    steal_share,
    warm_page_cache,
)
from lab.probes import (
    FACT_INDEX_ROWS,
    OWN_INDEX_ROWS,
    VectorPlan,
    build_vector_index,
    database_directories,
    drop_vector_index,
    grow_conversations,
    plan_check,
    search_shards,
    search_vector,
    store_bytes,
    store_size,
    table_rows,
    vacuum_analyze,
)
from memory import (
    ConversationRef,
    Memory,
    ValidationError,
    citus_plan,
    conversations,
    forget,
    index_conversation,
    ingest,
    validate_message,
)

DEFAULT_STEPS = (10_000, 100_000, 1_000_000)
_SYLLABLES = ("ka", "lo", "mi", "ru", "te", "sa", "no", "vi", "pe", "da", "zu", "ho", "ne", "ti", "ba", "go")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conversations", type=int, default=1_000, help="conversations in the store")
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages in the store at the last step")
    parser.add_argument(
        "--steps",
        default="",
        help="message totals to measure at, comma-separated (default: 10K, 100K, 1M below --messages, then --messages)",
    )
    parser.add_argument("--skew", type=float, default=1.0, help="Zipf exponent of the conversations' sizes (0: all equal)")
    # A p99 needs its tail sampled: of 100 searches it is the second slowest, and moved
    # from 21 to 33 ms between runs of the same 1M store.
    parser.add_argument("--queries", type=int, default=1_000, help="hybrid searches timed per step")
    parser.add_argument("--deletes", type=int, default=400, help="deletions timed per step")
    parser.add_argument(
        "--band-queries",
        type=int,
        default=30,
        help="searches per size band whose vector plan is checked against exact (recall@30) and for its planning time",
    )
    parser.add_argument("--ingested", type=int, default=100, help="messages through the real ingest path per step")
    parser.add_argument(
        "--index-memory-mb",
        type=int,
        default=1_024,
        help="maintenance_work_mem of the HNSW build in all (shared memory, taken at once; split over the shards under Citus)",
    )
    parser.add_argument("--index-workers", type=int, default=2, help="parallel maintenance workers of the HNSW build")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--distribute-after",
        action="store_true",
        help="on an undistributed Citus database: load the first step into plain tables, then time citus-plan --apply",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="measure again the store an earlier run grew to --messages (same --conversations and --skew), "
        "without loading or building indexes: the last step only",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="time without reading the store into the page cache or warming the buffer cache first "
        "(what a server sees just after it starts)",
    )


def vocabulary(size: int = 4_096) -> list[str]:
    """Distinct pseudo-words of three syllables (``kalomi``...), in the order the loader
    makes them (lab.synthetic): a vocabulary whose every word is as rare as the next. Pure."""
    n = len(_SYLLABLES)
    return [_SYLLABLES[i // (n * n) % n] + _SYLLABLES[i // n % n] + _SYLLABLES[i % n] for i in range(min(size, n**3))]


def steps(messages: int, conversations: int, given: str) -> list[int]:
    """The totals to measure at, ascending, the last one ``messages``; each holds at
    least a message per conversation."""
    try:
        chosen = [int(s) for s in given.split(",") if s.strip()] if given else [s for s in DEFAULT_STEPS if s < messages]
    except ValueError:
        raise ValidationError("--steps", f"not a list of numbers: {given!r}") from None
    totals = sorted({s for s in chosen if s <= messages} | {messages})
    if conversations < 1 or totals[0] < conversations:
        raise ValidationError("--steps", f"every step needs at least one message per conversation ({conversations})")
    return totals


def sizes(total: int, conversations: int, skew: float) -> list[int]:
    """Messages per conversation at ``total`` (at least ``conversations``): one each, and
    the rest shared by Zipf's law, the largest (the first) taking the rounding. Pure."""
    weights = [1 / (k + 1) ** skew for k in range(conversations)]
    whole, spare = sum(weights), total - conversations
    rest = [1 + int(spare * w / whole) for w in weights[1:]]
    return [total - sum(rest), *rest]


def _refs(run: str, count: int) -> list[ConversationRef]:
    return [ConversationRef("bench-scale", run, f"c{k}") for k in range(count)]


def _rss_mb() -> float:
    """This process's resident memory now (Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def _figures(values: list[float]) -> dict[str, Any]:
    return {
        "count": len(values),
        "median_ms": round(median(values), 2),
        "p99_ms": round(percentile(values, 0.99), 2),
        "max_ms": round(max(values), 2) if values else float("nan"),
    }


async def _grow(
    memory: Memory, refs: list[ConversationRef], have: list[int], want: list[int], word_vectors: list[list[float]]
) -> float:
    began = time.perf_counter()
    growth = [(ref, start, target - start) for ref, start, target in zip(refs, have, want, strict=True)]
    await grow_conversations(memory, growth, _SYLLABLES, word_vectors)
    return time.perf_counter() - began


async def _questions(memory: Memory, count: int, words: list[str], rng: random.Random) -> list[tuple[str, list[float]]]:
    """Questions about two words of the vocabulary each, with the embedder's vectors,
    embedded in one batch before any is timed: the model's run just before a search
    would leave the search with the model's data in the CPU's caches instead of its own."""
    questions = [f"what did they say about {rng.choice(words)} and {rng.choice(words)}?" for _ in range(count)]
    return [(q, list(v)) for q, v in zip(questions, (await memory.embedder.embed(questions)).vectors, strict=True)]


async def _stored_refs(memory: Memory, count: int) -> list[ConversationRef]:
    """The conversations of the earlier run that ``--reuse`` measures again, largest first."""
    stored = await conversations(memory, principal=BENCH, platform="bench-scale")
    runs = {ref.workspace_id for ref in stored}
    if len(runs) != 1 or len(stored) != count:
        raise ValidationError("--reuse", f"needs the store of one earlier run of {count} conversations (found {len(stored)})")
    return _refs(runs.pop(), count)


async def _own_indexes(memory: Memory, refs: list[ConversationRef]) -> dict[str, Any]:
    """What the scheduler does after a conversation's consolidation, for every
    conversation: its own vector index of each kind past ``own_index_rows(kind)`` documents."""
    began, conversations, indexes = time.perf_counter(), 0, 0
    for ref in refs:
        report = await index_conversation(memory, ref, principal=BENCH)
        conversations += bool(report.built)
        indexes += len(report.built)
    return {"conversations": conversations, "indexes": indexes, "seconds": round(time.perf_counter() - began, 1)}


async def _ingest(memory: Memory, refs: list[ConversationRef], count: int, step: int, rng: random.Random) -> dict[str, Any]:
    """``count`` messages through the real ingest path, ten per call into conversations
    drawn at random, each found by full-text search afterwards."""
    from lab.probes import recall

    began, done, missing = time.perf_counter(), 0, 0
    when = datetime(2027, 1, 1, tzinfo=UTC) + timedelta(days=step)
    batches: list[tuple[ConversationRef, list[str]]] = []
    while done < count:
        ref, size = rng.choice(refs), min(10, count - done)
        markers = [f"zq{uuid.uuid4().hex[:10]}" for _ in range(size)]
        fields = [
            {
                "id": f"r{step}{m}",  # new in a store measured again, too
                "author": "Speaker 1",
                "text": f"a live message {m}",
                "ts": when + timedelta(seconds=done + i),
            }
            for i, m in enumerate(markers)
        ]
        await ingest(memory, ref, [validate_message(f) for f in fields], principal=BENCH)
        batches.append((ref, markers))
        done += size
    seconds = time.perf_counter() - began
    for ref, markers in batches:
        found = await recall(memory, ref, markers[0], k=1, search="full_text")
        missing += not found.message_ids()
    return {
        "messages": count,
        "seconds": round(seconds, 2),
        "per_second": round(count / seconds, 1) if seconds else 0.0,
        "unsearchable": missing,
    }


async def _searches(
    memory: Memory, refs: list[ConversationRef], count: int, words: list[str], rng: random.Random
) -> dict[str, Any]:
    timings: dict[str, list[float]] = {"largest": [], "random": []}
    cpu = {which: {"machine": 0.0, "client": 0.0} for which in timings}
    plans: dict[str, str] = {}
    empty = 0
    for index, (question, vector) in enumerate(await _questions(memory, count + 4, words, rng)):
        which = "largest" if index % 2 == 0 else "random"
        ref = refs[0] if which == "largest" else rng.choice(refs)
        machine, client = cpu_times(), time.process_time()
        began = time.perf_counter()
        found = await search_vector(memory, ref, question, vector)
        elapsed = (time.perf_counter() - began) * 1000
        client, machine_ms = time.process_time() - client, busy_ms(machine, cpu_times())
        if index >= 4:  # the first few warm up connections and plans
            timings[which].append(elapsed)
            empty += not found.candidates
            cpu[which]["machine"] += machine_ms or 0.0
            cpu[which]["client"] += client * 1000
        if which == "largest":
            plans[which] = _plan_text(found.plan)
    return {
        **{k: _figures(v) for k, v in timings.items()},
        "all": _figures([*timings["largest"], *timings["random"]]),
        # The CPU a search costs, averaged: the whole machine's busy time (this process,
        # the database's and whatever else ran; its clock counts in 10 ms ticks, so only
        # the mean over many searches means anything) and this process's own.
        "cpu_ms": {
            which: {part: round(ms / max(len(timings[which]), 1), 2) for part, ms in parts.items()}
            for which, parts in cpu.items()
        },
        "plan": plans.get("largest", ""),
        "empty": empty,
    }


# Conversations by messages: exact scans only; the own indexes' range; past the exact
# scan's bound; the largest (13% of 1M at the default skew).
BANDS = ((0, "under 2K"), (OWN_INDEX_ROWS, "2K-20K"), (20_000, "20K-100K"), (100_000, "100K and more"))
RECALL_K = 30


def band_of(messages: int) -> str:
    """The size band (``BANDS``) of a conversation of ``messages``. Pure."""
    return [name for floor, name in BANDS if messages >= floor][-1]


def band_members(have: list[int], per_band: int) -> dict[str, list[int]]:
    """Per size band, up to ``per_band`` of its conversations (indexes into ``have``),
    spread evenly from its largest to its smallest. Pure."""
    members: dict[str, list[int]] = {}
    for index in sorted(range(len(have)), key=lambda k: -have[k]):
        members.setdefault(band_of(have[index]), []).append(index)
    return {
        name: [ks[round(i * (len(ks) - 1) / max(per_band - 1, 1))] for i in range(min(per_band, len(ks)))]
        for name, ks in members.items()
    }


async def _bands(
    memory: Memory, refs: list[ConversationRef], have: list[int], queries: int, words: list[str], rng: random.Random
) -> dict[str, Any]:
    """Per size band, ``queries`` searches over a few of its conversations: the search's
    time, the planning time of its vector statements (their share of the search), and
    for each kind read through an HNSW index the recall@30 of that scan against exact."""
    bands: dict[str, Any] = {}
    for name, members in band_members(have, per_band=3).items():
        searched, planned, plans = [], [], set()
        recalls: dict[str, list[float]] = {}
        for index, (question, vector) in enumerate(await _questions(memory, queries, words, rng)):
            ref = refs[members[index % len(members)]]
            began = time.perf_counter()
            found = await search_vector(memory, ref, question, vector)
            searched.append((time.perf_counter() - began) * 1000)
            kept, planning_ms = await plan_check(memory, ref, vector, found.plan, RECALL_K)
            planned.append(planning_ms)
            plans.add(_plan_text(found.plan))
            for kind, share in kept.items():
                recalls.setdefault(kind, []).append(share)
        bands[name] = {
            "conversations": [have[k] for k in members],
            "queries": queries,
            "plans": sorted(plans),
            "search_median_ms": round(median(searched), 2),
            "planning_median_ms": round(median(planned), 2),
            "planning_share": round(median(planned) / median(searched), 3) if searched else None,
            "recall_at_30": {
                kind: {"mean": round(float(np.mean(v)), 4), "min": round(min(v), 4)} for kind, v in sorted(recalls.items())
            },
        }
    return bands


def _plan_text(plan: VectorPlan) -> str:
    return f"exact {','.join(plan.exact) or '-'}; hnsw {','.join(plan.hnsw) or '-'} ef_search {plan.ef_search}"


_DRAWS = 8  # messages drawn per timed deletion, past those deleted already


async def _deletions(
    memory: Memory, refs: list[ConversationRef], have: list[int], count: int, deleted: set[tuple[int, int]], rng: random.Random
) -> dict[str, Any]:
    timings: dict[str, list[float]] = {"largest": [], "random": []}
    wrong = 0
    for index in range(count + 4):
        which = "largest" if index % 2 == 0 else "random"
        for _ in range(_DRAWS):  # a run --reuse measures again draws what the earlier one deleted
            k = 0 if which == "largest" else rng.randrange(len(refs))
            number = rng.randrange(have[k])
            if (k, number) in deleted:
                continue
            deleted.add((k, number))
            began = time.perf_counter()
            report = await forget(memory, refs[k], f"b{number}", principal=BENCH)
            elapsed = (time.perf_counter() - began) * 1000
            if report.status != "already_deleted":  # not timed
                break
        else:
            continue
        if index >= 4:
            timings[which].append(elapsed)
        wrong += report.status != "deleted" or report.retraction.documents_removed < 1
    return {
        **{k: _figures(v) for k, v in timings.items()},
        "all": _figures([*timings["largest"], *timings["random"]]),
        "wrong": wrong,
        "deleted_total": len(deleted),  # over all the steps so far, warm-ups included
    }


async def _distribute(memory: Memory) -> dict[str, Any]:
    """``citus-plan --apply`` on the loaded store: its seconds and the rows it moved
    (every row of the tables it distributed or made reference tables)."""
    plan = await citus_plan(memory, principal=BENCH)
    rows = await table_rows(memory, [s.table for s in plan.steps])
    began = time.perf_counter()
    applied = await citus_plan(memory, principal=BENCH, apply=True)
    seconds = time.perf_counter() - began
    return {"seconds": round(seconds, 1), "tables": len(applied.applied), "rows": sum(rows.values()), "rows_by_table": rows}


async def _step(
    memory: Memory, args: argparse.Namespace, refs: list[ConversationRef], have: list[int], total: int, state: dict[str, Any]
) -> dict[str, Any]:
    # A step never shrinks a conversation (at small steps rounding could).
    want = [max(h, w) for h, w in zip(have, sizes(total, len(refs), args.skew), strict=True)]
    load_seconds = vacuum_seconds = 0.0
    index_seconds: float | None = None
    own = {"conversations": 0, "indexes": 0, "seconds": 0.0}
    if want != have:
        await drop_vector_index(memory)
        load_seconds = await _grow(memory, refs, have, want, state["word_vectors"])
        began = time.perf_counter()
        await vacuum_analyze(memory)
        vacuum_seconds = time.perf_counter() - began
        index_seconds = await build_vector_index(memory, args.index_memory_mb, args.index_workers)
        own = await _own_indexes(memory, refs)
    distribution = None
    if state["distribute"]:
        state["distribute"] = False
        distribution = await _distribute(memory)
        began = time.perf_counter()
        await vacuum_analyze(memory)  # the shards' statistics
        vacuum_seconds += time.perf_counter() - began
    loaded = sum(want) - sum(have)
    have[:] = want
    ingested = await _ingest(memory, refs, args.ingested, total, state["rng"])
    state["real"] += ingested["messages"]
    size, stored = await store_size(memory)
    warmed = None if args.cold else warm_page_cache(await database_directories(memory))
    if not args.cold:  # the server's own buffer cache, as serving fills it (module docstring)
        await _searches(memory, refs, args.queries, state["words"], state["rng"])
    timed_from, read_from = cpu_times(), disk_reads_kb()
    searches = await _searches(memory, refs, args.queries, state["words"], state["rng"])
    deletions = await _deletions(memory, refs, have, args.deletes, state["deleted"], state["rng"])
    steal, read_to = steal_share(timed_from, cpu_times()), disk_reads_kb()
    bands = await _bands(memory, refs, have, args.band_queries, state["words"], state["rng"]) if args.band_queries else {}
    return {
        "messages": stored,
        "largest_conversation": want[0],
        "median_conversation": sorted(want)[len(want) // 2],
        "bulk": {
            "messages": loaded,
            "seconds": round(load_seconds, 1),
            "per_second": round(loaded / load_seconds, 1) if load_seconds else 0.0,
        },
        "distribution": distribution,
        "vacuum_seconds": round(vacuum_seconds, 1),
        "index_seconds": None if index_seconds is None else round(index_seconds, 1),
        "own_indexes": own,
        "ingest": ingested,
        "real_share": round(state["real"] / stored, 6) if stored else 0.0,
        "bytes": size,
        "bytes_per_million": int(size / stored * 1_000_000) if stored else 0,
        "bytes_by": await store_bytes(memory),
        "search": searches,
        "bands": bands,
        "delete": deletions,
        "rss_mb": round(_rss_mb(), 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "shards": await search_shards(memory, refs[0]),
        "load_average": round(os.getloadavg()[0], 1),
        "steal": steal,  # while the searches and deletions were timed
        "warmed": warmed,
        "disk_read_mb": None if read_from is None or read_to is None else round((read_to - read_from) / 1000, 1),
    }


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    totals = steps(args.messages, args.conversations, args.steps)
    run_id = uuid.uuid4().hex[:6]
    refs = _refs(run_id, args.conversations)
    state: dict[str, Any] = {
        "words": vocabulary(),
        "rng": random.Random(args.seed),
        "deleted": set(),
        "real": 0,
        "distribute": args.distribute_after,
    }
    results = []
    async with bench_memory(settings, "stashbird_bench_scale", keep=args.reuse) as memory:
        plan = await citus_plan(memory, principal=BENCH)
        if args.distribute_after and (plan.citus is None or args.reuse or all(s.done for s in plan.steps)):
            raise ValidationError("--distribute-after", "needs a Citus database not distributed yet (and no --reuse)")
        if plan.citus is not None and not args.distribute_after:
            await citus_plan(memory, principal=BENCH, apply=True)
        # Each message's vector is the sum of its words' (lab.synthetic), and each
        # question's the embedder's: near a question is what holds its words.
        state["word_vectors"] = [list(v) for v in (await memory.embedder.embed(state["words"])).vectors]
        have = [0] * len(refs)
        if args.reuse:
            refs = await _stored_refs(memory, args.conversations)
            totals, have = totals[-1:], sizes(totals[-1], len(refs), args.skew)
        for total in totals:
            results.append(await _step(memory, args, refs, have, total, state))
            # Each step's figures as soon as they are taken: a long run shows its way.
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    return {
        "bench": "scale",
        "target": "citus" if plan.citus is not None else ("server" if settings.database.url else "embedded"),
        "conversations": args.conversations,
        "skew": args.skew,
        "steps": results,
        "cores": os.cpu_count(),
    }


def _latency(figures: dict[str, Any]) -> str:
    return f"{figures['median_ms']:>7} {figures['p99_ms']:>7}"


def _largest_parts(step: dict[str, Any], shown: int = 8) -> str:
    """The step's ``shown`` largest tables and indexes, in MB per million messages."""
    per_million = 1_000_000 / step["messages"] if step["messages"] else 0.0
    parts = list(step["bytes_by"].items())
    rest = sum(size for _, size in parts[shown:])
    named = [f"{name} {size * per_million / 1e6:.0f}" for name, size in parts[:shown]]
    return ", ".join(named + ([f"{len(parts) - shown} more {rest * per_million / 1e6:.0f}"] if rest else []))


def render(result: dict[str, Any]) -> str:
    steps_ = result["steps"]
    lines = [
        f"bench scale on the {result['target']} database: {result['conversations']} conversations "
        f"(Zipf skew {result['skew']}), every index present (HNSW rebuilt after each bulk load; "
        "HNSW s: the shards' shared index, none on one server); "
        f"latencies in ms (median p99); {result['cores']} cores, load average at each step's end, "
        "steal: the share of CPU time the hypervisor took while latencies were timed",
        f"{'messages':>9} {'largest':>8} {'bulk/s':>8} {'real/s':>7} {'real share':>10} {'MB/1M msgs':>10} {'HNSW s':>7} "
        f"{'search largest':>15} {'search random':>15} {'delete largest':>15} {'delete random':>15} {'RSS MB':>7} {'load':>5} "
        f"{'steal':>6}",
    ]
    for s in steps_:
        search, delete = s["search"], s["delete"]
        built = "-" if s["index_seconds"] is None else s["index_seconds"]
        lines.append(
            f"{s['messages']:>9} {s['largest_conversation']:>8} {s['bulk']['per_second']:>8} {s['ingest']['per_second']:>7} "
            f"{s['real_share']:>10.4%} {s['bytes_per_million'] / 1e6:>10.0f} {built:>7} "
            f"{_latency(search['largest'])} {_latency(search['random'])} "
            f"{_latency(delete['largest'])} {_latency(delete['random'])} {s['rss_mb']:>7} {s['load_average']:>5} "
            f"{'-' if s['steal'] is None else format(s['steal'], '.1%'):>6}"
        )
    for s in steps_:
        checks = (
            f"{s['search']['empty']} empty searches, {s['delete']['wrong']} deletions not done, "
            f"{s['ingest']['unsearchable']} ingested messages not searchable"
        )
        lines.append(f"at {s['messages']}: plan in the largest conversation: {s['search']['plan']}; {checks}")
        if s["distribution"]:
            moved = s["distribution"]
            lines.append(
                f"  loaded into plain tables, then citus-plan --apply: {moved['rows']} rows of {moved['tables']} tables "
                f"moved into shards in {moved['seconds']} s"
            )
        warmed, read = s["warmed"], "-" if s["disk_read_mb"] is None else s["disk_read_mb"]
        cache = (
            "not read first (--cold)"
            if warmed is None
            else f"{warmed['mb']} MB read in {warmed['seconds']} s first "
            f"({warmed['read_here']} of {warmed['folders']} nodes' folders on this machine)"
        )
        lines.append(f"  page cache: the store {cache}; this machine read {read} MB from disk while timing")
        own = s["own_indexes"]
        lines.append(
            f"  own vector indexes (past {OWN_INDEX_ROWS} messages or communities, {FACT_INDEX_ROWS} entities "
            f"or relations): {own['indexes']} in "
            f"{own['conversations']} conversations, built in {own['seconds']} s"
        )
        lines.append(f"  bytes per 1M messages by table and index: {_largest_parts(s)}")
        lines.append(
            "  CPU per search, the machine's busy time (this process's own): "
            + ", ".join(f"{which} {c['machine']} ms ({c['client']})" for which, c in s["search"]["cpu_ms"].items())
            + f"; with nothing else running, a search takes at least its busy time over the {result['cores']} cores"
        )
        for name, band in s["bands"].items():
            recall = "; ".join(f"{kind} {r['mean']:.3f} (lowest {r['min']:.2f})" for kind, r in band["recall_at_30"].items())
            lines.append(
                f"  {name} messages ({band['queries']} searches over conversations of {band['conversations']}): "
                f"search median {band['search_median_ms']} ms, planning of its vector statements "
                f"{band['planning_median_ms']} ms ({band['planning_share']:.0%}); recall@{RECALL_K} of HNSW scans "
                f"against exact: {recall or 'none (exact scans)'}"
            )
        if s["shards"]:
            shards = s["shards"]
            lines.append(
                f"  {shards['shards']} shards of search_documents, rows min/median/max "
                f"{shards['rows_min']}/{shards['rows_median']}/{shards['rows_max']}; a vector search runs as "
                f"{shards['search_tasks']} task(s)"
            )
    first, last = steps_[0], steps_[-1]
    for name in ("search", "delete"):
        growth = last[name]["all"]["p99_ms"] / first[name]["all"]["p99_ms"] if first[name]["all"]["p99_ms"] else float("nan")
        lines.append(
            f"{name} p99 over all conversations: {first[name]['all']['p99_ms']} ms at {first['messages']}, "
            f"{last[name]['all']['p99_ms']} ms at {last['messages']} (x{growth:.2f}; targets p99 <= 25 ms at 1M, growth <= 1.3x)"
        )
    lines.append(f"peak RSS of this process {last['peak_rss_mb']} MB (embedder included)")
    return "\n".join(lines)
