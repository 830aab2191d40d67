"""Conversation locks: the one place that takes them.

Work is coordinated through the database, never in-process state, so that any number of
bot and worker processes can run at once. Per conversation, a lock is named by its
purpose; a command that needs several takes them in one statement, always in
``LockPurpose`` order (CHAIN before GRAPH), so that no two commands wait on each other in
a circle.

A lock is a row lock (``SELECT ... FOR UPDATE``) on the conversation's row of that
purpose in ``conversation_locks`` (migration 0011), not an advisory lock: advisory locks
live in one server's memory, so under Citus a lock taken through one node would not be
seen through another, while a row lock is taken on the shard that holds the
conversation's rows, whichever node the statement came through (the statement names the
conversation, so it is routed there). The rows are made the first time a conversation
is locked (and by the migration for existing conversations), so a conversation created
by an older process still locks.

Taking a CHAIN or GRAPH lock marks the conversation due for the scheduler in the
statement that takes it, on the lock rows taken (their ``due_at``, migration 0016; read and
cleared by memory.store.backlog): every writer of a conversation takes one of them, so no
write is missed by a discovery that reads only what is due, and marking waits on no one.

The migration lock stays advisory: migrations run their DDL through the coordinator
only, one process at a time, before any conversation is touched.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime

from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

# The migration lock's single bigint key (kept as it was, so that processes of
# different versions still exclude each other).
_MIGRATION_KEY = 727274


class LockPurpose(enum.IntEnum):
    CHAIN = 1  # the episode chain of a conversation (append, delete, edit)
    GRAPH = 2  # the entity/relation graph of a conversation (consolidate, delete)
    INBOX = 4  # processing a conversation's inbox (held across transactions: one worker at a time, in arrival order)


# The purposes every writer of a conversation takes one of (INBOX only orders processing).
WRITERS = (LockPurpose.CHAIN, LockPurpose.GRAPH)

_LOCK = text(
    "SELECT purpose FROM conversation_locks WHERE conversation_id = :conversation AND purpose = ANY(:purposes) "
    "ORDER BY purpose FOR UPDATE"
)
# A writer's lock: the rows locked in purpose order (the subquery's ORDER BY ... FOR
# UPDATE) and marked due in the same statement. memory.store.backlog reads and clears
# the marks. now(), not clock_timestamp(): Citus refuses volatile functions in an UPDATE
# of a distributed table (and stable ones in a CASE). Discovery compares each row's mark
# as it read it, not times.
_LOCK_AND_MARK = text(
    "UPDATE conversation_locks SET due_at = now() WHERE conversation_id = :conversation AND purpose IN ("
    "SELECT purpose FROM conversation_locks WHERE conversation_id = :conversation AND purpose = ANY(:purposes) "
    "ORDER BY purpose FOR UPDATE) RETURNING purpose"
)
_TRY_LOCK = text(
    "SELECT purpose FROM conversation_locks WHERE conversation_id = :conversation AND purpose = ANY(:purposes) "
    "FOR UPDATE SKIP LOCKED"
)
# Marks rows due by purpose: mark_due, and a lock that takes INBOX as well.
_MARK_DUE = text(
    "UPDATE conversation_locks SET due_at = now() WHERE conversation_id = :conversation AND purpose = ANY(:purposes)"
)
# Each row only if no writer marked it since it was read (its mark would differ), and none
# a writer holds now (it marks the row itself, and the tick does not wait for it).
_DEFER = text("""
UPDATE conversation_locks l SET due_at = :next
FROM unnest(CAST(:purposes AS smallint[]), CAST(:seen AS timestamptz[])) AS s(purpose, due_at)
WHERE l.conversation_id = :conversation AND l.purpose = s.purpose AND l.due_at IS NOT DISTINCT FROM s.due_at
  AND l.purpose IN (
    SELECT purpose FROM conversation_locks
    WHERE conversation_id = :conversation AND purpose = ANY(:writers) FOR UPDATE SKIP LOCKED
)
""")

_MAKE = text(
    "INSERT INTO conversation_locks (conversation_id, purpose) "
    "SELECT :conversation, p FROM unnest(CAST(:purposes AS smallint[])) AS p ON CONFLICT DO NOTHING"
)


async def lock_conversation(session: AsyncSession, conversation_id: int, *purposes: LockPurpose) -> None:
    """Transaction-level locks of the conversation for ``purposes``, taken in purpose
    order and held to the end of the current transaction; a CHAIN or GRAPH lock also
    marks the conversation due (see the module doc). A writer's locks take one
    statement, but for a conversation's first lock of a purpose."""
    wanted = sorted({int(p) for p in purposes})
    key = {"conversation": int(conversation_id), "purposes": wanted}
    written = [p for p in wanted if p in WRITERS]
    statement = _LOCK_AND_MARK if written == wanted else _LOCK
    if len((await session.execute(statement, key)).all()) < len(wanted):
        await session.execute(_MAKE, key)  # the conversation's first lock for a purpose
        await session.execute(statement, key)
    if written and statement is _LOCK:
        await session.execute(_MARK_DUE, {"conversation": int(conversation_id), "purposes": written})


