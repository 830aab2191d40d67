"""The writer of the rolling context: one row per entry (``rolling_context_entries``), in
the order of their ``position``, so that a consolidation chunk rewrites only the entries
it changed. The only module that inserts, updates or deletes them (tests/architecture/test_writers.py);
what the entries say is memory.consolidation.rolling_context's (pure).

Why: Postgres writes a whole new row version on every UPDATE and leaves the old one in
the table file (docs/guarantees/deletion.md). Kept inside the checkpoint row,
the whole context was copied at every chunk, with the words of every entry, messages
deleted later included (measured: 16 copies of one message's words after 11 chunks).
An entry now keeps its row while it is unchanged and still in order.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from sqlalchemy import BigInteger, any_, cast, delete, select
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.consolidation.rolling_context import Entry, entry
from memory.store.schema import RollingContextEntry

Stored = dict[int, tuple[int, Entry]]  # entity id -> (position, entry)


def context_writes(
    stored: Mapping[int, tuple[int, Entry]], entries: Sequence[Entry]
) -> tuple[list[int], list[tuple[int, Entry]]]:
    """The rows to delete and the (position, entry) rows to write so that the rows, by
    position, read ``entries``. An entry keeps its position while positions still
    increase (rewritten only if it changed); one that must come after its predecessors
    (consolidation moves the entries it updates to the end) takes the next free
    position. Pure."""
    top = max((position for position, _ in stored.values()), default=0)
    last = 0
    writes: list[tuple[int, Entry]] = []
    for item in entries:
        found = stored.get(item["entity_id"])
        if found is not None and found[0] > last:
            last = found[0]
            if found[1] != item:
                writes.append((last, item))
        else:
            top += 1
            last = top
            writes.append((top, item))
    kept = {item["entity_id"] for item in entries}
    return sorted(e for e in stored if e not in kept), writes


async def load_context(
    session: AsyncSession, conversation_id: int, episode_ids: Collection[int] | None = None, entity_ids: Iterable[int] = ()
) -> Stored:
    """The stored entries by entity id: all of them, or (given ``episode_ids``) those
    resting on one of those episodes or of ``entity_ids``."""
    query = select(RollingContextEntry).where(RollingContextEntry.conversation_id == conversation_id)
    if episode_ids is not None:
        query = query.where(
            RollingContextEntry.episode_ids.overlap(cast(sorted(episode_ids), ARRAY(BigInteger)))
            | (RollingContextEntry.entity_id == any_(cast(sorted(entity_ids), ARRAY(BigInteger))))
        )
    rows = (await session.execute(query)).scalars()
    return {r.entity_id: (r.position, entry(r.entity_id, r.name, r.text, r.episode_ids)) for r in rows}


def in_order(stored: Stored) -> list[Entry]:
    return [item for _, item in sorted(stored.values(), key=lambda pair: pair[0])]


async def save_context(session: AsyncSession, conversation_id: int, stored: Stored, entries: Sequence[Entry]) -> None:
    """Make the stored rows read ``entries``; ``stored`` is what ``load_context`` gave
    (a subset is enough when the entries outside it neither change nor move)."""
    removed, writes = context_writes(stored, entries)
    if removed:
        await session.execute(
            delete(RollingContextEntry).where(
                RollingContextEntry.conversation_id == conversation_id, RollingContextEntry.entity_id.in_(removed)
            )
        )
    if writes:
        statement = insert(RollingContextEntry).values(
            [
                {
                    "conversation_id": conversation_id,
                    "entity_id": item["entity_id"],
                    "position": position,
                    "name": item["name"],
                    "text": item["text"],
                    "episode_ids": list(item["episode_ids"]),
                }
                for position, item in writes
            ]
        )
        await session.execute(
            statement.on_conflict_do_update(
                index_elements=["conversation_id", "entity_id"],
                set_={c: statement.excluded[c] for c in ("position", "name", "text", "episode_ids")},
            )
        )
