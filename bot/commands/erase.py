"""``stashbird erase --conversation C``: for operators who must guarantee that what was
deleted from a conversation is physically gone from the table files.

Postgres rewrites whole tables, so this rewrites the memory tables of every
conversation (VACUUM FULL: live rows only, every index rebuilt, the full-text index
included) and then forces a CHECKPOINT. It takes an ACCESS EXCLUSIVE lock on each table
in turn: the bot's reads and writes of that table wait until it is done. Prints the
time each table took; docs/guarantees/deletion.md says what remains in
the write-ahead log and in backups.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import ConversationRef, Principal, erase


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conversation", required=True, help="conversation name, or platform:workspace:channel")
    parser.add_argument("--principal", default="cli", help="who asks, for the audit log")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    async with memory_from_settings(settings) as memory:
        report = await erase(memory, ConversationRef.parse(args.conversation), principal=Principal.operator(args.principal))
    return {"conversation": args.conversation, **asdict(report)}


def render(result: dict[str, Any]) -> str:
    tables = ", ".join(f"{table} {seconds} s" for table, seconds in result["tables"].items())
    return "\n".join(
        [
            f"{result['conversation']}: {result['operation']} of the memory tables in {result['seconds']} s "
            f"({result['bytes_after'] / 1e6:.1f} MB after)",
            f"  lock: {result['lock']}",
            f"  per table: {tables}",
            "  planner statistics (pg_statistic): "
            + ("rewritten" if result["statistics_rewritten"] else "NOT rewritten: needs a superuser; old values may remain"),
            "  deleted rows are now in no table or index file; the write-ahead log keeps them until its",
            "  segments are recycled and overwritten, backups until they expire (docs/guarantees/deletion.md)",
        ]
    )
