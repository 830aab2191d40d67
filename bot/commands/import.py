"""``stashbird import discord-export FILE.json``: import a DiscordChatExporter JSON export
into the conversation the live stream uses for that channel (so later live events for
the same messages are duplicates)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bot.files import read_json
from bot.progress import progress
from bot.runtime import memory_from_settings
from bot.settings import Settings
from connectors.discord.export import read_export
from connectors.discord.history import store
from memory import Principal, ValidationError

IMPORT = Principal.job("discord-export-import")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("format", choices=["discord-export"], help="the export's format")
    parser.add_argument("file", type=Path, help="a DiscordChatExporter JSON export of one channel or thread")
    parser.add_argument("--bot-id", help="your Stashbird bot's user id: its own messages are skipped, as live")


def _load(path: Path) -> Any:
    """The export (UTF-8, an optional byte-order mark, ``-`` for standard input)."""
    try:
        return read_json(path)
    except ValidationError as error:
        raise ValidationError(str(path), f"is not a JSON export: {error.message}") from None


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    contents = read_export(_load(args.file), args.bot_id)
    async with memory_from_settings(settings) as memory:
        with progress(len(contents.messages), "import") as bar:
            report = await store(memory, contents.conversation, contents.messages, IMPORT, on_batch=bar.update)
    return {
        "conversation": str(contents.conversation),
        "channel": contents.channel_name,
        **report.as_dict(),
        "skipped": contents.skipped,
        "rejected": [{"position": position, "reason": reason} for position, reason in contents.rejected]
        + [{"position": r.platform_message_id, "reason": r.reason} for r in report.rejected],  # refused by the database
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        f"{result['conversation']} (#{result['channel']}): {result['stored']} stored, {result['duplicate']} already stored, "
        f"{result['tombstoned']} refused as deleted, {result['skipped']} skipped (system notices, empty)"
    ]
    lines += [f"  message {r['position']} rejected: {r['reason']}" for r in result["rejected"]]
    return "\n".join(lines)
