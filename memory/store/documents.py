"""Search documents: one row per retrievable thing, so removal from the index is a row
that is gone."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.schema import SearchDocument

KINDS = ("episode", "entity", "relation", "community")


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


def episode_document_text(text: str) -> str:
    """What is indexed for an episode: its text alone. Who said it is not what it is
    about: with the speaker's name in every document, a question naming a person
    matched every line that person wrote (full text and vector alike) before a message
    about them by someone else. Retrieval weighs the speaker apart (search's
    ``named_speaker``). Migration 0004 converted older documents."""
    return text
