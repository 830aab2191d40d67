"""``stashbird bench workload``: what consolidation costs in LLM calls and tokens.

Ingests the ten LoCoMo conversations and consolidates each with the default parameters
through the real LLM client and the scripted OpenAI-compatible server on loopback,
whose handlers (lab/standins/scripted_memory.py) answer the real prompts deterministically (the
extraction reply is what the offline extractor finds in the prompt's new lines). Prompt
tokens are the real prompts' sizes; completion tokens depend on the scripted replies.
Reference (the paper): 57 ingestion LLM calls and 484K ingestion prompt tokens for these
ten conversations; Graphiti: about 18K calls and 37M prompt tokens.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections import defaultdict
from typing import Any

from bot.progress import progress
from bot.runtime import build_embedder
from bot.settings import Settings
from lab.bench.common import add_locomo_argument, bench_memory, load_locomo
from lab.standins.scripted_llm import ScriptedLLMServer
from lab.standins.scripted_memory import HANDLERS
from memory import ConversationRef, LLMClient, Principal, consolidate, ingest
from memory import usage as usage_of

BENCH = Principal.operator("bench")

REFERENCE = {"paper": {"calls": 57, "prompt_tokens": 484_000}, "graphiti": {"calls": 18_000, "prompt_tokens": 37_000_000}}


def configure(parser: argparse.ArgumentParser) -> None:
    add_locomo_argument(parser)


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    conversations = load_locomo(args.locomo)
    run_id = uuid.uuid4().hex[:6]
    rows = []
    operations: dict[str, dict[str, int]] = defaultdict(lambda: {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
    with ScriptedLLMServer(HANDLERS) as server:
        llm = LLMClient(base_url=server.base_url, api_key="scripted", model="scripted", timeout=300, max_retries=1)
        async with bench_memory(settings, "stashbird_bench_workload", build_embedder(settings.models), llm=llm) as memory:
            for conversation in conversations:
                ref = ConversationRef("bench", run_id, f"locomo-{conversation.name}")
                await ingest(memory, ref, [t.message for t in conversation.turns], principal=BENCH)
                began = time.perf_counter()
                with progress(len(conversation.turns), f"consolidate {conversation.name}") as bar:
                    report = await consolidate(memory, ref, principal=BENCH, on_progress=bar.update)
                seconds = time.perf_counter() - began
                usage = [
                    u
                    for u in await usage_of(memory, ref, principal=BENCH)
                    if u["phase"] == "ingestion" and not str(u["operation"]).startswith("embed")
                ]
                for u in usage:
                    for field in ("calls", "prompt_tokens", "completion_tokens"):
                        operations[str(u["operation"])][field] += int(str(u[field]))
                rows.append(
                    {
                        "conversation": conversation.name,
                        "turns": len(conversation.turns),
                        "chunks": report.chunks,
                        "calls": sum(int(str(u["calls"])) for u in usage),
                        "prompt_tokens": sum(int(str(u["prompt_tokens"])) for u in usage),
                        "completion_tokens": sum(int(str(u["completion_tokens"])) for u in usage),
                        "entities": report.entities_created,
                        "relations": report.relations_created,
                        "seconds": round(seconds, 1),
                    }
                )
    return {
        "bench": "workload",
        "conversations": rows,
        "operations": dict(operations),
        "total": {
            field: sum(r[field] for r in rows) for field in ("turns", "chunks", "calls", "prompt_tokens", "completion_tokens")
        },
        "reference": REFERENCE,
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        "ingestion LLM workload (scripted LLM, default parameters): conversation, turns, chunks, calls, prompt, completion tokens"
    ]
    for r in result["conversations"]:
        lines.append(
            f"  {r['conversation']:>4} {r['turns']:>5} {r['chunks']:>3} {r['calls']:>4} "
            f"{r['prompt_tokens']:>9} {r['completion_tokens']:>8}"
            f"   ({r['entities']} entities, {r['relations']} relations, {r['seconds']} s)"
        )
    total = result["total"]
    lines.append(
        f"  total {total['turns']:>5} {total['chunks']:>3} {total['calls']:>4} "
        f"{total['prompt_tokens']:>9} {total['completion_tokens']:>8}"
    )
    lines.append(
        "  by operation: "
        + ", ".join(f"{op} {u['calls']} calls / {u['prompt_tokens']} prompt" for op, u in sorted(result["operations"].items()))
    )
    paper, graphiti = result["reference"]["paper"], result["reference"]["graphiti"]
    lines.append(
        f"reference: paper {paper['calls']} calls / {paper['prompt_tokens'] // 1000}K prompt tokens; "
        f"Graphiti ~{graphiti['calls'] // 1000}K calls / {graphiti['prompt_tokens'] // 1_000_000}M prompt tokens"
    )
    return "\n".join(lines)
