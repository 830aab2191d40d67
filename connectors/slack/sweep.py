"""The missed-deletion sweep for Slack: a Slack conversation's recent messages checked
against ``conversations.history`` / ``conversations.replies`` (connectors.sweep)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from slack_sdk.web.async_client import AsyncWebClient

from connectors.slack.history import present_ids
from connectors.sweep import SweepReport, sweep_conversation
from memory import ConversationRef, Memory, StoredMessage


async def sweep_slack_conversation(
    memory: Memory, client: AsyncWebClient, conversation: ConversationRef, days: int, now: datetime | None = None
) -> SweepReport:
    async def present(ref: ConversationRef, stored: Sequence[StoredMessage], since: datetime) -> set[str]:
        return await present_ids(client, ref, stored, since)

    return await sweep_conversation(memory, conversation, present, days, now)
