"""Ids in write order within a conversation, whichever node writes them.

Ids come from each table's sequence (migration 0015). Under Citus every node has its own
range of that sequence (a worker's starts at its group id shifted 48 bits), so ids
written through different nodes are unique but not in write order: a message stored
through the coordinator after one stored through a worker gets the smaller id. Three
readers take id order for write order within a conversation: consolidation's
watermark (``checkpoints.last_episode_id``: every episode at or below it is taken as
consolidated), the backlog's count of what waits above it, and community regeneration's
watermarks (``community_state``'s built and seen entity and relation ids). A smaller
id written late would never be consolidated, or never regenerate its communities.

So the writers of episodes, entities and relations take their ids from here: the
sequence's next values, raised where needed above the conversation's largest id. The
caller holds the lock that serialises that table's writers in the conversation (the
chain lock for episodes, the graph lock for entities and relations, both on the
conversation's shard), so ids grow in commit order within the conversation. Ids stay
unique where the schema keys them, (conversation_id, id); on one node, where the
sequence is shared, the raise never happens.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

ORDERED_TABLES = frozenset({"episodes", "entities", "relations"})
_FRESH = text("SELECT nextval(pg_get_serial_sequence(:table, 'id')) FROM generate_series(1, :n)")


def in_write_order(fresh: Sequence[int], top: int) -> list[int]:
    """Ids for ``fresh`` sequence values in the conversation whose largest id is ``top``:
    each value, or one more than the id before when it is not larger. Pure."""
    ids: list[int] = []
    last = top
    for value in sorted(fresh):
        last = max(value, last + 1)
        ids.append(last)
    return ids


async def next_ids(session: AsyncSession, table: str, conversation_id: int, count: int) -> list[int]:
    """``count`` new ids of ``table`` (one of ``ORDERED_TABLES``) for the conversation,
    ascending, each above every id it holds (the caller holds the writers' lock)."""
    if table not in ORDERED_TABLES:
        raise ValueError(f"ids in write order are kept for {sorted(ORDERED_TABLES)}, not {table!r}")
    if count <= 0:
        return []
    fresh = list((await session.execute(_FRESH, {"table": table, "n": count})).scalars())
    top = await session.execute(
        text(f"SELECT coalesce(max(id), 0) FROM {table} WHERE conversation_id = :c"), {"c": conversation_id}
    )
    return in_write_order(fresh, int(top.scalar_one()))


async def with_ids(session: AsyncSession, table: str, rows: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """``rows`` (each naming its ``conversation_id``) with ids in write order, in the rows' order."""
    given: list[dict[str, object]] = [dict(row) for row in rows]
    for conversation_id in dict.fromkeys(int(str(row["conversation_id"])) for row in given):
        mine = [row for row in given if int(str(row["conversation_id"])) == conversation_id]
        for row, new_id in zip(mine, await next_ids(session, table, conversation_id, len(mine)), strict=True):
            row["id"] = new_id
    return given
