"""``stashbird consolidate --conversation C [--extractions FILE]``: turn the new episodes
of a conversation into entities and relations, from its checkpoint."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bot.progress import progress
from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import (
    ConversationRef,
    OfflineExtractor,
    Principal,
    ReplayExtractor,
    consolidate,
    pending,
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conversation", required=True, help="conversation name, or platform:workspace:channel")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--extractions", type=Path, help="replay supplied extractions (JSON Lines, one object per message)")
    source.add_argument("--offline", action="store_true", help="use the offline extractor even when an LLM is configured")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    ref = ConversationRef.parse(args.conversation)
    extractor = ReplayExtractor.from_file(args.extractions) if args.extractions else OfflineExtractor() if args.offline else None
    async with memory_from_settings(settings) as memory:
        principal = Principal.operator("cli")
        total = await pending(memory, ref, principal=principal)
        with progress(total, "consolidate") as bar:
            report = await consolidate(memory, ref, principal=principal, extractor=extractor, on_progress=bar.update)
        mode = "replay" if args.extractions else "llm" if memory.llm is not None and not args.offline else "offline"
    return {"conversation": str(ref), "extractor": mode, **report.as_dict()}


def render(result: dict[str, Any]) -> str:
    lines = [
        f"{result['conversation']}: consolidated {result['episodes']} episodes in {result['chunks']} chunks "
        f"({result['extractor']} extractor)",
        f"  entities: {result['entities_created']} created, {result['entities_merged']} merged",
        f"  relations: {result['relations_created']} created, {result['relations_duplicate']} duplicates, "
        f"{result['relations_superseded']} superseded",
        f"  LLM: {result['llm_calls']} calls, {result['prompt_tokens']} prompt / {result['completion_tokens']} completion tokens",
    ]
    if result["skipped_deleted"]:
        lines.append(f"  skipped {result['skipped_deleted']} episodes deleted or edited during the run")
    if result["stopped"]:
        lines.append(f"  stopped: {result['stopped']}")
    return "\n".join(lines)
