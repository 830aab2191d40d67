"""``stashbird usage --conversation C``: totals by phase and operation."""

from __future__ import annotations

import argparse
from typing import Any

from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import ConversationRef, Principal, usage


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conversation", required=True)


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    ref = ConversationRef.parse(args.conversation)
    async with memory_from_settings(settings) as memory:
        totals = await usage(memory, ref, principal=Principal.operator("cli"))
    return {"conversation": str(ref), "usage": totals}


def render(result: dict[str, Any]) -> str:
    lines = [f"usage of {result['conversation']}:"]
    lines += [
        f"  {u['phase']:<10} {u['operation']:<18} {u['model']:<24} calls {u['calls']:>6}  "
        f"prompt {u['prompt_tokens']:>9}  completion {u['completion_tokens']:>8}"
        for u in result["usage"]
    ]
    return "\n".join(lines)
