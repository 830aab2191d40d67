"""The missed-deletion sweep for Slack: every Slack conversation in memory, checked
against ``conversations.history`` / ``conversations.replies`` (connectors.sweep)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from connectors.slack import payloads
from connectors.slack.app import SlackConnector
from connectors.slack.history import present_ids
from connectors.sweep import SWEEP, SweepReport, sweep_conversation
from memory import ConversationRef, Memory, StoredMessage, conversations

log = logging.getLogger(__name__)


async def sweep_slack(memory: Memory, slack: SlackConnector, days: int, now: datetime | None = None) -> list[SweepReport]:
    """Sweep every Slack conversation; one whose history cannot be read is skipped (logged)."""

    async def present(conversation: ConversationRef, stored: Sequence[StoredMessage], since: datetime) -> set[str]:
        return await present_ids(slack.client, conversation, stored, since)

    reports: list[SweepReport] = []
    for conversation in await conversations(memory, principal=SWEEP, platform=payloads.PLATFORM):
        try:
            reports.append(await sweep_conversation(memory, conversation, present, days, now))
        except Exception as error:  # noqa: BLE001 - one unreadable channel must not stop the sweep
            log.warning("sweep of %s skipped: %s", conversation, error)
    return reports
