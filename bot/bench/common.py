"""What the benchmarks share: a throwaway database, the LoCoMo corpus, percentiles."""

from __future__ import annotations

import glob
import resource
import statistics
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

from bot import locomo
from bot.runtime import build_embedder
from bot.settings import Settings
from memory.core import Memory, open_memory
from memory.models.embedder import Embedder
from memory.store.embedded import drop_embedded_database, start_embedded

DEFAULT_LOCOMO = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo"


def add_locomo_argument(parser) -> None:
    parser.add_argument(
        "--locomo", type=Path, default=DEFAULT_LOCOMO, help="folder of LoCoMo files (default: ../shared/data/locomo)"
    )


def load_locomo(folder: Path) -> list[locomo.Conversation]:
    files = sorted(glob.glob(str(Path(folder) / "*.json")))
    if not files:
        raise FileNotFoundError(2, "no LoCoMo files", str(folder))
    return [locomo.load(Path(f)) for f in files]


@asynccontextmanager
async def bench_memory(
    settings: Settings, name: str, embedder: Embedder | None = None, *, keep: bool = False, **kwargs
) -> AsyncIterator[Memory]:
    """A Memory on a fresh database of the embedded server (dropped first if left over;
    ``keep=True`` reuses it as left by the last run), or on DATABASE_URL when set, where
    the benchmark uses conversations of its own."""
    embedder = embedder or build_embedder(settings)
    if settings.database_url:
        url = settings.database_url
    else:
        if not keep:
            drop_embedded_database(settings.data_dir, name)
        url = start_embedded(settings.data_dir, name)
    memory = await open_memory(url, embedder, **kwargs)
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


def peak_rss_mb() -> float:
    """Peak resident memory of this process (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
