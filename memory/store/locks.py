"""Advisory locks: the one place that takes them.

Work is coordinated through the database, never in-process state, so that any number of
bot and worker processes can run at once. Per conversation, a lock is named by its
purpose and the conversation id; a command that needs several takes them in one round
trip, always in ``LockPurpose`` order (CHAIN before GRAPH), so that no two commands wait
on each other in a circle.
"""

from __future__ import annotations

import enum

from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

# The migration lock's single bigint key (kept as it was, so that processes of
# different versions still exclude each other).
_MIGRATION_KEY = 727274


class LockPurpose(enum.IntEnum):
    CHAIN = 1  # the episode chain of a conversation (append, delete, edit)
    GRAPH = 2  # the entity/relation graph of a conversation (consolidate, delete)
    INBOX = 4  # processing a conversation's inbox (session-level: one worker at a time, in arrival order)


async def lock_conversation(session: AsyncSession, conversation_id: int, *purposes: LockPurpose) -> None:
    """Transaction-level locks of the conversation for ``purposes``, taken in purpose
    order and held to the end of the current transaction."""
    ordered = sorted(set(purposes))
    calls = ", ".join(f"pg_advisory_xact_lock(:purpose{i}, :conversation)" for i in range(len(ordered)))
    values = {f"purpose{i}": int(p) for i, p in enumerate(ordered)}
    await session.execute(text(f"SELECT {calls}"), {**values, "conversation": int(conversation_id)})


async def try_hold(connection: AsyncConnection, conversation_id: int, purpose: LockPurpose) -> bool:
    """A session-level lock on ``connection`` if no one else holds it (committed at once,
    held until ``release`` or until the connection closes); whether it was taken."""
    key = {"purpose": int(purpose), "conversation": int(conversation_id)}
    claimed = bool((await connection.execute(text("SELECT pg_try_advisory_lock(:purpose, :conversation)"), key)).scalar())
    await connection.commit()
    return claimed


async def release(connection: AsyncConnection, conversation_id: int, purpose: LockPurpose) -> None:
    key = {"purpose": int(purpose), "conversation": int(conversation_id)}
    await connection.execute(text("SELECT pg_advisory_unlock(:purpose, :conversation)"), key)
    await connection.commit()


def lock_migrations(connection: Connection) -> None:
    """Keep two processes from migrating at once (to the end of the transaction)."""
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_KEY})
