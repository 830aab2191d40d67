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
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Protocol

from connectors import admin
from connectors.events import (
    AdminCommand,
    Author,
    ChannelDeleted,
    ChatEvent,
    ChatMessage,
    CitedMessage,
    Mention,
    MessageDeleted,
    MessageEdited,
    MessagePosted,
    MessagesDeleted,
    Reply,
    ThreadDeleted,
    decode,
    encode,
    message_of,
)
from memory import (
    Answer,
    ConversationRef,
    InboxClaim,
    InboxEntry,
    InboxItem,
    Memory,
    Message,
    Principal,
    QuotedMessage,
    UnknownConversation,
    ValidationError,
    ask,
    drop_conversation,
    edit,
    forget,
    inbox_backlog,
    inbox_claim,
    inbox_conversations,
    inbox_entry,
    inbox_prune,
    inbox_put,
    ingest,
    stored_messages,
    validate_message,
)

log = logging.getLogger(__name__)

EMPTY_QUESTION = "Ask me something after the mention, e.g. “@stashbird when is the offsite?”"
SERVICE = Principal.job("chat-service")


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


def core_message(message: ChatMessage, author: Author) -> Message:
    """The memory core's Message for a chat message by a described author (ValidationError
    names what is wrong: an empty text, a missing name)."""
    return validate_message(
        {
            "id": message.id,
            "author_id": author.id,
            "author_name": author.name or author.id,
            "role": author.role or "user",
            "text": message.text,
            "ts": message.time,
            "reply_to": message.reply_to,
            "thread_id": message.thread_id,
            "edited_at": message.edited_at,
        }
    )


def cited_message(quoted: QuotedMessage, labels: Mapping[str, str]) -> CitedMessage:
    """One message of the core's reply as the platform links it (its correction too). Pure."""
    correction = cited_message(quoted.correction, labels) if quoted.correction is not None else None
    return CitedMessage(
        quoted.platform_message_id,
        quoted.speaker,
        quoted.message_time,
        labels.get(quoted.platform_message_id, ""),
        quoted.outdated,
        correction,
    )