@asynccontextmanager
async def try_hold(engine: AsyncEngine, conversation_id: int, purpose: LockPurpose) -> AsyncIterator[bool]:
    """Hold the conversation's ``purpose`` lock for the block if no one else holds it
    (whether it was taken). It is held by a transaction left open on a connection of its
    own, so that work done meanwhile may commit as it goes; the lock goes when the block
    ends or, if this process dies, when its connection does."""
    async with try_hold_connection(engine, conversation_id, purpose) as connection:
        yield connection is not None


@asynccontextmanager
async def try_hold_connection(
    engine: AsyncEngine, conversation_id: int, purpose: LockPurpose
) -> AsyncIterator[AsyncConnection | None]:
    """``try_hold``, yielding the connection whose transaction holds the lock (None: not
    taken). Reading through it proves the lock is still held: if the server restarted,
    the connection is gone and so is the lock (another process may have taken it)."""
    key = {"conversation": int(conversation_id), "purposes": [int(purpose)]}
    async with engine.connect() as connection:
        await connection.execute(_MAKE, key)
        await connection.commit()
        held = bool((await connection.execute(_TRY_LOCK, key)).all())
        try:
            yield connection if held else None
        finally:
            if not connection.closed and connection.in_transaction():
                await connection.rollback()


async def mark_due(session: AsyncSession, conversation_id: int) -> None:
    """Mark the conversation due for the scheduler without taking a lock: for a change
    that is not a write of its memory but changes what is due (a new retention window)."""
    await session.execute(_MARK_DUE, {"conversation": int(conversation_id), "purposes": [int(p) for p in WRITERS]})


async def mark_all_due(session: AsyncSession) -> int:
    """Mark every conversation due now (those already due stay as they are): once, when
    the store's default retention window changed, since discovery may have deferred
    conversations past the moment a new window makes their messages due. How many rows."""
    statement = text(
        "/* multi-shard: retention-default */ UPDATE conversation_locks SET due_at = now() "
        "WHERE purpose = ANY(:writers) AND (due_at IS NULL OR due_at > now())"
    )
    return int((await session.execute(statement, {"writers": [int(p) for p in WRITERS]})).rowcount)  # type: ignore[attr-defined]


def lock_migrations(connection: Connection) -> None:
    """Keep two processes from migrating at once (to the end of the transaction)."""
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_KEY})


async def defer_marks(
    session: AsyncSession, conversation_id: int, marks: list[tuple[int, datetime | None]], next_at: datetime | None
) -> bool:
    """Set the writer lock rows' due marks to ``next_at`` (memory.store.backlog), each
    only if it is still the mark read in ``marks`` ((purpose, due_at) pairs); whether any
    row was moved."""
    values = {
        "conversation": int(conversation_id),
        "purposes": [purpose for purpose, _ in marks],
        "seen": [mark for _, mark in marks],
        "next": next_at,
        "writers": [int(p) for p in WRITERS],
    }
    return bool((await session.execute(_DEFER, values)).rowcount)  # type: ignore[attr-defined]
