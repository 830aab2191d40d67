"""The writer of provenance, P(e) and P(r): the only module that inserts, updates or
deletes ``entity_provenance`` and ``relation_provenance`` rows (tests/architecture/test_writers.py).
Each link keeps what its episode itself said (memory.graph.wording)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from sqlalchemy import BigInteger, bindparam, delete, text
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.schema import EntityProvenance, RelationProvenance

_IDS = (
    bindparam("ids", type_=ARRAY(BigInteger)),
    bindparam("episodes", type_=ARRAY(BigInteger)),
    bindparam("cid", type_=BigInteger),
)
_CLEAR_RELATION_WORDING = text(
    """UPDATE relation_provenance SET fact = '', valid_from = NULL, embedding = NULL, sources = '{}'
       WHERE conversation_id = :cid AND relation_id = ANY(:ids) AND episode_id <> ALL(:episodes) AND sources && :episodes"""
).bindparams(*_IDS)
_CLEAR_ENTITY_SUMMARY = text(
    """UPDATE entity_provenance SET summary = '', summary_sources = '{}'
       WHERE conversation_id = :cid AND entity_id = ANY(:ids) AND episode_id <> ALL(:episodes) AND summary <> ''
         AND summary_sources && :episodes"""
).bindparams(*_IDS)


async def _add(
    session: AsyncSession,
    link: type[EntityProvenance] | type[RelationProvenance],
    conversation_id: int,
    rows: Iterable[dict[str, Any]],
) -> None:
    """One statement for any number of links. Adding an episode twice keeps the first
    link (provenance is a set)."""
    values = [{"conversation_id": conversation_id, **row} for row in rows]
    if values:
        await session.execute(insert(link).on_conflict_do_nothing(), values)


async def add_entity_links(session: AsyncSession, conversation_id: int, rows: Iterable[dict[str, Any]]) -> None:
    """Links (entity_id, episode_id, name, type, summary, summary_sources) into P(e)."""
    await _add(session, EntityProvenance, conversation_id, rows)


async def add_relation_links(session: AsyncSession, conversation_id: int, rows: Iterable[dict[str, Any]]) -> None:
    """Links (relation_id, episode_id, fact, valid_from, sources, embedding) into P(r)."""
    await _add(session, RelationProvenance, conversation_id, rows)


async def drop_episode_links(session: AsyncSession, conversation_id: int, episode_id: int) -> None:
    """Take the episode out of every P(e) and P(r) (an edit; a deletion's links go with
    the episode row, ON DELETE CASCADE)."""
    for table in (RelationProvenance, EntityProvenance):
        await session.execute(delete(table).where(table.conversation_id == conversation_id, table.episode_id == episode_id))


async def clear_wordings_from(
    session: AsyncSession, conversation_id: int, episode_ids: Collection[int], entities: Sequence[int], relations: Sequence[int]
) -> None:
    """Clear every wording other links of these records drew from the deleted episodes
    (a summary or a sentence written from several messages may quote them)."""
    values = {"cid": conversation_id, "episodes": sorted(episode_ids)}
    for statement, owners in ((_CLEAR_ENTITY_SUMMARY, entities), (_CLEAR_RELATION_WORDING, relations)):
        if owners:
            await session.execute(statement, {**values, "ids": list(owners)})
