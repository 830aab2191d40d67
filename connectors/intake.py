"""The intake: a platform event into the durable inbox, before the platform is acknowledged.

Its own module because the acknowledgement path is short and shared: ``ChatService.accept``
(connectors/service.py, on the service's loop) and a ``ThreadIntake`` (on the HTTP thread,
bot/http_server.py) both write through an ``InboxWriter``, and a connector sees either one
as an ``Intake``. Processing what was stored is the service's.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from connectors import metrics
from connectors.events import BotPresence, ChatEvent, MemberLeft, WorkspaceChange, encode, message_of
from memory import InboxEntry, Memory, Principal, conversations, inbox_entry, inbox_put

if TYPE_CHECKING:
    from connectors.service import ChatService

# The principal the chat service acts as: its intake, processing, outbox and health.
SERVICE = Principal.job("chat-service")


async def workspace_events(memory: Memory, change: WorkspaceChange) -> list[ChatEvent]:
    """A workspace's change as events of its conversations in memory: a member's leave
    in the first of them (forgetting them there reaches every conversation of the
    workspace), the bot's removal in each it is in, its return in each it was removed
    from (Discord repeats GUILD_CREATE at every connect: nothing then). None when memory
    holds nothing of the workspace: nothing of it to forget or to stop storing."""
    workspace, present = change.workspace, change.change == "bot_added"
    removed = None if change.change == "member_left" else present  # bot_added: the marked; bot_removed: the others
    refs = await conversations(memory, principal=SERVICE, workspace=workspace, bot_removed=removed)
    if change.change == "member_left":
        return [MemberLeft(refs[0], change.event_id, change.user_id)] if refs else []
    return [BotPresence(ref, change.event_id, present) for ref in refs]


def entry_of(event: ChatEvent) -> InboxEntry:
    """The inbox row of an event (ValidationError when the inbox cannot hold it)."""
    kind, payload = encode(event)
    return inbox_entry(event.conversation, event.event_id, kind, payload, message_of(event))


class Intake(Protocol):
    """Where a connector hands events before acknowledging them (``ChatService`` itself,
    or a ``ThreadIntake`` on the thread that answers the platform's HTTP requests)."""

    memory: Memory  # whose connections the intake writes with (usable on its loop)

    async def accept(self, event: ChatEvent | WorkspaceChange) -> bool:
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

    async def accept(self, event: ChatEvent | WorkspaceChange) -> bool:
        new = await self._writer.put(event)  # timed by the HTTP edge (bot/http_server.py)
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

    async def put(self, event: ChatEvent | WorkspaceChange) -> bool:
        """Store ``event`` with whatever else is waiting; False for a redelivery. Raises
        what the write raised (nothing of that write was stored); counted either way."""
        if isinstance(event, WorkspaceChange):
            return any([await self.put(each) for each in await workspace_events(self.memory, event)])
        entry = entry_of(event)  # refused (ValidationError): the connector counts it, knowing the raw type
        stored: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((entry, stored))
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._write_waiting())
        try:
            new = await stored
        except Exception:
            metrics.EVENTS.labels(event.conversation.platform, event.kind, "failed").inc()
            raise
        metrics.EVENTS.labels(event.conversation.platform, event.kind, "accepted" if new else "duplicate").inc()
        return new

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
