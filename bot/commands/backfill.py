"""``stashbird backfill slack|discord --channel ID [--since DATE]``: import a channel's
history through the platform API, with a progress bar; resumable (run again after an
interruption, it continues) and idempotent with the live stream."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from bot.progress import progress
from bot.runtime import memory_from_settings
from bot.service import service_config, slack_connector
from bot.settings import Settings
from connectors.backfill import BackfillReport
from connectors.discord.history import backfill as discord_backfill
from connectors.discord.rest import endpoints_from, rest_client
from connectors.service import ChatService
from connectors.slack.backfill import SlackBackfill
from memory import StashbirdError, parse_time


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("platform", choices=["slack", "discord"], help="the platform to read")
    parser.add_argument("--channel", required=True, help="the channel (or Discord thread) id")
    parser.add_argument("--since", help="start at this date (YYYY-MM-DD or ISO 8601); default: the channel's start")


async def _slack(args: argparse.Namespace, settings: Settings, since: datetime | None) -> BackfillReport:
    async with memory_from_settings(settings) as memory:
        service = ChatService(memory, config=service_config(settings.chat))
        slack = slack_connector(service, settings.chat)
        if slack is None or not settings.chat.slack_bot_token:
            raise StashbirdError("SLACK_BOT_TOKEN is not set (backfill reads one workspace's channel)")
        service.add_platform(slack)
        await slack.identify()
        with progress(None, "backfill") as bar:
            return await SlackBackfill(service, slack, slack.team, args.channel).run(since, bar.update)


async def _discord(args: argparse.Namespace, settings: Settings, since: datetime | None) -> BackfillReport:
    async with memory_from_settings(settings) as memory, rest_client(endpoints_from(settings.chat)) as client:
        assert client.user is not None
        with progress(None, "backfill") as bar:
            return await discord_backfill(memory, client.http, args.channel, str(client.user.id), since, bar.update)


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    since = parse_time(args.since, "--since") if args.since else None
    report = await (_slack if args.platform == "slack" else _discord)(args, settings, since)
    return report.as_dict()


def render(result: dict[str, Any]) -> str:
    resumed = f" (resumed at message {result['resumed_after']})" if result["resumed_after"] else ""
    return (
        f"{result['conversation']}{resumed}: {result['fetched']} messages read, {result['stored']} stored, "
        f"{result['duplicate']} already stored, {result['tombstoned']} refused as deleted, "
        f"{result['forgotten']} marked deleted and forgotten, {result['skipped']} skipped, "
        f"{result['opted_out']} not stored (their authors opted out)"
    )
