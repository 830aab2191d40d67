"""Reading a conversation's episodes in chain order."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.schema import EPISODE_SPEAKER, Episode, Speaker


async def chain(session: AsyncSession, conversation_id: int) -> list[dict[str, object]]:
    """Episodes walked from the head of the chain along ``next_id``, as plain dicts."""
    rows = (
        await session.execute(
            select(Episode, Speaker.display_name).join(Speaker, EPISODE_SPEAKER).where(Episode.conversation_id == conversation_id)
        )
    ).all()
    by_id = {episode.id: (episode, name) for episode, name in rows}
    head = next((e.id for e, _ in rows if e.prev_id is None), None)
    ordered: list[dict[str, object]] = []
    while head is not None and len(ordered) < len(by_id):
        episode, name = by_id[head]
        ordered.append(
            {
                "id": episode.id,
                "message_id": episode.platform_message_id,
                "speaker": name,
                "role": episode.role,
                "time": episode.message_time.isoformat(),
                "text": episode.text,
            }
        )
        head = episode.next_id
    return ordered
