"""A Discord channel's history over REST: backfill into memory, and the ids still there
(for the missed-deletion sweep).

Both read ``GET /channels/{id}/messages`` forwards with ``after=`` (Discord returns each
page newest first; a page is put in time order here). Backfill stores messages with the
same conversation, ids and rules as the live stream (``payloads``), so a message the live
stream already brought is a duplicate and one deleted live (a tombstone) is not stored.
It saves its position after every page (``read_cursor``/``save_cursor``, in the
database): interrupted and run again, it continues where it stopped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import discord

from connectors.backfill import BackfillReport, store
from connectors.discord import payloads
from memory import (
    ConversationRef,
    Memory,
    Principal,
    ValidationError,
    read_cursor,
    save_cursor,
)

PAGE = 100  # the most Discord returns per request
CURSOR = "discord-backfill"
BACKFILL = Principal.job("discord-backfill")


async def pages_after(http: discord.http.HTTPClient, channel_id: str, after: str) -> AsyncIterator[list[dict[str, Any]]]:
    """The channel's messages after the id ``after``, a page at a time, oldest first."""
    while True:
        page: list[dict[str, Any]] = sorted(
            (dict(m) for m in await http.logs_from(channel_id, PAGE, after=after)), key=lambda m: int(m["id"])
        )
        if not page:
            return
        yield page
        after = str(page[-1]["id"])
        if len(page) < PAGE:
            return


async def channel_conversation(http: discord.http.HTTPClient, channel_id: str) -> ConversationRef:
    """The conversation of a guild channel or thread (its guild read from the channel)."""
    try:
        channel: dict[str, Any] = dict(await http.get_channel(channel_id))
    except discord.NotFound:
        raise ValidationError("--channel", f"Discord has no channel {channel_id} (or the bot cannot see it)") from None
    if not channel.get("guild_id"):
        raise ValidationError("--channel", f"{channel_id} is not a server channel; direct messages are not remembered")
    return payloads.conversation(str(channel["guild_id"]), channel_id)


async def backfill(
    memory: Memory,
    http: discord.http.HTTPClient,
    channel_id: str,
    bot_id: str,
    since: datetime | None = None,
    on_page: Callable[[int], object] | None = None,
) -> BackfillReport:
    """Import a channel's history from ``since`` (or its start), resuming a previous run;
    ``bot_id``'s own messages are skipped, as the live stream skips them."""
    conversation = await channel_conversation(http, channel_id)
    start = payloads.snowflake_at(since) if since else "0"
    cursor = await read_cursor(memory, conversation, CURSOR, principal=BACKFILL)
    report = BackfillReport(str(conversation))
    if cursor and cursor.get("start") == start:
        report.resumed_after = str(cursor["after"])
    guild = payloads.GuildInfo(conversation.workspace_id)
    async for page in pages_after(http, channel_id, report.resumed_after or start):
        kept = [m for m in page if payloads.remembered(m, bot_id)]
        counts = await store(memory, conversation, [payloads.chat_message(m, guild) for m in kept], BACKFILL)
        await save_cursor(memory, conversation, CURSOR, {"start": start, "after": str(page[-1]["id"])}, principal=BACKFILL)
        report.fetched += len(page)
        report.skipped += len(page) - len(kept)
        report.stored += counts.stored
        report.duplicate += counts.duplicate
        report.tombstoned += counts.tombstoned
        if on_page is not None:
            on_page(len(page))
    return report


async def present_ids(http: discord.http.HTTPClient, channel_id: str, since: datetime) -> set[str] | None:
    """Ids of the channel's messages since ``since``; None when the channel is gone."""
    try:
        return {str(m["id"]) async for page in pages_after(http, channel_id, payloads.snowflake_at(since)) for m in page}
    except discord.NotFound:
        return None
