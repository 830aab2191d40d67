"""What the benchmarks share: a throwaway database, the LoCoMo corpus and its splits,
LoCoMo conversations ingested and consolidated (kept between runs with ``--reuse``),
percentiles, and figures of a group channel against its conversations alone."""

from __future__ import annotations

import argparse
import glob
import os
import resource
import statistics
import time
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, AsyncIterator

from bot import locomo
from bot.runtime import build_embedder, settle_heap
from bot.settings import Settings
from lab.group_channels import CASTS
from lab.probes import drop_embedded_database
from memory import (
    ConversationRef,
    Embedder,
    Extractor,
    Memory,
    OfflineExtractor,
    Principal,
    UnknownConversation,
    build_communities,
    consolidate,
    ingest,
    messages,
    open_memory,
    start_embedded,
)

DEFAULT_LOCOMO = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo"
# Tuning is done on the calibration split only; figures are reported on the held-out one.
SPLITS = {"calibration": ("26", "30", "41", "42", "43"), "held-out": ("44", "47", "48", "49", "50")}
# The database that --reuse keeps (apart from the throwaway ones, which a normal run
# drops first), shared by the benchmarks that read LoCoMo conversations.
REUSE_DATABASE = "stashbird_bench_retrieval_reuse"
BENCH = Principal.operator("bench")


def add_locomo_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--locomo", type=Path, default=DEFAULT_LOCOMO, help="folder of LoCoMo files (default: ../shared/data/locomo)"
    )


def add_cast_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cast",
        choices=CASTS,
        default="ring",
        help="with --group, the channel's cast: ring (the default: each name carries two LoCoMo people) or pairs "
        "(every speaker keeps their name: the cost of interleaving alone)",
    )


def load_locomo(folder: Path) -> list[locomo.Conversation]:
    files = sorted(glob.glob(str(Path(folder) / "*.json")))
    if not files:
        raise FileNotFoundError(2, "no LoCoMo files", str(folder))
    return [locomo.load(Path(f)) for f in files]


def reuse_run_id(consolidated: bool) -> str:
    """A reused database keeps one copy of each conversation per graph setting."""
    return "reuse-graph" if consolidated else "reuse-raw"


def channel_run_id(run_id: str, layout: str, cast: str) -> str:
    """The run id a group channel is ingested under: every layout and cast gives it the same
    name and message ids, so a kept database (--reuse) holds each apart by this id; the ring
    keeps the id it had before casts, so that its kept rows are reused."""
    return f"{run_id}-{layout}" if cast == "ring" else f"{run_id}-{layout}-{cast}"


def question_date(conversation: locomo.Conversation) -> datetime:
    """When a conversation's questions are asked: the day after its last session."""
    return max(conversation.session_dates.values()) + timedelta(days=1)


def ratios(channel: dict[str, Any], alone: dict[str, Any]) -> dict[str, Any]:
    """Each figure of a group channel over the same figure of its conversations alone,
    nested as the figures are (None where alone's is 0). Counts (whole numbers) are the
    same on both sides and left out. Pure."""
    found: dict[str, Any] = {}
    for key, value in channel.items():
        other = alone.get(key)
        if isinstance(value, dict) and isinstance(other, dict):
            found[key] = ratios(value, other)
        elif isinstance(value, float) and isinstance(other, (int, float)):
            found[key] = round(value / other, 4) if other else None
    return found


def times(ratio: float | None) -> str:
    """A ratio as the renderings print it."""
    return "n/a" if ratio is None else f"{ratio:.2f}x"


async def locomo_conversation(
    memory: Memory,
    conversation: locomo.Conversation,
    run_id: str,
    consolidated: bool,
    communities: bool = False,
    extractor: Extractor | None = None,
) -> tuple[ConversationRef, set[str]]:
    """Ingest and consolidate, offline unless another ``extractor`` is given (both
    skipped for what the database already holds: the ingest when every turn is stored,
    the consolidation past its checkpoint), and build communities when asked. Returns
    the conversation and the LoCoMo turn ids it holds."""
    ref = ConversationRef("bench", run_id, f"locomo-{conversation.name}")
    try:
        stored = len(await messages(memory, ref, principal=BENCH))
    except UnknownConversation:
        stored = 0
    if stored < len(conversation.turns):
        await ingest(memory, ref, [t.message for t in conversation.turns], principal=BENCH)
    if consolidated:
        await consolidate(memory, ref, principal=BENCH, extractor=extractor or OfflineExtractor())
    if communities:
        await build_communities(memory, ref, principal=BENCH)
    return ref, {str(m["message_id"]) for m in await messages(memory, ref, principal=BENCH)}


