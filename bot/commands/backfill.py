"""``stashbird backfill discord --channel ID [--since DATE]``: import a channel's history
through the platform API, resumable and idempotent with the live stream."""

from __future__ import annotations

import argparse
from typing import Any

from bot.progress import progress
from bot.runtime import memory_from_settings
from bot.settings import Settings
from connectors.discord.client import endpoints_from, rest_client
from connectors.discord.history import backfill
from memory import parse_time


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("platform", choices=["discord"], help="the platform to read")
    parser.add_argument("--channel", required=True, help="the channel (or thread) id")
    parser.add_argument("--since", help="start at this date (YYYY-MM-DD or ISO 8601); default: the channel's start")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    since = parse_time(args.since, "--since") if args.since else None
    endpoints = endpoints_from(settings)
    async with memory_from_settings(settings) as memory, rest_client(endpoints) as client:
        assert client.user is not None
        with progress(None, "backfill") as bar:
            report = await backfill(memory, client.http, args.channel, str(client.user.id), since, bar.update)
    return report.as_dict()


def render(result: dict[str, Any]) -> str:
    resumed = f" (resumed after message {result['resumed_after']})" if result["resumed_after"] else ""
    return (
        f"{result['conversation']}{resumed}: {result['fetched']} messages read, {result['stored']} stored, "
        f"{result['duplicate']} already stored, {result['tombstoned']} refused as deleted, {result['skipped']} skipped"
    )
