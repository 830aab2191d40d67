"""Backfill a Slack channel through the Web API: ``conversations.history`` newest page
first, each page's threads through ``conversations.replies``; resumable and idempotent.

Position, saved in the database after every page (``save_cursor``): ``top`` (the newest
time this run covers, fixed when it starts), ``resume`` (the oldest message stored so
far: an interrupted run continues below it) and, once a run finishes, ``done_through``
(everything from ``floor`` up to there is stored, so the next run only reads newer
messages). ``floor`` is where ``--since`` starts; a different ``--since`` starts over
(idempotent: what is stored already counts as duplicate).

Messages are read as the live stream reads them (``payloads.chat_message``); the bot's
own messages are skipped, as Bolt skips its own events; a thread parent deleted while
it had replies (a ``tombstone``) is forgotten. A direct message (``conversations.info``
says ``is_im`` or ``is_mpim``) is refused before anything is read: Stashbird remembers
channels only, as the live stream and the export importer do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from connectors.backfill import BackfillReport, forget_deleted, store
from connectors.events import ChatMessage
from connectors.service import ChatService
from connectors.slack import payloads
from connectors.slack.app import SlackConnector
from connectors.slack.history import TOMBSTONE, is_thread_parent, pages, slack_ts, thread_replies
from memory import ConversationRef, Principal, ValidationError, read_cursor, save_cursor

CURSOR = "slack-backfill"
BACKFILL = Principal.job("slack-backfill")


def _position(cursor: dict[str, Any] | None, floor: str, now: str) -> tuple[str, str, str, str | None]:
    """(oldest, latest, top, resumed_after) for this run. Pure."""
    if not cursor or cursor.get("floor") != floor:
        return floor, now, now, None
    if cursor.get("resume"):
        return str(cursor.get("done_through") or floor), str(cursor["resume"]), str(cursor["top"]), str(cursor["resume"])
    return str(cursor.get("done_through") or floor), now, now, None


class SlackBackfill:
    def __init__(self, service: ChatService, slack: SlackConnector, team: str, channel: str) -> None:
        self.service, self.slack, self.channel = service, slack, channel
        self.conversation: ConversationRef = payloads.conversation(team, channel)

    def _own(self, message: dict[str, Any]) -> bool:
        return bool(self.slack.bot_user and message.get("user") == self.slack.bot_user) or bool(
            self.slack.bot_id and message.get("bot_id") == self.slack.bot_id
        )

    async def _read(self, page: list[dict[str, Any]], report: BackfillReport) -> tuple[list[ChatMessage], list[str]]:
        """The page's messages and its threads' replies, described; and deleted parents."""
        raw: list[dict[str, Any]] = []
        for message in page:
            raw.append(message)
            if is_thread_parent(message):
                replies = await thread_replies(self.slack.client, self.channel, str(message["ts"]))
                raw.extend(m for m in replies if m["ts"] != message["ts"])
        chats: list[ChatMessage] = []
        deleted: list[str] = []
        for message in raw:
            report.fetched += 1
            chat = None if self._own(message) else payloads.chat_message(message)
            if message.get("subtype") == TOMBSTONE:
                deleted.append(str(message["ts"]))
            elif chat is None:
                report.skipped += 1
            else:
                author = await self.service.describe(self.conversation, chat.author)
                chats.append(ChatMessage(chat.id, author, chat.text, chat.time, chat.thread_id, chat.reply_to))
        return chats, deleted

    async def _refuse_direct(self) -> None:
        """A direct message's id starts with D; a group DM's is known from its info only."""
        info = (
            {} if self.channel.startswith("D") else (await self.slack.client.conversations_info(channel=self.channel))["channel"]
        )
        if self.channel.startswith("D") or info.get("is_im") or info.get("is_mpim"):
            raise ValidationError("channel", f"{self.channel} is {payloads.DIRECT_REFUSAL}")

    async def run(self, since: datetime | None = None, on_page: Callable[[int], object] | None = None) -> BackfillReport:
        await self._refuse_direct()
        memory = self.service.memory
        floor = slack_ts(since) if since else "0"
        cursor = await read_cursor(memory, self.conversation, CURSOR, principal=BACKFILL)
        oldest, latest, top, resumed = _position(cursor, floor, f"{time.time():.6f}")
        report = BackfillReport(str(self.conversation), resumed_after=resumed)
        done_through = (cursor or {}).get("done_through") if (cursor or {}).get("floor") == floor else None
        async for page in pages(
            self.slack.client, "conversations.history", channel=self.channel, oldest=oldest, latest=latest, inclusive=True
        ):
            if not page:
                continue
            chats, deleted = await self._read(page, report)
            report.add(await store(memory, self.conversation, chats, BACKFILL))
            report.forgotten += await forget_deleted(memory, self.conversation, deleted, BACKFILL)
            position = {"floor": floor, "top": top, "resume": min((str(m["ts"]) for m in page), key=float)}
            await save_cursor(memory, self.conversation, CURSOR, {**position, "done_through": done_through}, principal=BACKFILL)
            if on_page is not None:
                on_page(len(page))
        await save_cursor(memory, self.conversation, CURSOR, {"floor": floor, "done_through": top}, principal=BACKFILL)
        return report
