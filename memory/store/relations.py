"""The writer of relations: the only module that inserts, updates or deletes their rows
(tests/architecture/test_writers.py). Their provenance is memory.store.provenance's, their search
documents memory.store.documents'; memory.graph.writes composes the three."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.ids import with_ids
from memory.store.schema import Relation


async def insert_relations(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> list[int]:
    """Insert rows in one statement (rows as parameters: compiled once per process) and
    return their ids in the rows' order: in write order within the conversation
    (memory.store.ids; the caller holds the graph lock)."""
    rows = await with_ids(session, "relations", rows)
    result = await session.execute(insert(Relation).returning(Relation.id, sort_by_parameter_order=True), rows)
    return list(result.scalars())


async def set_status(
    session: AsyncSession,
    conversation_id: int,
    ids: Iterable[int],
    status: str,
    superseded_by: int | None,
    invalid_at: datetime | None,
) -> None:
    """``active`` (no superseder, no end) or ``superseded`` by a relation, from a time."""
    await session.execute(
        update(Relation)
        .where(Relation.conversation_id == conversation_id, Relation.id.in_(sorted(ids)))
        .values(status=status, superseded_by=superseded_by, invalid_at=invalid_at)
    )


async def set_fact(session: AsyncSession, conversation_id: int, relation_id: int, fact: str, valid_from: datetime | None) -> None:
    """What the relation says, re-rendered from its surviving witnesses."""
    await session.execute(
        update(Relation)
        .where(Relation.conversation_id == conversation_id, Relation.id == relation_id)
        .values(fact=fact, valid_from=valid_from)
    )


async def unlink_superseders(
    session: AsyncSession, conversation_id: int, relations: Iterable[int], entities: Iterable[int]
) -> None:
    """Clear ``superseded_by`` where it names a relation about to go: one of
    ``relations`` or one that deleting one of ``entities`` takes with it (ON DELETE
    CASCADE). The key has no ON DELETE action (migration 0010)."""
    relation_ids, entity_ids = sorted(relations), sorted(entities)
    if not relation_ids and not entity_ids:
        return
    going = select(Relation.id).where(
        Relation.conversation_id == conversation_id,
        or_(Relation.id.in_(relation_ids), Relation.subject_id.in_(entity_ids), Relation.object_id.in_(entity_ids)),
    )
    await session.execute(
        update(Relation)
        .where(Relation.conversation_id == conversation_id, Relation.superseded_by.in_(going))
        .values(superseded_by=None)
    )


async def delete_relations(session: AsyncSession, conversation_id: int, ids: Iterable[int]) -> None:
    """Their provenance goes with them (ON DELETE CASCADE)."""
    await session.execute(delete(Relation).where(Relation.conversation_id == conversation_id, Relation.id.in_(sorted(ids))))
