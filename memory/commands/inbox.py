"""The chat service's durable inbox (platform events stored before they are
acknowledged) and the resumable jobs' cursors: queues and positions, not memory, so
jobs may use them and none is audited (memory/access.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from memory.door import door
from memory.principal import Principal
from memory.validation import check_json, normalize_id

if TYPE_CHECKING:
    from memory.core import Memory
    from memory.store.conversations import ConversationRef
    from memory.store.inbox import InboxBacklog, InboxClaim, InboxEntry, OutboxItem


def inbox_entry(
    conversation: ConversationRef, event_id: str, kind: str, payload: dict[str, Any], message_id: str | None = None
) -> InboxEntry:
    """A platform event ready for ``inbox_put`` (``message_id``: the message it is about).
    Ids are normalised as everywhere (so the delete of a message finds the events about
    it), and a payload the database cannot hold is refused (ValidationError): checked
    here, per event, so that one bad event never fails the others stored with it. Pure."""
    from memory.store.inbox import InboxEntry

    event_id = normalize_id(event_id, "event_id")
    message_id = None if message_id is None else normalize_id(message_id, "message")
    check_json(payload, "payload")
    return InboxEntry(conversation, event_id, kind, payload, message_id)


async def inbox_put(memory: Memory, entries: Sequence[InboxEntry], *, principal: Principal) -> list[bool]:
    """Store platform events durably before they are acknowledged, in one transaction
    (one commit: events that arrive together share a disk flush). Per entry, False when
    its conversation's inbox already holds its event id: a redelivery, which changes
    nothing."""
    from memory.store import inbox as _inbox

    async with door(memory, "inbox_put", principal) as call:
        async with memory._sessions.begin() as session:
            new = await _inbox.put(session, entries)
        call.note(events=len(entries), new=sum(new))
    return new


async def inbox_conversations(memory: Memory, *, principal: Principal) -> list[ConversationRef]:
    """Conversations whose inbox has events ready to process."""
    from memory.store import inbox as _inbox

    async with door(memory, "inbox_conversations", principal) as call:
        async with memory._sessions() as session:
            found = await _inbox.pending_conversations(session)
        call.note(found=len(found))
    return found


@asynccontextmanager
async def inbox_claim(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> AsyncIterator[InboxClaim | None]:
    """Hold a conversation's inbox for processing, or None when another process holds
    it. Held until the block ends or this process dies (the lock goes with its
    connection), so events are processed once at a time, in order, by one process."""
    from memory.store import inbox as _inbox

    async with door(memory, "inbox_claim", principal, conversation) as call:
        assert call.conversation_id is not None
        async with _inbox.claim(memory._engine, call.conversation_id) as claim:
            call.note(claimed=claim is not None)
            yield claim


async def inbox_backlog(memory: Memory, *, principal: Principal) -> InboxBacklog:
    """Events waiting across all conversations, events given up on, age of the oldest."""
    from memory.store import inbox as _inbox

    async with door(memory, "inbox_backlog", principal):
        async with memory._sessions() as session:
            return await _inbox.backlog(session)


async def inbox_prune(memory: Memory, older_than: timedelta, *, principal: Principal) -> int:
    """Drop inbox rows finished more than ``older_than`` ago; returns how many."""
    from memory.store import inbox as _inbox

    async with door(memory, "inbox_prune", principal) as call:
        async with memory._sessions.begin() as session:
            pruned = await _inbox.prune(session, older_than)
        call.note(pruned=pruned)
    return pruned


async def read_cursor(memory: Memory, conversation: ConversationRef, name: str, *, principal: Principal) -> dict[str, Any] | None:
    """A resumable job's saved position in this conversation (None: start afresh)."""
    from memory.store import inbox as _inbox

    async with door(memory, "read_cursor", principal, conversation, must_exist=False) as call:
        if call.conversation_id is None:
            return None
        async with memory._sessions() as session:
            return await _inbox.read_cursor(session, call.conversation_id, name)


async def save_cursor(
    memory: Memory, conversation: ConversationRef, name: str, value: dict[str, Any] | None, *, principal: Principal
) -> None:
    """Save a resumable job's position (None: the job finished; forget it)."""
    from memory.store import inbox as _inbox

    async with door(memory, "save_cursor", principal, conversation, create=True) as call:
        assert call.conversation_id is not None
        async with memory._sessions.begin() as session:
            await _inbox.write_cursor(session, call.conversation_id, name, value)


async def outbox_take(
    memory: Memory,
    platforms: Sequence[str],
    *,
    principal: Principal,
    limit: int = 20,
    lease: timedelta = timedelta(seconds=60),
) -> list[OutboxItem]:
    """Replies ready to post on ``platforms``, each taken for ``lease`` (memory.store.inbox:
    the outbox): posted and settled within it, or taken again after it by this or another
    process."""
    from memory.store import inbox as _inbox

    if not platforms:
        return []
    async with door(memory, "outbox_take", principal) as call:
        async with memory._sessions() as session:
            ready = await _inbox.ready_replies(session, platforms, limit)
        taken: list[OutboxItem] = []
        for ref, conversation_id, row_id in ready:
            async with memory._sessions.begin() as session:
                item = await _inbox.take_reply(session, ref, conversation_id, row_id, lease)
            if item is not None:
                taken.append(item)
        call.note(ready=len(ready), taken=len(taken))
    return taken


async def outbox_settle(
    memory: Memory, taken: OutboxItem, *, principal: Principal, error: str | None = None, retry_in: timedelta | None = None
) -> None:
    """Record a taken reply's fate: posted (no ``error``), to retry after ``retry_in``, or
    given up (an ``error`` and no ``retry_in``: kept, with its payload, for an operator)."""
    from memory.store import inbox as _inbox

    async with door(memory, "outbox_settle", principal) as call:
        async with memory._sessions.begin() as session:
            await _inbox.settle_reply(session, taken, error, retry_in)
        call.note(posted=error is None, retry=retry_in is not None)


def database_unreachable(error: BaseException) -> bool:
    """Whether ``error`` says the database could not be reached or went away (refused,
    restarting, shutting down, a dropped connection), rather than refusing the work: the
    caller waits and tries again without counting it against the work. A bare OSError
    (a refused connect, before the driver wraps anything) is not claimed: it may as well
    be a platform's; the caller's next database write tells. Pure."""
    import sqlalchemy.exc

    if isinstance(error, sqlalchemy.exc.DBAPIError):
        if error.connection_invalidated or isinstance(error, (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)):
            return True
        if isinstance(error.orig, OSError):
            return True
        sqlstate = getattr(error.orig, "sqlstate", None) or getattr(getattr(error.orig, "__cause__", None), "sqlstate", None)
        return isinstance(sqlstate, str) and sqlstate[:2] in _UNREACHABLE_CLASSES
    return isinstance(error, sqlalchemy.exc.DisconnectionError | sqlalchemy.exc.TimeoutError)


# SQLSTATE classes of an unreachable server: 08 connection exception, 57 operator
# intervention (admin shutdown, crash shutdown, cannot connect now), 53 insufficient resources
_UNREACHABLE_CLASSES = ("08", "57", "53")
