"""The writer of entities: the only module that inserts, updates or deletes their rows
(tests/architecture/test_writers.py). Their provenance is memory.store.provenance's, their search
documents memory.store.documents'; memory.graph.writes composes the three."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Text, cast, delete, literal, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.ids import with_ids
from memory.store.schema import Entity


async def insert_entities(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> list[int]:
    """Insert rows in one statement (rows as parameters: compiled once per process) and
    return their ids in the rows' order: in write order within the conversation
    (memory.store.ids; the caller holds the graph lock)."""
    rows = await with_ids(session, "entities", rows)
    result = await session.execute(insert(Entity).returning(Entity.id, sort_by_parameter_order=True), rows)
    return list(result.scalars())


async def set_summary(
    session: AsyncSession, conversation_id: int, entity_id: int, summary: str, summary_episode_ids: Iterable[int]
) -> tuple[str, str]:
    """Replace the summary, with the episodes it was written from; returns (name, type)."""
    row = (
        await session.execute(
            update(Entity)
            .where(Entity.id == entity_id, Entity.conversation_id == conversation_id)
            .values(summary=summary, attributes={"summary_episode_ids": sorted(set(summary_episode_ids))})
            .returning(Entity.name, Entity.type)
        )
    ).one()
    return row.name, row.type


async def set_rendering(
    session: AsyncSession,
    conversation_id: int,
    entity_id: int,
    *,
    name: str,
    type_: str,
    summary: str,
    embedding: Sequence[float],
    attributes: Mapping[str, Any],
) -> None:
    """What the entity shows, re-rendered from its surviving witnesses."""
    await session.execute(
        update(Entity)
        .where(Entity.conversation_id == conversation_id, Entity.id == entity_id)
        .values(name=name, type=type_, summary=summary, embedding=embedding, attributes=dict(attributes))
    )


async def make_anchors(session: AsyncSession, conversation_id: int, ids: Iterable[int]) -> None:
    """Connective anchors: id, type and relations kept; the name becomes ``anchor:<id>``
    and the metadata every deleted mention gave it is cleared."""
    await session.execute(
        update(Entity)
        .values(name=literal("anchor:") + cast(Entity.id, Text), summary="", attributes={}, embedding=None, is_anchor=True)
        .where(Entity.conversation_id == conversation_id, Entity.id.in_(sorted(ids)))
    )


async def delete_entities(session: AsyncSession, conversation_id: int, ids: Iterable[int]) -> None:
    """Their provenance, memberships and relations go with them (ON DELETE CASCADE)."""
    await session.execute(delete(Entity).where(Entity.conversation_id == conversation_id, Entity.id.in_(sorted(ids))))
