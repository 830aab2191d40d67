"""The writer of episodes and tombstones: the only module that inserts, updates or
deletes their rows (tests/architecture/test_writers.py holds every writer to its tables).

Lifecycle modules (the fast path, forgetting, reindexing) decide what changes and call
these functions inside their own transaction, holding the conversation's chain lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import BigInteger, Table, bindparam, text, update
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.schema import Episode

_IDS = bindparam("ids", type_=ARRAY(BigInteger))
# One statement: every link to or from the episodes is cleared, except that each
# survivor beside a run of them is linked to the survivor across it (the arrays map an
# episode id to its new neighbour).
_UNLINK = text(
    "UPDATE episodes SET "
    "prev_id = CASE WHEN id = ANY(:ids) THEN NULL "
    "WHEN array_position(CAST(:nexts AS bigint[]), id) IS NOT NULL "
    "THEN (CAST(:prevs AS bigint[]))[array_position(CAST(:nexts AS bigint[]), id)] "
    "WHEN prev_id = ANY(:ids) THEN NULL ELSE prev_id END, "
    "next_id = CASE WHEN id = ANY(:ids) THEN NULL "
    "WHEN array_position(CAST(:prevs AS bigint[]), id) IS NOT NULL "
    "THEN (CAST(:nexts AS bigint[]))[array_position(CAST(:prevs AS bigint[]), id)] "
    "WHEN next_id = ANY(:ids) THEN NULL ELSE next_id END "
    "WHERE conversation_id = :conversation AND (id = ANY(:ids) OR prev_id = ANY(:ids) OR next_id = ANY(:ids))"
).bindparams(_IDS)
_DROP_EPISODES = text("DELETE FROM episodes WHERE conversation_id = :conversation AND id = ANY(:ids)").bindparams(_IDS)
_TOMBSTONES = text(
    "INSERT INTO tombstones (conversation_id, platform_message_id) "
    "SELECT :conversation, unnest(CAST(:messages AS text[])) ON CONFLICT DO NOTHING"
)


async def insert_episodes(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Insert episode rows, up to 1,000 in one statement (SQLAlchemy's batch; a caller
    whose rows name each other keeps them within one), each with its id in write order
    within the conversation (``memory.store.ids``; the caller holds the chain lock) and,
    where known, its links; a message already stored is skipped. Returns the ids of
    those inserted by platform message id. Rows as parameters: compiled once per process."""
    if not rows:
        return {}
    # Core, not the ORM's bulk insert, which splits the rows into one statement per set
    # of non-null columns: the chain's keys are checked at the end of each statement,
    # so a row linked to the next must be in its statement.
    table = cast(Table, Episode.__table__)
    result = await session.execute(
        insert(table)
        .on_conflict_do_nothing(constraint="uq_episode_platform_message")
        .returning(table.c.platform_message_id, table.c.id),
        list(rows),
    )
    return {message_id: episode_id for message_id, episode_id in result}


async def place(session: AsyncSession, conversation_id: int, episode_id: int, before: int | None, after: int | None) -> None:
    """Link an episode between ``before`` and ``after``, and them to it."""
    mine = Episode.conversation_id == conversation_id
    await session.execute(update(Episode).where(mine, Episode.id == episode_id).values(prev_id=before, next_id=after))
    if before is not None:
        await session.execute(update(Episode).where(mine, Episode.id == before).values(next_id=episode_id))
    if after is not None:
        await session.execute(update(Episode).where(mine, Episode.id == after).values(prev_id=episode_id))


async def set_next(session: AsyncSession, conversation_id: int, episode_id: int, next_id: int) -> None:
    """Link the chain's old tail to the first of the episodes appended after it."""
    await session.execute(
        update(Episode).where(Episode.conversation_id == conversation_id, Episode.id == episode_id).values(next_id=next_id)
    )


async def unlink_episodes(
    session: AsyncSession, conversation_id: int, episode_ids: Sequence[int], joins: Sequence[tuple[int, int]]
) -> None:
    """Clear every link to and from the episodes (the chain's keys have no ON DELETE
    action since migration 0010, so a link left behind would fail their deletion) and
    join each (previous, next) pair of survivors around them, in one statement (a
    deletion's round trips are most of its time under load)."""
    values = {
        "conversation": conversation_id,
        "ids": list(episode_ids),
        "prevs": [p for p, _ in joins],
        "nexts": [n for _, n in joins],
    }
    await session.execute(_UNLINK, values)


async def drop_episodes(session: AsyncSession, conversation_id: int, episode_ids: Sequence[int]) -> None:
    """Drop unlinked episodes' rows (their provenance links go with them, ON DELETE CASCADE)."""
    await session.execute(_DROP_EPISODES, {"conversation": conversation_id, "ids": list(episode_ids)})


async def leave_tombstones(session: AsyncSession, conversation_id: int, platform_message_ids: Sequence[str]) -> None:
    """Refuse these messages if they are ever delivered (again)."""
    await session.execute(_TOMBSTONES, {"conversation": conversation_id, "messages": list(platform_message_ids)})


async def leave_tombstone(session: AsyncSession, conversation_id: int, platform_message_id: str) -> None:
    """Refuse the message if it is ever delivered (again)."""
    await leave_tombstones(session, conversation_id, [platform_message_id])


async def replace_text(
    session: AsyncSession, conversation_id: int, episode_id: int, text: str, embedding: Sequence[float], edited_at: datetime
) -> None:
    """An edit: the new text and its own vector, in place (chain position and time kept)."""
    await session.execute(
        update(Episode)
        .where(Episode.conversation_id == conversation_id, Episode.id == episode_id)
        .values(text=text, embedding=list(embedding), edited_at=edited_at)
    )


async def set_embedding(session: AsyncSession, conversation_id: int, episode_id: int, embedding: Sequence[float]) -> None:
    await session.execute(
        update(Episode)
        .where(Episode.conversation_id == conversation_id, Episode.id == episode_id)
        .values(embedding=list(embedding))
    )
