"""The chat service: normalised events in, memory commands out, replies back as data.

The seam between platforms and the memory core. A platform connector does two things
with it:

1. For every platform event, ``await service.accept(event)`` (an ``connectors.events``
   value) *before* acknowledging the event to the platform. ``accept`` writes the event
   to the durable inbox (one short transaction) and returns False for a redelivery
   (same conversation and ``event_id``), which changes nothing. If ``accept`` raises,
   do not acknowledge: the platform will deliver again.
2. Implement ``Platform`` (below): ``describe`` fills in an author's display name and
   role, ``deliver`` posts a ``Reply``. The service calls them while processing.

``run()`` processes the inbox until ``stop()``: each conversation's events one at a time
in arrival order by whichever process holds the conversation (a claim in Postgres, so
any number of processes may run), different conversations in parallel. Events left
pending by a crash are processed at the next start, by this or another process. The
service calls only the memory core's public API (``from memory import ...``).

Processing is at-least-once and every command is idempotent (a message id is stored
once, a deletion of a deleted message is a no-op, identical edit text changes nothing),
so an event processed twice changes nothing. The one visible effect of a repeat is an
answer posted twice, if a process dies between posting it and recording it.

The database may go away (a restart, a failover): every round of the worker and of the
reply loop survives it, waits with a growing, jittered delay and resumes where the inbox
says; an event that failed because the database was unreachable is not counted against
its attempts. Nothing acknowledged is lost, nothing stored twice.

This module is the loop and what it does with each event; its parts live beside it: the
intake (connectors/intake.py), the outbox that posts replies apart from processing
(connectors/outbox.py) and the health report (connectors/metrics.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Literal, Protocol

from connectors import admin, metrics
from connectors.events import (
    AdminCommand,
    Author,
    BotPresence,
    ChannelDeleted,
    ChatEvent,
    ChatMessage,
    MemberLeft,
    Mention,
    MessageDeleted,
    MessageEdited,
    MessagePosted,
    MessagesDeleted,
    Reply,
    ThreadDeleted,
    WorkspaceChange,
    core_message,
    decode,
)
from connectors.intake import SERVICE, InboxWriter
from connectors.outbox import Outbox
from connectors.replies import answer_reply
from memory import (
    ConversationRef,
    InboxClaim,
    InboxItem,
    Memory,
    Principal,
    UnknownConversation,
    ValidationError,
    ask,
    database_unreachable,
    drop_conversation,
    edit,
    forget,
    forget_author,
    inbox_claim,
    inbox_conversations,
    inbox_prune,
    ingest,
    set_bot_present,
    stored_messages,
)

log = logging.getLogger(__name__)

EMPTY_QUESTION = "Ask me something after the mention, e.g. “@stashbird when is the offsite?”"
WITHDRAWN = "The answer to this was withdrawn before it could be posted: a message it used was deleted. Ask me again."


class Platform(Protocol):
    """What the service needs from a platform connector: I/O only, no rules."""

    @property
    def name(self) -> str:
        """The ``ConversationRef.platform`` this connector serves (``slack``, ``discord``)."""

    @property
    def connected(self) -> bool:
        """Whether the connector is up (reported by ``/healthz``)."""

    async def describe(self, conversation: ConversationRef, author: Author) -> Author:
        """``author`` with ``name`` and ``role`` filled in (cache lookups: this runs for
        every message). Raise to have the event retried later."""

    async def deliver(self, reply: Reply) -> None:
        """Post ``reply`` on the platform. Raise to have the event retried later."""


@dataclass(frozen=True)
class ServiceConfig:
    admin_ids: frozenset[str] = frozenset()  # always admin, whatever the platform says
    concurrency: int = 4  # conversations processed at once by one process
    poll_seconds: float = 1.0  # how often to look for events other processes stored
    batch: int = 50  # events read per claim round trip
    max_attempts: int = 5  # a failing event is given up on (kept, marked failed) after this
    retry_seconds: float = 2.0  # first retry delay; doubles per attempt
    retention: timedelta = timedelta(days=2)  # finished events kept for the redelivery check
    prune_seconds: float = 3600.0
    # A claim is given back after this long and taken again at once if events are left:
    # it holds a transaction open (memory.store.locks), and while any transaction is open
    # VACUUM cannot remove the rows deleted after it began (deleted messages among them).
    claim_seconds: float = 10.0
    # The database unreachable: wait this long, doubling (with jitter) up to the most.
    outage_seconds: float = 0.5
    outage_max_seconds: float = 10.0
    # Replies (the outbox): taken for a lease while posting; retried after the platform's
    # Retry-After, else after reply_retry_seconds doubling up to reply_retry_max_seconds;
    # given up on (kept as failed, logged, counted) once waiting longer than give-up.
    reply_lease_seconds: float = 60.0
    reply_retry_seconds: float = 1.0
    reply_retry_max_seconds: float = 60.0
    reply_give_up_seconds: float = 6 * 3600.0
    # /healthz: the inbox is stuck when its oldest pending event is older than this.
    stuck_seconds: float = 300.0
    # A member leaving the workspace: keep what they said, or forget it (forget_author).
    on_member_leave: Literal["keep", "forget"] = "keep"
    # The bot removed from a channel or server: stop storing there, or drop its memory too.
    on_bot_removed: Literal["stop", "forget"] = "stop"


class ChatService:
    def __init__(self, memory: Memory, platforms: Iterable[Platform] = (), config: ServiceConfig | None = None) -> None:
        self.memory = memory
        self.platforms = {platform.name: platform for platform in platforms}
        self.config = config or ServiceConfig()
        self.processed = 0
        # Events processed that removed or rewrote stored text (deletions, edits, dropped
        # channels): what the scheduled VACUUM after deletions watches (bot/service.py).
        self.removals = 0
        self._wake = asyncio.Event()
        self._last_prune = 0.0
        self.worker = metrics.WorkerHealth()
        self._stopping = False
        self._tasks: dict[ConversationRef, asyncio.Task[int]] = {}
        self._writer = InboxWriter(memory)
        self.outbox = Outbox(memory, self.platforms)

    def add_platform(self, platform: Platform) -> None:
        """Register a connector (connectors are built with the service they feed)."""
        self.platforms[platform.name] = platform

    # --- taking events ---------------------------------------------------------------

    async def accept(self, event: ChatEvent | WorkspaceChange) -> bool:
        """Store ``event`` durably; acknowledge it to the platform after this returns.
        False when it was a redelivery (nothing to do). A payload the inbox cannot hold
        raises ValidationError (for this event alone). A workspace's change is stored as
        the events of its conversations (``connectors.intake.workspace_events``)."""
        started = time.perf_counter()
        new = await self._writer.put(event)
        platform = event.workspace.platform if isinstance(event, WorkspaceChange) else event.conversation.platform
        metrics.ACK_SECONDS.labels(platform).observe(time.perf_counter() - started)
        if new:
            self.wake()
        return new

    def wake(self) -> None:
        """Look at the inbox now (an event was stored), not at the next poll."""
        self._wake.set()

    # --- processing ------------------------------------------------------------------

    async def run(self) -> None:
        """Process the inbox and post replies until ``stop()``; then let each conversation
        finish the event in hand and leave the rest pending for the next process. Any
        failure of a round (the database gone) is waited out, never the end of it."""
        replies = asyncio.create_task(self._rounds("reply", self._post_round, self.outbox.wake))
        try:
            await self._rounds("inbox", self._inbox_round, self._wake)
        finally:
            self.outbox.wake.set()
            await asyncio.gather(replies, *self._tasks.values(), return_exceptions=True)

    async def _rounds(self, name: str, round_: Callable[[], Awaitable[None]], wake: asyncio.Event) -> None:
        """``round_`` again and again, on a wake-up or every poll; after a failure, again
        after a growing, jittered delay (``ServiceConfig.outage_seconds``)."""
        failures = 0
        while not self._stopping:
            wake.clear()
            try:
                await round_()
            except Exception as error:  # noqa: BLE001 - the worker outlives any failure; /healthz reports it
                failures += 1
                self.worker.failed(name, error)
                delay = min(self.config.outage_max_seconds, self.config.outage_seconds * 2 ** min(failures - 1, 16))
                await self._sleep(wake, delay * random.uniform(0.5, 1.0), ignore_wake=True)
                continue
            if failures:
                log.warning("%s worker resumed after %d failed rounds", name, failures)
                failures = 0
            self.worker.succeeded(name)
            await self._sleep(wake, self.config.poll_seconds)

    async def _sleep(self, wake: asyncio.Event, seconds: float, ignore_wake: bool = False) -> None:
        deadline = time.monotonic() + seconds
        while not self._stopping and (left := deadline - time.monotonic()) > 0:
            try:
                await asyncio.wait_for(wake.wait(), timeout=left)
            except TimeoutError:
                return
            if not ignore_wake:
                return
            wake.clear()

    async def _inbox_round(self) -> None:
        await self._start_ready()
        if time.monotonic() - self._last_prune > self.config.prune_seconds:
            await inbox_prune(self.memory, self.config.retention, principal=SERVICE)
            self._last_prune = time.monotonic()

    async def _post_round(self) -> None:
        while await self.outbox.post_replies(self.config) and not self._stopping:
            pass

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self.outbox.wake.set()

    async def drain(self) -> int:
        """Process until nothing is ready, replies included (tests, imports, benchmarks);
        returns how many events were processed. Conversations another process holds are
        left to it."""
        total = 0
        while True:
            refs = await inbox_conversations(self.memory, principal=SERVICE)
            done = sum(await asyncio.gather(*(self.process_conversation(ref) for ref in refs)))
            total += done
            if not done and not await self.outbox.post_replies(self.config):
                return total

    async def _start_ready(self) -> None:
        for ref in await inbox_conversations(self.memory, principal=SERVICE):
            if ref in self._tasks or len(self._tasks) >= self.config.concurrency:
                continue
            task = asyncio.create_task(self.process_conversation(ref))
            self._tasks[ref] = task
            task.add_done_callback(functools.partial(self._finished, ref))

    def _finished(self, ref: ConversationRef, task: asyncio.Task[int]) -> None:
        self._tasks.pop(ref, None)
        error = None if task.cancelled() else task.exception()
        if error is not None and (database_unreachable(error) or isinstance(error, OSError)):
            self.worker.failed("inbox", error)  # its events stay pending, for the next poll
            return
        if error is not None:
            log.error("processing %s failed", ref, exc_info=error)
        self._wake.set()  # look again: more may have arrived, or a slot is free

    async def process_conversation(self, conversation: ConversationRef) -> int:
        """Process one conversation's ready events in order, if no other process holds
        it; returns how many were processed."""
        done = 0
        until = time.monotonic() + self.config.claim_seconds
        async with inbox_claim(self.memory, conversation, principal=SERVICE) as claim:
            if claim is None:
                return 0
            while not self._stopping:
                items = await claim.next(self.config.batch)
                for run in message_runs(items):
                    if self._stopping:
                        return done
                    if len(run) > 1 and await self._store_run(claim, conversation, run):
                        done += len(run)
                        continue
                    for item in run:
                        if not await self._process(claim, conversation, item):
                            return done
                        done += 1
                if not items or time.monotonic() > until:  # more is claimed again (ServiceConfig)
                    break
        return done

    async def _store_run(self, claim: InboxClaim, conversation: ConversationRef, run: Sequence[InboxItem]) -> bool:
        """Store consecutive new messages with one ingest (one embedding batch, one
        transaction); False, having changed nothing, if any of them needs handling on its
        own (a payload or message refused, a failure): then they go one at a time."""
        try:
            events = [decode(conversation, item.kind, item.payload) for item in run]
            posted = [event for event in events if isinstance(event, MessagePosted)]
            core = [core_message(e.message, await self.describe(conversation, e.message.author)) for e in posted]
            await ingest(self.memory, conversation, core, principal=Principal.event(run[0].event_id))
        except Exception as error:  # noqa: BLE001 - handled one by one, with retries and refusals
            log.info("a run of %d messages in %s goes one by one: %s", len(run), conversation, error)
            return False
        await claim.finish_all(run)
        self.processed += len(run)
        return True

    async def _process(self, claim: InboxClaim, conversation: ConversationRef, item: InboxItem) -> bool:
        """Handle one stored event and record the outcome; False when it failed and will
        be retried (the conversation's later events wait for it). The database being
        unreachable is raised, uncounted: the claim ends and the worker waits it out."""
        platform = conversation.platform
        try:
            event = decode(conversation, item.kind, item.payload)
            if isinstance(event, (Mention, AdminCommand)):
                reply, then = await (self._answer(event) if isinstance(event, Mention) else self._admin(event))
                item = await self.outbox.queue(claim, item, event, reply, then)
                if item.kind == MessagePosted.kind:  # the question, now a plain message
                    event = decode(conversation, item.kind, item.payload)
                else:
                    self._processed(platform, event.kind)
                    return True
            await self.handle(event)
        except ValidationError as error:
            log.warning("event %s (%s) in %s refused: %s", item.event_id, item.kind, conversation, error)
            await claim.finish(item, "rejected", str(error))
            metrics.PROCESSED.labels(platform, item.kind, "rejected").inc()
            return True
        except Exception as error:  # noqa: BLE001 - any failure is retried, then kept for an operator
            if database_unreachable(error):
                raise
            delay = timedelta(seconds=self.config.retry_seconds * 2**item.attempts)
            reason = f"{type(error).__name__}: {error}"[:500]
            log.warning("event %s (%s) in %s failed: %s", item.event_id, item.kind, conversation, reason)
            retried = await claim.retry(item, reason, delay, self.config.max_attempts)
            if not retried:
                metrics.PROCESSED.labels(platform, item.kind, "failed").inc()
            return not retried
        await claim.finish(item)
        for message_id in _deleted_ids(event):
            await claim.erase_message(message_id)
            await claim.withdraw_replies(message_id, WITHDRAWN)
        self._processed(platform, event.kind)
        return True

    def _processed(self, platform: str, kind: str) -> None:
        self.processed += 1
        metrics.PROCESSED.labels(platform, kind, "done").inc()

    @property
    def busy(self) -> bool:
        """Events in hand, or replies this process queued and has not posted or given up
        on yet (tests and benchmarks wait for it to clear)."""
        return bool(self._tasks or self.outbox.pending)

    async def handle(self, event: ChatEvent) -> None:
        """Carry out one event against the memory core (and the platform, for replies)."""
        ref, principal = event.conversation, Principal.event(event.event_id)
        if isinstance(event, MessagePosted):
            await self._store(ref, event.message, principal)
        elif isinstance(event, MessageEdited):
            await self._edit(event, principal)
        elif isinstance(event, (MessageDeleted, MessagesDeleted)):
            for message_id in _deleted_ids(event):
                await self._forget(ref, message_id, principal)
        elif isinstance(event, ThreadDeleted):
            for stored in await stored_messages(self.memory, ref, principal=principal, thread_id=event.thread_id):
                await self._forget(ref, stored.message_id, principal)
        elif isinstance(event, ChannelDeleted):
            self.removals += await drop_conversation(self.memory, ref, principal=principal)
        elif isinstance(event, BotPresence):
            await self._presence(event, principal)
        elif isinstance(event, MemberLeft):
            if self.config.on_member_leave == "forget":
                person = await forget_author(self.memory, event.user_id, workspace=ref.workspace, principal=principal)
                self.removals += person.messages
        else:
            raise ValidationError("kind", f"no handler for {type(event).__name__}")

    async def _presence(self, event: BotPresence, principal: Principal) -> None:
        """The bot removed from the channel: nothing new is stored there (and, with
        ``on_bot_removed`` forget, its memory is dropped first, the mark written after,
        so a late message is not stored either); added back: stored again."""
        if not event.present and self.config.on_bot_removed == "forget":
            self.removals += await drop_conversation(self.memory, event.conversation, principal=principal)
        await set_bot_present(self.memory, event.conversation, event.present, principal=principal)

    async def describe(self, conversation: ConversationRef, author: Author) -> Author:
        """The author with name and role (from the platform when the event lacked them),
        admin when the configured admin ids name them; a bot stays a bot."""
        platform = self.platforms.get(conversation.platform)
        if (author.name is None or author.role is None) and platform is not None:
            author = await platform.describe(conversation, author)
        role = author.role or "user"
        if author.id in self.config.admin_ids and role != "bot":
            role = "admin"
        return replace(author, name=author.name or author.id, role=role)

    async def _forget(self, ref: ConversationRef, message_id: str, principal: Principal) -> None:
        report = await forget(self.memory, ref, message_id, principal=principal)
        self.removals += report.status == "deleted"
        metrics.DELETIONS.labels(ref.platform, report.status).inc()

    async def _store(self, ref: ConversationRef, message: ChatMessage, principal: Principal) -> None:
        author = await self.describe(ref, message.author)
        await ingest(self.memory, ref, [core_message(message, author)], principal=principal)

    async def _edit(self, event: MessageEdited, principal: Principal) -> None:
        message = event.message
        try:
            report = await edit(
                self.memory, event.conversation, message.id, message.text, principal=principal, edited_at=event.edited_at
            )
            status = report.status
            self.removals += status in ("edited", "forgotten")  # forgotten: its author opted out
        except UnknownConversation:
            status = "unknown"
        if status == "unknown":  # its create was lost or is late: store it as it is now
            await self._store(event.conversation, message, principal)

    async def _answer(self, event: Mention) -> tuple[Reply, MessagePosted]:
        """The answer to a mention, and the question to store after it (stored after
        answering, so that the question is never its own evidence)."""
        author = await self.describe(event.conversation, event.message.author)
        if event.question.strip():
            answer = await ask(
                self.memory,
                event.conversation,
                event.question,
                principal=Principal.user(author.id, author.role or "user"),
                date=event.message.time,
                thread=event.message.thread_id,
            )
            reply = answer_reply(event, answer)
        else:
            reply = Reply(event.conversation, event.reply, EMPTY_QUESTION, "answer")
        return reply, MessagePosted(event.conversation, event.event_id, replace(event.message, author=author))

    async def _admin(self, event: AdminCommand) -> tuple[Reply, None]:
        user = await self.describe(event.conversation, event.user)
        principal = Principal.user(user.id, user.role or "user")
        text, refused = await admin.run(self.memory, event.conversation, event.text, principal)
        return Reply(event.conversation, event.reply, text, "refusal" if refused else "audit"), None

    # --- health ----------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        """``metrics.health_report`` of this service's connectors and loops (``ok`` when all
        is well, else ``problems``: ``/healthz`` answers 503 with it), with how many events
        it processed and how many conversations it has in hand."""
        connectors = {name: bool(platform.connected) for name, platform in self.platforms.items()}
        report = await metrics.health_report(self.memory, connectors, self.worker, self.config.stuck_seconds, principal=SERVICE)
        return {**report, "processed": self.processed, "processing": len(self._tasks)}


def message_runs(items: Sequence[InboxItem], limit: int = 64) -> list[list[InboxItem]]:
    """Items in order, consecutive new messages grouped (up to ``limit``), anything else
    alone: a run of creates may be stored together without changing the outcome, since
    nothing in between could edit or delete one of them. Pure."""
    runs: list[list[InboxItem]] = []
    for item in items:
        if item.kind == MessagePosted.kind and runs and runs[-1][-1].kind == MessagePosted.kind and len(runs[-1]) < limit:
            runs[-1].append(item)
        else:
            runs.append([item])
    return runs


def _deleted_ids(event: ChatEvent) -> Sequence[str]:
    if isinstance(event, MessageDeleted):
        return (event.message_id,)
    if isinstance(event, MessagesDeleted):
        return event.message_ids
    return ()
