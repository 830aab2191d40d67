"""Per-conversation advisory locks, held to the end of the current transaction.

Work is coordinated through the database, never in-process state, so that any number of
bot and worker processes can run at once.
"""

from __future__ import annotations

import enum

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession


class LockPurpose(enum.IntEnum):
    CHAIN = 1  # the episode chain of a conversation (append, delete, edit)
    GRAPH = 2  # the entity/relation graph of a conversation (consolidate, delete)
    INBOX = 4  # processing a conversation's inbox (session-level: one worker at a time, in arrival order)


async def lock_conversation(session: AsyncSession, conversation_id: int, purpose: LockPurpose) -> None:
    await session.execute(
        text("SELECT pg_advisory_xact_lock(:purpose, :conversation)"),
        {"purpose": int(purpose), "conversation": int(conversation_id)},
    )
