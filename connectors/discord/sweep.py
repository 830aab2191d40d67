"""The missed-deletion sweep for Discord: one Discord conversation's recent messages
checked against its channel's history (``connectors.sweep`` compares and forgets).

The gateway sends no deletes for the time the bot was offline, and a new session cannot
RESUME what it never saw. A channel's history over the sweep window (messages after the
window's first snowflake) is what still exists; a stored message not in it was deleted.
A channel Discord no longer has (404 Unknown Channel: deleted, or a thread deleted with
its channel, while the bot was away) is dropped whole, as a live CHANNEL_DELETE would
have been. Any other failure (no access, rate limits) raises and forgets nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import discord

from connectors.discord.history import present_ids
from connectors.sweep import SWEEP, SweepReport, sweep_conversation
from memory import ConversationRef, Memory, StoredMessage, drop_conversation


class ChannelGone(Exception):
    """The channel (or thread) no longer exists on Discord."""


async def sweep_discord_conversation(
    memory: Memory, http: discord.http.HTTPClient, conversation: ConversationRef, days: int, now: datetime | None = None
) -> SweepReport:
    async def present(ref: ConversationRef, stored: Sequence[StoredMessage], since: datetime) -> set[str]:
        ids = await present_ids(http, ref.channel_id, since)
        if ids is None:
            raise ChannelGone(str(ref))
        return ids

    try:
        return await sweep_conversation(memory, conversation, present, days, now)
    except ChannelGone:
        await drop_conversation(memory, conversation, principal=SWEEP)
        return SweepReport(str(conversation), dropped=True)
