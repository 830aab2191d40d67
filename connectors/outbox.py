"""The outbox: the replies the service owes the platforms, posted apart from processing.

A mention is answered, then in one transaction its reply is queued (an inbox row of kind
``reply``, memory's outbox) and the question becomes the plain message it is, so that
neither the question nor the conversation's later events wait for the platform. The
service's reply loop (``ChatService.run``) posts what is ready, retried as the platform
asks (``Retry-After``) or with a growing delay, and after ``reply_give_up_seconds`` kept as
failed, logged and counted (``/healthz`` shows them), never dropped unseen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

from connectors import metrics
from connectors.events import AdminCommand, Mention, MessagePosted, Reply, ReplyDue, decode, encode, message_of
from connectors.intake import SERVICE
from memory import (
    ConversationRef,
    InboxClaim,
    InboxItem,
    Memory,
    OutboxItem,
    ValidationError,
    inbox_entry,
    outbox_settle,
    outbox_take,
)

if TYPE_CHECKING:
    from connectors.service import Platform, ServiceConfig

log = logging.getLogger(__name__)


def retry_after(error: BaseException) -> float | None:
    """The seconds a platform asked us to wait before trying again, if it said: a
    ``retry_after`` attribute (discord.py's rate limits) or a ``Retry-After`` header on
    the error's response (slack_sdk's ``SlackApiError`` for a 429 or 503). Pure."""
    seconds = getattr(error, "retry_after", None)
    if isinstance(seconds, int | float) and not isinstance(seconds, bool):
        return max(0.0, float(seconds))
    headers = getattr(getattr(error, "response", None), "headers", None)
    if not isinstance(headers, Mapping):
        return None
    for name, value in headers.items():
        if str(name).lower() == "retry-after":
            try:
                return max(0.0, float(value[0] if isinstance(value, list) else value))
            except (TypeError, ValueError):
                return None
    return None


def reply_delay(error: BaseException, attempts: int, config: ServiceConfig) -> float:
    """How long to wait before posting a reply again: what the platform asked for, else
    ``reply_retry_seconds`` doubling per attempt up to ``reply_retry_max_seconds``. Pure."""
    asked = retry_after(error)
    if asked is not None:
        return asked
    return min(config.reply_retry_max_seconds, config.reply_retry_seconds * 2.0 ** min(attempts, 30))


class Outbox:
    """One service's replies: queued while it processes its inbox, posted by its reply
    loop and settled (posted, retried later, or given up)."""

    def __init__(self, memory: Memory, platforms: Mapping[str, Platform]) -> None:
        self.memory = memory
        self.platforms = platforms  # the service's own: a connector added to it later is posted to
        self.wake = asyncio.Event()  # a reply was queued: post now, not at the next poll
        self._due: set[tuple[ConversationRef, str]] = set()

    @property
    def pending(self) -> bool:
        """Replies this process queued and has not posted or given up on yet."""
        return bool(self._due)

    async def queue(
        self, claim: InboxClaim, item: InboxItem, event: Mention | AdminCommand, reply: Reply, then: MessagePosted | None
    ) -> InboxItem:
        """Hand ``event``'s reply to the outbox; what is left of ``item`` (for a mention,
        ``then``: its message to store, in the conversation's order), or ``item`` done."""
        kind, payload = encode(ReplyDue.of(f"{event.event_id}:reply", reply))
        entry = inbox_entry(event.conversation, f"{event.event_id}:reply", kind, payload, message_of(event))
        rest = encode(then) if then is not None else None
        await claim.hand_over(item, entry, rest)
        self._due.add((event.conversation, entry.event_id))
        self.wake.set()
        return item if rest is None else replace(item, kind=rest[0], payload=rest[1], attempts=0)

    async def post_replies(self, config: ServiceConfig) -> int:
        """Post the replies that are ready (each taken for a lease, so that one is posted
        by one process) by ``config``, the service's as it is now (it may be replaced);
        returns how many were tried."""
        lease = timedelta(seconds=config.reply_lease_seconds)
        taken = await outbox_take(self.memory, list(self.platforms), principal=SERVICE, lease=lease)
        await asyncio.gather(*(self._post(item, config) for item in taken))
        return len(taken)

    async def _post(self, taken: OutboxItem, config: ServiceConfig) -> None:
        """Post one taken reply and settle it: posted, retried later, or given up."""
        platform = taken.conversation.platform
        try:
            due = decode(taken.conversation, taken.item.kind, taken.item.payload)
            assert isinstance(due, ReplyDue)
            await self._deliver(due.reply())
        except Exception as error:  # noqa: BLE001 - retried, or kept as failed and reported
            reason = f"{type(error).__name__}: {error}"[:500]
            delay = reply_delay(error, taken.item.attempts, config)
            if taken.age_seconds + delay > config.reply_give_up_seconds or isinstance(error, ValidationError):
                log.error("reply %s in %s given up: %s", taken.item.event_id, taken.conversation, reason)
                metrics.REPLIES.labels(platform, "given_up").inc()
                await outbox_settle(self.memory, taken, principal=SERVICE, error=reason)
                self._due.discard((taken.conversation, taken.item.event_id))
                return
            log.warning("reply %s in %s not posted, again in %.1f s: %s", taken.item.event_id, taken.conversation, delay, reason)
            metrics.REPLIES.labels(platform, "retried").inc()
            await outbox_settle(self.memory, taken, principal=SERVICE, error=reason, retry_in=timedelta(seconds=delay))
            return
        metrics.REPLIES.labels(platform, "posted").inc()
        await outbox_settle(self.memory, taken, principal=SERVICE)
        self._due.discard((taken.conversation, taken.item.event_id))

    async def _deliver(self, reply: Reply) -> None:
        platform = self.platforms.get(reply.conversation.platform)
        if platform is None:
            raise LookupError(f"no connector for platform {reply.conversation.platform!r} to deliver a reply")
        await platform.deliver(reply)
