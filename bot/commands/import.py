"""``stashbird import slack-export FILE.zip [--workspace T…]`` and ``stashbird import
discord-export FILE.json [--bot-id ID]``: import the exports teams already keep into the
conversations the live stream uses (so later live events for the same messages are
duplicates). A Slack export's messages marked deleted are forgotten."""

from __future__ import annotations

import argparse
import zipfile
from pathlib import Path
from typing import Any

from bot.files import read_json
from bot.progress import progress
from bot.runtime import memory_from_settings
from bot.settings import Settings
from connectors.backfill import BackfillReport, forget_deleted, store
from connectors.discord.export import read_export as read_discord_export
from connectors.slack.export import read_export as read_slack_export
from memory import Principal, ValidationError

SLACK_IMPORT = Principal.job("slack-export-import")
DISCORD_IMPORT = Principal.job("discord-export-import")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("format", choices=["slack-export", "discord-export"], help="the export's format")
    parser.add_argument("file", type=Path, help="a Slack workspace export zip, or a DiscordChatExporter JSON export")
    parser.add_argument("--workspace", help="slack-export: the team id (T…), when users.json does not name it")
    parser.add_argument("--bot-id", help="discord-export: your Stashbird bot's user id: its own messages are skipped, as live")


def _load_json(path: Path) -> Any:
    """The export (UTF-8, an optional byte-order mark, ``-`` for standard input)."""
    try:
        return read_json(path)
    except ValidationError as error:
        raise ValidationError(str(path), f"is not a JSON export: {error.message}") from None


async def _discord(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    contents = read_discord_export(_load_json(args.file), args.bot_id)
    async with memory_from_settings(settings) as memory:
        with progress(len(contents.messages), "import") as bar:
            report = await store(memory, contents.conversation, contents.messages, DISCORD_IMPORT, on_batch=bar.update)
    return {
        "conversation": str(contents.conversation),
        "channel": contents.channel_name,
        **report.as_dict(),
        "skipped": contents.skipped,
        "rejected": [{"position": position, "reason": reason} for position, reason in contents.rejected]
        + [{"position": r.platform_message_id, "reason": r.reason} for r in report.rejected],  # refused by the database
    }


async def _slack(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    if not args.file.exists():
        raise FileNotFoundError(2, "no such file", str(args.file))
    try:
        with zipfile.ZipFile(args.file) as archive:
            export = read_slack_export(archive, args.workspace)
    except zipfile.BadZipFile:
        raise ValidationError(str(args.file), "is not a zip file") from None
    reports: list[dict[str, Any]] = []
    async with memory_from_settings(settings) as memory:
        with progress(sum(len(c.messages) for c in export.channels), "import") as bar:
            for channel in export.channels:
                report = BackfillReport(str(channel.conversation), fetched=len(channel.messages), skipped=channel.skipped)
                report.add(await store(memory, channel.conversation, channel.messages, SLACK_IMPORT, on_batch=bar.update))
                report.forgotten = await forget_deleted(memory, channel.conversation, channel.deleted, SLACK_IMPORT)
                report.rejected = channel.rejected + report.rejected  # unreadable, then refused by the database
                reports.append({"channel": channel.name, **report.as_dict()})
    return {"workspace": export.team, "channels": reports}


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    return await (_slack(args, settings) if args.format == "slack-export" else _discord(args, settings))


def _render_slack(result: dict[str, Any]) -> list[str]:
    lines = [f"Slack workspace {result['workspace']}:"]
    for c in result["channels"]:
        lines.append(
            f"  #{c['channel']} ({c['conversation']}): {c['stored']} stored, {c['duplicate']} already stored, "
            f"{c['tombstoned']} refused as deleted, {c['forgotten']} marked deleted and forgotten, {c['skipped']} skipped, "
            f"{c['opted_out']} not stored (their authors opted out)"
        )
        lines += [f"    {r['message']} rejected: {r['reason']}" for r in c["rejected"]]
    return lines


def render(result: dict[str, Any]) -> str:
    if "workspace" in result:
        return "\n".join(_render_slack(result))
    lines = [
        f"{result['conversation']} (#{result['channel']}): {result['stored']} stored, {result['duplicate']} already stored, "
        f"{result['tombstoned']} refused as deleted, {result['skipped']} skipped (system notices, empty), "
        f"{result['opted_out']} not stored (their authors opted out)"
    ]
    lines += [f"  message {r['position']} rejected: {r['reason']}" for r in result["rejected"]]
    return "\n".join(lines)
