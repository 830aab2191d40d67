"""Reading a channel's history through the Web API (``conversations.history`` and
``conversations.replies``, cursor-paginated), for the sweep and backfill."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from memory import ConversationRef, StoredMessage

PAGE = 200
TOMBSTONE = "tombstone"


def slack_ts(moment: datetime) -> str:
    return f"{moment.timestamp():.6f}"


async def pages(client: AsyncWebClient, method: str, **params: Any) -> AsyncIterator[list[dict[str, Any]]]:
    """Every page of a cursor-paginated Web API listing (its ``messages``)."""
    cursor: str | None = None
    while True:
        response = await client.api_call(method, http_verb="GET", params={**params, "limit": PAGE, "cursor": cursor or None})
        yield list(response.get("messages") or [])
        cursor = (response.get("response_metadata") or {}).get("next_cursor")
        if not response.get("has_more") or not cursor:
            return


async def thread_replies(client: AsyncWebClient, channel: str, thread_ts: str) -> list[dict[str, Any]]:
    """A thread's messages (the parent first) as ``conversations.replies`` lists them."""
    found: list[dict[str, Any]] = []
    async for page in pages(client, "conversations.replies", channel=channel, ts=thread_ts):
        found.extend(page)
    return found


def is_thread_parent(message: dict[str, Any]) -> bool:
    return bool(message.get("reply_count")) or (message.get("thread_ts") == message.get("ts") and "reply_count" in message)


async def present_ids(
    client: AsyncWebClient, conversation: ConversationRef, stored: Sequence[StoredMessage], since: datetime
) -> set[str]:
    """The ids of ``stored`` messages Slack still lists: the channel's history since
    ``since`` and the replies of every thread a stored message or a listed parent is in.
    A deleted thread parent that kept its replies is listed as a tombstone: not present."""
    channel = conversation.channel_id
    present: set[str] = set()
    threads = {m.thread_id for m in stored if m.thread_id}
    async for page in pages(client, "conversations.history", channel=channel, oldest=slack_ts(since), inclusive=True):
        for message in page:
            if message.get("subtype") != TOMBSTONE:
                present.add(str(message["ts"]))
            if is_thread_parent(message):
                threads.add(str(message["ts"]))
    for thread in sorted(threads):
        try:
            replies = await thread_replies(client, channel, thread)
        except Exception as error:  # noqa: BLE001 - only a thread that no longer exists means "gone"
            if "thread_not_found" in str(error):
                continue
            raise
        present.update(str(m["ts"]) for m in replies if m.get("subtype") != TOMBSTONE)
    return present
