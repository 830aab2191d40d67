"""The writer of search documents: one row per retrievable thing, so removal from the
index is a row that is gone. The only module that inserts, updates or deletes them
(tests/architecture/test_writers.py); the lifecycle modules say which documents change."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from memory.store.schema import SearchDocument

KINDS = ("episode", "entity", "relation", "community")
# The sum is taken in float4 (``vector``) and rounded to the column's ``halfvec`` as it is
# written, as memory.episodes.exchange_vectors does with the vector it computes in Python.
# The predecessor is joined where it belongs to the exchange (``joins_predecessor`` there):
# at most ``:pair`` speakers, or a reply in a thread after a message of that thread.
_REFRESH_EXCHANGE = text(
    "UPDATE search_documents d SET embedding = CASE WHEN p.embedding IS NULL THEN e.embedding "
    "ELSE CAST(CAST(e.embedding AS vector) + CAST(p.embedding AS vector) * "
    "CAST(array_fill(CAST(:share AS real), ARRAY[vector_dims(p.embedding)]) AS vector) AS halfvec) END "
    "FROM (SELECT count(*) AS n FROM speakers WHERE conversation_id = :c) k CROSS JOIN episodes e "
    "LEFT JOIN episodes p ON p.conversation_id = :c AND p.id = e.prev_id AND (k.n <= :pair OR "
    "(e.thread_id <> e.platform_message_id AND e.thread_id IN (p.thread_id, p.platform_message_id))) "
    "WHERE e.conversation_id = :c AND e.id = ANY(:ids) AND e.embedding IS NOT NULL "
    "AND d.conversation_id = :c AND d.kind = 'episode' AND d.ref_id = e.id"
)

_CAPPED_COUNTS = text(
    "SELECT k.kind, (SELECT count(*) FROM (SELECT 1 FROM search_documents d "
    "WHERE d.conversation_id = :c AND d.kind = k.kind LIMIT :cap) s) "
    "FROM unnest(CAST(:kinds AS text[])) AS k(kind)"
)


async def capped_counts(
    session: AsyncSession | AsyncConnection, conversation_id: int, kinds: Sequence[str], cap: int
) -> dict[str, int]:
    """Documents per kind of the conversation, counted up to ``cap`` (index-only): what
    tells a small conversation from a large one without counting a large one."""
    rows = await session.execute(_CAPPED_COUNTS, {"c": conversation_id, "kinds": list(kinds), "cap": cap})
    return {kind: int(count) for kind, count in rows.all()}


@dataclass(frozen=True)
class Document:
    kind: str
    ref_id: int
    text: str
    embedding: Sequence[float]
    message_time: datetime | None = None
    is_current: bool = True


async def upsert_documents(session: AsyncSession, conversation_id: int, documents: Iterable[Document]) -> None:
    rows = [
        {
            "conversation_id": conversation_id,
            "kind": d.kind,
            "ref_id": d.ref_id,
            "text": d.text,
            "embedding": list(d.embedding),
            "message_time": d.message_time,
            "is_current": d.is_current,
        }
        for d in documents
    ]
    if not rows:
        return
    # Rows as parameters (one statement all the same): compiled once per process, where
    # a statement with the rows inlined is compiled again for every call.
    statement = insert(SearchDocument)
    statement = statement.on_conflict_do_update(
        constraint="uq_search_document_ref",
        set_={
            "text": statement.excluded.text,
            "embedding": statement.excluded.embedding,
            "message_time": statement.excluded.message_time,
            "is_current": statement.excluded.is_current,
        },
    )
    await session.execute(statement, rows)


async def remove_documents(session: AsyncSession, conversation_id: int, kind: str, ref_ids: Iterable[int]) -> int:
    ids = list(ref_ids)
    if not ids:
        return 0
    result = await session.execute(
        delete(SearchDocument).where(
            SearchDocument.conversation_id == conversation_id, SearchDocument.kind == kind, SearchDocument.ref_id.in_(ids)
        )
    )
    return int(getattr(result, "rowcount", 0) or 0)


async def set_current(session: AsyncSession, conversation_id: int, kind: str, ref_ids: Iterable[int], current: bool) -> None:
    """Mark documents current or not (a superseded relation's stays, not current, so
    retrieval prefers the fact that replaced it)."""
    ids = list(ref_ids)
    if ids:
        await session.execute(
            update(SearchDocument)
            .where(SearchDocument.conversation_id == conversation_id, SearchDocument.kind == kind, SearchDocument.ref_id.in_(ids))
            .values(is_current=current)
        )


async def refresh_exchange_vectors(
    session: AsyncSession, conversation_id: int, episode_ids: Iterable[int], share: float, pair: int
) -> None:
    """Recompute the searched vector of these episodes' documents from their own vector
    and ``share`` of their current predecessor's where it joins: the conversation has at
    most ``pair`` speakers, or the episode replies in the predecessor's thread
    (memory.episodes.exchange_vectors)."""
    ids = sorted(set(episode_ids))
    if ids:
        await session.execute(_REFRESH_EXCHANGE, {"c": conversation_id, "ids": ids, "share": share, "pair": pair})


def episode_document_text(text: str) -> str:
    """What is indexed for an episode: its text alone. Who said it is not what it is
    about: with the speaker's name in every document, a question naming a person
    matched every line that person wrote (full text and vector alike) before a message
    about them by someone else. Retrieval weighs the speaker apart (search's
    ``named_speaker``). Migration 0004 converted older documents."""
    return text
