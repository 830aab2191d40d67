"""What consolidation reads: the episodes to consolidate and the tail before them, the
entities nearest each mention (resolution's candidates), which episodes survived the
extraction, and the active relations reconciliation compares against. Reads only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pgvector import HalfVector
from sqlalchemy import Select, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.consolidation.extraction import Chunk, ChunkLine
from memory.consolidation.mentions import ChunkEpisode
from memory.graph.reconcile import EntityCandidate, RelationBook, RelationState
from memory.models.tokens import count_tokens
from memory.store.schema import EPISODE_SPEAKER, Checkpoint, Episode, Relation, Speaker


def _episode_query(conversation_id: int) -> Select[int, str, str, str, str, datetime, datetime | None]:
    return (
        select(
            Episode.id,
            Episode.platform_message_id,
            Speaker.display_name,
            Episode.role,
            Episode.text,
            Episode.message_time,
            Episode.edited_at,
        )
        .join(Speaker, EPISODE_SPEAKER)
        .where(Episode.conversation_id == conversation_id)
    )


async def read_work(
    session: AsyncSession, conversation_id: int, checkpoint: Checkpoint, overlap_tokens: int
) -> tuple[list[ChunkEpisode], list[ChunkEpisode]]:
    """The episodes to consolidate (id order) and the tail of consolidated ones before them."""
    pending = list(checkpoint.pending_episode_ids or [])
    new_rows = await session.execute(
        _episode_query(conversation_id)
        .where((Episode.id > checkpoint.last_episode_id) | Episode.id.in_(pending))
        .order_by(Episode.id)
    )
    episodes = [ChunkEpisode(*row) for row in new_rows]
    lead_rows = await session.execute(
        _episode_query(conversation_id)
        .where(Episode.id <= checkpoint.last_episode_id, Episode.id.not_in(pending or [0]))
        .order_by(Episode.id.desc())
        .limit(max(1, overlap_tokens // 8))
    )
    lead = [ChunkEpisode(*row) for row in lead_rows][::-1]
    return episodes, lead


def line_size(episode: ChunkEpisode) -> int:
    return count_tokens(f"{episode.speaker}: {episode.text}") + 8  # + line number and time


def chunk_of(
    conversation_id: int,
    context: Sequence[ChunkEpisode],
    new: Sequence[ChunkEpisode],
    summary: str,
    rolling: list[dict[str, Any]],
) -> Chunk:
    ordered_new = sorted(new, key=lambda e: (e.time, e.id))
    lines = [
        ChunkLine(number, e.id, e.message_id, e.speaker, e.role, e.text, e.time)
        for number, e in enumerate([*context, *ordered_new], start=1)
    ]
    return Chunk(conversation_id, lines, len(context), summary, rolling)


_NEAREST = text(
    "SELECT m.key, c.id, c.name, c.distance "
    "FROM unnest(CAST(:keys AS text[]), CAST(:vectors AS text[])) AS m(key, vector) "
    "CROSS JOIN LATERAL (SELECT e.id, e.name, e.embedding <=> CAST(m.vector AS halfvec) AS distance FROM entities e "
    "WHERE e.conversation_id = :c AND e.embedding IS NOT NULL ORDER BY distance, e.id LIMIT :k) c"
)


async def nearest_entities(
    session: AsyncSession, conversation_id: int, vectors: Mapping[str, Sequence[float]], limit: int
) -> dict[str, list[EntityCandidate]]:
    """The ``limit`` nearest entities to each vector (by key, nearest first, then by id:
    entities with one name and vector resolve the same way every time), one query for
    all of them."""
    texts = [HalfVector._to_db(list(v)) for v in vectors.values()]
    rows = await session.execute(_NEAREST, {"keys": list(vectors), "vectors": texts, "c": conversation_id, "k": limit})
    found: dict[str, list[EntityCandidate]] = {key: [] for key in vectors}
    for key, entity_id, name, distance in rows:
        found[key].append(EntityCandidate(entity_id, name, 1.0 - float(distance)))
    return found


async def alive(session: AsyncSession, conversation_id: int, ids: Iterable[int]) -> dict[int, datetime | None]:
    """Which of ``ids`` still exist, with their current ``edited_at``."""
    rows = await session.execute(
        select(Episode.id, Episode.edited_at).where(Episode.conversation_id == conversation_id, Episode.id.in_(list(ids)))
    )
    return {episode_id: edited_at for episode_id, edited_at in rows.all()}


async def relation_book(session: AsyncSession, conversation_id: int, subjects: set[int], reconcile: bool) -> RelationBook:
    """The active relations of these subjects, for reconciliation (none without it)."""
    rows = (
        await session.execute(
            select(Relation).where(
                Relation.conversation_id == conversation_id, Relation.status == "active", Relation.subject_id.in_(subjects)
            )
        )
        if reconcile
        else None
    )
    return RelationBook.of(
        RelationState(
            r.id,
            r.subject_id,
            r.object_id,
            r.predicate,
            r.fact,
            frozenset(),
            r.status,
            r.superseded_by,
            r.valid_from,
            r.invalid_at,
        )
        for r in (rows.scalars() if rows is not None else [])
    )
