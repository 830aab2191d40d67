"""The missed-deletion sweep for Discord: every Discord conversation in memory checked
against its channel's history (``connectors.sweep`` does the comparing and forgetting).

The gateway sends no deletes for the time the bot was offline, and a new session cannot
RESUME what it never saw. A channel's history over the sweep window (messages after the
window's first snowflake) is what still exists; a stored message not in it was deleted.
A channel Discord no longer has (404 Unknown Channel: deleted, or a thread deleted with
its channel while the bot was away) is dropped whole, as a live CHANNEL_DELETE would
have. Any other failure (no access, rate limits) forgets nothing and is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

import discord

from connectors.discord import payloads
from connectors.discord.history import present_ids
from connectors.sweep import SWEEP, SweepReport, sweep_conversation
from memory import ConversationRef, Memory, StoredMessage, conversations, drop_conversation

log = logging.getLogger(__name__)


class ChannelGone(Exception):
    """The channel (or thread) no longer exists on Discord."""


async def sweep_discord(
    memory: Memory, http: discord.http.HTTPClient, days: int, now: datetime | None = None
) -> list[SweepReport]:
    """Sweep every Discord conversation; returns one report per conversation checked."""

    async def present(conversation: ConversationRef, stored: Sequence[StoredMessage], since: datetime) -> set[str]:
        ids = await present_ids(http, conversation.channel_id, since)
        if ids is None:
            raise ChannelGone(str(conversation))
        return ids

    reports: list[SweepReport] = []
    for conversation in await conversations(memory, principal=SWEEP, platform=payloads.PLATFORM):
        try:
            reports.append(await sweep_conversation(memory, conversation, present, days, now))
        except ChannelGone:
            await drop_conversation(memory, conversation, principal=SWEEP)
            log.info("sweep: %s no longer exists on Discord; its memory was dropped", conversation)
            reports.append(SweepReport(str(conversation), dropped=True))
        except Exception as error:  # noqa: BLE001 - one unreadable channel must not stop the sweep
            log.warning("sweep of %s skipped: %s", conversation, error)
    return reports