def answer_reply(event: Mention, answer: Answer) -> Reply:
    """The reply to a mention: the core's structured reply (the answer line, the cited
    messages with who said them and when, an outdated one with its correction, notes),
    with the evidence labels the line may use. Pure."""
    labels = {c.platform_message_id: c.label for c in answer.citations}
    citations = tuple(cited_message(quoted, labels) for quoted in answer.reply.messages)
    return Reply(event.conversation, event.reply, answer.reply.line, "answer", citations, answer.trace_id, answer.reply.notes)


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
        self._stopping = False
        self._tasks: dict[ConversationRef, asyncio.Task[int]] = {}
        self._writer = InboxWriter(memory)

    def add_platform(self, platform: Platform) -> None:
        """Register a connector (connectors are built with the service they feed)."""
        self.platforms[platform.name] = platform

    # --- taking events ---------------------------------------------------------------

    async def accept(self, event: ChatEvent) -> bool:
        """Store ``event`` durably; acknowledge it to the platform after this returns.
        False when it was a redelivery (nothing to do). A payload the inbox cannot hold
        raises ValidationError (for this event alone)."""
        new = await self._writer.put(entry_of(event))
        if new:
            self.wake()
        return new

    def wake(self) -> None:
        """Look at the inbox now (an event was stored), not at the next poll."""
        self._wake.set()

    # --- processing ------------------------------------------------------------------

    async def run(self) -> None:
        """Process the inbox until ``stop()``; then let each conversation finish the event
        in hand and leave the rest pending for the next process."""
        last_prune = 0.0
        while not self._stopping:
            self._wake.clear()
            await self._start_ready()
            if time.monotonic() - last_prune > self.config.prune_seconds:
                last_prune = time.monotonic()
                await inbox_prune(self.memory, self.config.retention, principal=SERVICE)
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=self.config.poll_seconds)
            except TimeoutError:
                pass
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    async def drain(self) -> int:
        """Process until nothing is ready (tests, imports, benchmarks); returns how many
        events were processed. Conversations another process holds are left to it."""
        total = 0
        while True:
            refs = await inbox_conversations(self.memory, principal=SERVICE)
            done = sum(await asyncio.gather(*(self.process_conversation(ref) for ref in refs)))
            total += done
            if not done:
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
        if not task.cancelled() and task.exception() is not None:
            log.error("processing %s failed", ref, exc_info=task.exception())
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
        be retried (the conversation's later events wait for it)."""
        try:
            event = decode(conversation, item.kind, item.payload)
            await self.handle(event)
        except ValidationError as error:
            log.warning("event %s (%s) in %s refused: %s", item.event_id, item.kind, conversation, error)
            await claim.finish(item, "rejected", str(error))
            return True
        except Exception as error:  # noqa: BLE001 - any failure is retried, then kept for an operator
            delay = timedelta(seconds=self.config.retry_seconds * 2**item.attempts)
            reason = f"{type(error).__name__}: {error}"[:500]
            log.warning("event %s (%s) in %s failed: %s", item.event_id, item.kind, conversation, reason)
            return not await claim.retry(item, reason, delay, self.config.max_attempts)
        await claim.finish(item)
        for message_id in _deleted_ids(event):
            await claim.erase_message(message_id)
        self.processed += 1
        return True

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
        elif isinstance(event, Mention):
            await self._answer(event, principal)
        elif isinstance(event, AdminCommand):
            await self._admin(event)
        else:
            raise ValidationError("kind", f"no handler for {type(event).__name__}")

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
            self.removals += status == "edited"
        except UnknownConversation:
            status = "unknown"
        if status == "unknown":  # its create was lost or is late: store it as it is now
            await self._store(event.conversation, message, principal)

    async def _answer(self, event: Mention, principal: Principal) -> None:
        author = await self.describe(event.conversation, event.message.author)
        if event.question.strip():
            answer = await ask(
                self.memory,
                event.conversation,
                event.question,
                principal=Principal.user(author.id, author.role or "user"),
                date=event.message.time,
            )
            reply = answer_reply(event, answer)
        else:
            reply = Reply(event.conversation, event.reply, EMPTY_QUESTION, "answer")
        await self._deliver(reply)
        # Stored after answering, so that the question is never its own evidence.
        await ingest(self.memory, event.conversation, [core_message(event.message, author)], principal=principal)

    async def _admin(self, event: AdminCommand) -> None:
        user = await self.describe(event.conversation, event.user)
        text = await admin.run(self.memory, event.conversation, event.text, Principal.user(user.id, user.role or "user"))
        await self._deliver(Reply(event.conversation, event.reply, text, "refusal" if text == admin.REFUSAL else "audit"))

    async def _deliver(self, reply: Reply) -> None:
        platform = self.platforms.get(reply.conversation.platform)
        if platform is None:
            raise LookupError(f"no connector for platform {reply.conversation.platform!r} to deliver a reply")
        await platform.deliver(reply)

    # --- health ----------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        """Database reachable, connectors connected, inbox backlog; ``ok`` when all is well."""
        try:
            backlog: dict[str, Any] | None = (await inbox_backlog(self.memory, principal=SERVICE)).as_dict()
        except Exception as error:  # noqa: BLE001 - health reports any database failure
            log.warning("health: database unreachable: %s", error)
            backlog = None
        connectors = {name: platform.connected for name, platform in self.platforms.items()}
        return {
            "ok": backlog is not None and all(connectors.values()),
            "database": backlog is not None,
            "connectors": connectors,
            "backlog": backlog,
            "processed": self.processed,
            "processing": len(self._tasks),
        }


def entry_of(event: ChatEvent) -> InboxEntry:
    """The inbox row of an event (ValidationError when the inbox cannot hold it)."""
    kind, payload = encode(event)
    return inbox_entry(event.conversation, event.event_id, kind, payload, message_of(event))


class Intake(Protocol):
    """Where a connector hands events before acknowledging them (``ChatService`` itself,
    or a ``ThreadIntake`` on the thread that answers the platform's HTTP requests)."""

    memory: Memory  # whose connections the intake writes with (usable on its loop)

    async def accept(self, event: ChatEvent) -> bool:
        """Store the event durably; False for a redelivery."""


class ThreadIntake:
    """Accepts events for a service that runs on another thread's event loop: with its
    own database connections (asyncpg's are tied to the loop that opened them) and its
    own writer, then wakes the service on its loop. Built on the thread that uses it.

    Why a thread: processing (storing, embedding, forgetting, answering) runs in long
    steps on the service's loop; an acknowledgement waiting behind them would wait for
    all of them. On its own thread it waits for its share of the interpreter only."""

    def __init__(self, memory: Memory, service: ChatService, service_loop: asyncio.AbstractEventLoop) -> None:
        self.memory = memory  # this thread's connections (a connector may read through them)
        self._writer = InboxWriter(memory)
        self.service = service
        self.service_loop = service_loop

    async def accept(self, event: ChatEvent) -> bool:
        new = await self._writer.put(entry_of(event))
        if new:
            self.service_loop.call_soon_threadsafe(self.service.wake)
        return new


class InboxWriter:
    """The acknowledgement path's one database write, shared: the events accepted while a
    write is on its way are stored together by the next one (one transaction, one
    commit, so one disk flush for the lot, where one each would queue at the disk under
    a burst). An event arriving when nothing is being written is written at once, alone.
    Writes follow one another, so events are stored in the order they were accepted."""

    def __init__(self, memory: Memory, limit: int = 256) -> None:
        self.memory = memory
        self.limit = limit  # events in one write
        self._waiting: list[tuple[InboxEntry, asyncio.Future[bool]]] = []
        self._writing: asyncio.Task[None] | None = None

    async def put(self, entry: InboxEntry) -> bool:
        """Store ``entry`` with whatever else is waiting; False for a redelivery. Raises
        what the write raised (nothing of that write was stored)."""
        stored: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((entry, stored))
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._write_waiting())
        return await stored

    async def _write_waiting(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting[: self.limit], self._waiting[self.limit :]
            try:
                new = await inbox_put(self.memory, [entry for entry, _ in batch], principal=SERVICE)
            except Exception as error:  # noqa: BLE001 - each waiting acknowledgement fails with it
                for _, stored in batch:
                    if not stored.done():
                        stored.set_exception(error)
                continue
            for (_, stored), is_new in zip(batch, new, strict=True):
                if not stored.done():
                    stored.set_result(is_new)


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
