"""``stashbird communities --conversation C [--rebuild]``: the conversation's communities
(label-propagation clusters of entities) with their summaries; ``--rebuild`` rebuilds
and summarises them first. A dirty community (waiting for regeneration) shows no summary."""

from __future__ import annotations

import argparse
from typing import Any

from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import ConversationRef, Principal, build_communities, list_communities


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conversation", required=True, help="conversation name, or platform:workspace:channel")
    parser.add_argument("--rebuild", action="store_true", help="rebuild by label propagation and summarise first")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    ref = ConversationRef.parse(args.conversation)
    principal = Principal.operator("cli")
    async with memory_from_settings(settings) as memory:
        report = await build_communities(memory, ref, principal=principal) if args.rebuild else None
        listed = await list_communities(memory, ref, principal=principal)
    return {"conversation": str(ref), "rebuild": report.as_dict() if report else None, "communities": listed}


def render(result: dict[str, Any]) -> str:
    lines = []
    if result["rebuild"]:
        r = result["rebuild"]
        lines.append(f"rebuilt: {r['created']} new, {r['kept']} kept, {r['replaced']} replaced, {r['regenerated']} summarised")
    for c in result["communities"]:
        head = "(dirty: waiting for regeneration)" if c["dirty"] else c["label"]
        lines.append(f"#{c['id']} {head} [{', '.join(c['members'])}]")
        if c["summary"]:
            lines.append(f"  {c['summary']}")
    return "\n".join(lines) or f"{result['conversation']}: no communities"
