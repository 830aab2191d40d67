"""``stashbird bench NAME``: benchmarks that print their figures, on a deployment of one's
own as on the repository's.

A plugin command: the ``stashbird`` command line finds it through the
``stashbird.commands`` entry point (pyproject.toml) and imports it only to list or run it,
so the product's own commands never import the benchmarks.
"""

from __future__ import annotations

import argparse
import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # ``stashbird --help`` imports this module for its help line alone
    from bot.settings import Settings

HELP = "benchmarks that print their figures"
BENCHMARKS = {
    "ingest": "fast-path throughput against the local embedder alone, single-message latency, peak memory",
    "update": "replayed extractions session by session: duplicates, stale facts and provenance per sequence",
    "workload": "LLM calls and tokens to consolidate the ten LoCoMo conversations through the scripted LLM server",
    "retrieval": "LoCoMo evidence recall and tokens at K=10/30 with no LLM, baselines, retrieval latency",
    "answers": "offline LoCoMo answers: first citation an evidence turn, category 5 abstention, by split, against the baseline",
    "qa": "LoCoMo question answering with an LLM, graded by an LLM judge: accuracy by category, usage",
    "jobs": "scheduler processes sharing one database under steady load: consolidation and regeneration lag, duplicate work, CPU",
    "forget": "LoCoMo deletion interventions per policy (what each leaves or loses, residue scan), deletion latency",
    "audit": "latency of the audit queries about, provenance and stats on a 100K-message conversation",
    "scale": "1,000 conversations grown to 1M messages with every index: ingest rate, size, search and deletion latency, RSS",
    "serve": "stashbird serve through the Slack stand-in: acks/s, ack latency, mention-to-answer, delete-to-unsearchable",
}


def configure(parser: argparse.ArgumentParser) -> None:
    benches = parser.add_subparsers(dest="bench", required=True)
    for name, help_text in BENCHMARKS.items():
        module = importlib.import_module(f".{name}", __package__)
        sub = benches.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--json", action="store_true", help="print the result as JSON")
        module.configure(sub)
        sub.set_defaults(bench_module=module)


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    result: dict[str, Any] = await args.bench_module.run(args, settings)
    return result


def render(result: dict[str, Any]) -> str:
    text: str = importlib.import_module(f".{result['bench']}", __package__).render(result)
    return text