@asynccontextmanager
async def bench_memory(
    settings: Settings, name: str, embedder: Embedder | None = None, *, keep: bool = False, **kwargs: Any
) -> AsyncIterator[Memory]:
    """A Memory on a fresh database of the embedded server (dropped first if left over;
    ``keep=True`` reuses it as left by the last run), or on DATABASE_URL when set, where
    the benchmark uses conversations of its own."""
    embedder = embedder or build_embedder(settings.models)
    if settings.database.url:
        url = settings.database.url
    else:
        if not keep:
            drop_embedded_database(settings.database.data_dir, name)
        url = start_embedded(settings.database.data_dir, name)
    memory = await open_memory(url, embedder, **kwargs)
    settle_heap()  # as `stashbird serve` does once it is ready
    try:
        yield memory
    finally:
        await memory.close()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, int(round(share * (len(ordered) - 1)))))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def cpu_times() -> tuple[int, ...] | None:
    """The machine's CPU time counters, the ``cpu`` line of /proc/stat (user, nice,
    system, idle, iowait, irq, softirq, steal, ...); None where there is none."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    return tuple(int(x) for x in fields[1:]) if fields[:1] == ["cpu"] else None


def steal_share(before: tuple[int, ...] | None, after: tuple[int, ...] | None) -> float | None:
    """The share of the CPU time between two ``cpu_times`` readings that the hypervisor
    gave to other machines (steal): on a shared virtual machine latencies rise with it,
    whatever the load average says (seen here: 12-29% while a benchmark ran, 2% idle).
    None without both readings. Pure."""
    if before is None or after is None or min(len(before), len(after)) < 8:
        return None
    # The first eight counters; guest time (the ninth and tenth) is already in user and nice.
    total = sum(after[:8]) - sum(before[:8])
    return round((after[7] - before[7]) / total, 4) if total > 0 else 0.0


def busy_ms(before: tuple[int, ...] | None, after: tuple[int, ...] | None, ticks: int | None = None) -> float | None:
    """Milliseconds of CPU time the machine spent busy (user, nice, system, irq, softirq:
    all cores together, idle, iowait and steal left out) between two ``cpu_times``
    readings, whose unit is ``ticks`` a second (the clock's, by default); None without
    both readings. Pure but for the clock's rate."""
    if before is None or after is None or min(len(before), len(after)) < 8:
        return None
    busy = sum(after[i] - before[i] for i in (0, 1, 2, 5, 6))
    return busy * 1000 / (ticks or os.sysconf("SC_CLK_TCK"))


def warm_page_cache(folders: list[str]) -> dict[str, Any]:
    """Read every file of ``folders`` that is on this machine once, so that the OS page
    cache holds the store as it does on a server that has been running (a store reused
    from an earlier session may start with almost nothing cached: its first searches then
    read from disk, several times slower). Folders of other machines are counted, not read."""
    began, size, here = time.perf_counter(), 0, 0
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        here += 1
        for root, _, files in os.walk(folder):
            for name in files:
                try:
                    with open(os.path.join(root, name), "rb", buffering=0) as handle:
                        while chunk := handle.read(1 << 20):
                            size += len(chunk)
                except OSError:  # dropped meanwhile (a temporary file)
                    continue
    return {
        "folders": len(folders),
        "read_here": here,
        "mb": round(size / 1e6, 1),
        "seconds": round(time.perf_counter() - began, 1),
    }


def disk_reads_kb() -> int | None:
    """Kilobytes this machine has read from disk since it started (``pgpgin`` of
    /proc/vmstat); None where there is none. Read before and after timing: a difference
    says the latencies include disk reads."""
    try:
        with open("/proc/vmstat") as vmstat:
            return next((int(line.split()[1]) for line in vmstat if line.startswith("pgpgin ")), None)
    except OSError:
        return None


def peak_rss_mb() -> float:
    """Peak resident memory of this process (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
