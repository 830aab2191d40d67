"""Which messages a conversation holds, by id: what a connector compares with the
platform's history (the missed-deletion sweep) or forgets by thread."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.schema import Episode


@dataclass(frozen=True)
class StoredMessage:
    message_id: str
    thread_id: str | None
    message_time: datetime
    role: str


async def stored_messages(
    session: AsyncSession, conversation_id: int, since: datetime | None = None, thread_id: str | None = None
) -> list[StoredMessage]:
    """Stored messages in time order, optionally only those at or after ``since`` or in one thread."""
    query = select(Episode.platform_message_id, Episode.thread_id, Episode.message_time, Episode.role).where(
        Episode.conversation_id == conversation_id
    )
    if since is not None:
        query = query.where(Episode.message_time >= since)
    if thread_id is not None:
        query = query.where(Episode.thread_id == thread_id)
    rows = await session.execute(query.order_by(Episode.message_time, Episode.id))
    return [StoredMessage(*row) for row in rows]
