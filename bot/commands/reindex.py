"""``stashbird reindex [--conversation C]``: embed stored messages again from what is
indexed now (once after migration 0004, which took the speaker's name out of message
documents); without ``--conversation``, every conversation, which clears the mark that
start-up warns about."""

from __future__ import annotations

import argparse

from bot.progress import progress
from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import ConversationRef, Principal, reindex


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conversation", help="only this conversation (default: all of them)")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, dict[str, int]]:
    ref = ConversationRef.parse(args.conversation) if args.conversation else None
    async with memory_from_settings(settings) as memory:
        with progress(0, "reindex") as bar:
            done = await reindex(memory, ref, principal=Principal.operator("cli"), on_batch=bar.update)
    return {"reindexed": done}


def render(result: dict[str, dict[str, int]]) -> str:
    lines = [f"embedded again: {sum(result['reindexed'].values())} messages"]
    lines += [f"  {name}: {count}" for name, count in result["reindexed"].items()]
    return "\n".join(lines)
