"""Writing the provenance graph: entities and relations with their supporting episodes
and their search documents. The reconciliation and deletion rules decide *what* to
write; this module only knows *how*, inside the caller's transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.graph.wording import EntityWitness, FactWording
from memory.store.documents import Document, upsert_documents
from memory.store.schema import (
    Entity,
    EntityProvenance,
    Relation,
    RelationProvenance,
    SearchDocument,
)


def entity_document_text(name: str, type_: str, summary: str) -> str:
    return f"{name} ({type_}): {summary}" if summary else f"{name} ({type_})"


def relation_document_text(fact: str) -> str:
    return fact


async def _add_support(
    session: AsyncSession, link: type[EntityProvenance] | type[RelationProvenance], owner: dict[str, int],
    conversation_id: int, rows: Iterable[dict[str, Any]],
) -> None:
    """The one provenance writer: a link per episode with that episode's wording. Adding
    an episode twice keeps the first link (provenance is a set)."""
    values = [{**owner, "conversation_id": conversation_id, **row} for row in rows]
    if values:
        await session.execute(insert(link).values(values).on_conflict_do_nothing())


async def add_entity_support(
    session: AsyncSession, conversation_id: int, entity_id: int, witnesses: Iterable[EntityWitness]
) -> None:
    """Add episodes to P(e), each with its name form, type and summary contribution."""
    rows = [
        {
            "episode_id": w.episode_id, "name": w.name, "type": w.type, "summary": w.summary,
            "summary_sources": sorted(w.summary_sources) if w.summary else [],
        }
        for w in witnesses
    ]
    await _add_support(session, EntityProvenance, {"entity_id": entity_id}, conversation_id, rows)


async def add_relation_support(
    session: AsyncSession, conversation_id: int, relation_id: int, wordings: Mapping[int, FactWording]
) -> None:
    """Add episodes to P(r), each (the key) with the wording its extraction gave."""
    rows = [
        {
            "episode_id": episode_id, "fact": w.fact, "valid_from": w.valid_from, "sources": sorted(w.sources),
            "embedding": list(w.embedding) if w.embedding is not None else None,
        }
        for episode_id, w in wordings.items()
    ]
    await _add_support(session, RelationProvenance, {"relation_id": relation_id}, conversation_id, rows)


def same_wording(
    name: str, type_: str, summary: str, episode_ids: Iterable[int]
) -> list[EntityWitness]:
    """Witnesses that all said the same (the summary drawn from all of them)."""
    episodes = frozenset(episode_ids)
    return [EntityWitness(e, name, type_, summary, episodes if summary else frozenset()) for e in episodes]


async def create_entity(
    session: AsyncSession,
    conversation_id: int,
    *,
    name: str,
    type_: str,
    summary: str,
    embedding: Sequence[float],
    episode_ids: Iterable[int],
    document_embedding: Sequence[float] | None = None,
    attributes: dict[str, Any] | None = None,
    witnesses: Iterable[EntityWitness] | None = None,
) -> int:
    """A new entity with its provenance and search document.

    ``embedding`` is what entity resolution compares (consolidation embeds the name);
    ``document_embedding``, when given, is the search document's (its full text).
    ``witnesses`` give each episode's own wording; by default every episode said
    ``name``, ``type_`` and ``summary``."""
    entity_id = (
        await session.execute(
            insert(Entity)
            .values(
                conversation_id=conversation_id,
                name=name,
                type=type_,
                summary=summary,
                embedding=list(embedding),
                attributes=attributes or {},
            )
            .returning(Entity.id)
        )
    ).scalar_one()
    await add_entity_support(
        session, conversation_id, entity_id,
        witnesses if witnesses is not None else same_wording(name, type_, summary, episode_ids),
    )
    await upsert_documents(
        session,
        conversation_id,
        [Document("entity", entity_id, entity_document_text(name, type_, summary), document_embedding or embedding)],
    )
    return entity_id


async def create_relation(
    session: AsyncSession,
    conversation_id: int,
    *,
    subject_id: int,
    object_id: int,
    predicate: str,
    fact: str,
    embedding: Sequence[float],
    episode_ids: Iterable[int],
    valid_from: datetime | None = None,
    wordings: Mapping[int, FactWording] | None = None,
) -> int:
    """A new active relation with its provenance and search document. ``wordings`` give
    each episode's own wording; by default all of them said ``fact`` together."""
    relation_id = (
        await session.execute(
            insert(Relation)
            .values(
                conversation_id=conversation_id,
                subject_id=subject_id,
                object_id=object_id,
                predicate=predicate,
                fact=fact,
                valid_from=valid_from,
                status="active",
            )
            .returning(Relation.id)
        )
    ).scalar_one()
    if wordings is None:
        together = frozenset(episode_ids)
        wordings = {e: FactWording(fact, valid_from, together, embedding) for e in together}
    await add_relation_support(session, conversation_id, relation_id, wordings)
    await upsert_documents(
        session,
        conversation_id,
        [Document("relation", relation_id, relation_document_text(fact), embedding, valid_from)],
    )
    return relation_id


async def supersede_relation(
    session: AsyncSession, conversation_id: int, relation_id: int, replaced_by: int, invalid_at: datetime | None
) -> None:
    """Keep the old relation as history: superseded, with when and by what; its search
    document stays but is marked not current so retrieval prefers the new fact."""
    await session.execute(
        update(Relation)
        .where(Relation.conversation_id == conversation_id, Relation.id == relation_id)
        .values(status="superseded", superseded_by=replaced_by, invalid_at=invalid_at)
    )
    await session.execute(
        update(SearchDocument)
        .where(
            SearchDocument.conversation_id == conversation_id,
            SearchDocument.kind == "relation",
            SearchDocument.ref_id == relation_id,
        )
        .values(is_current=False)
    )


async def update_entity_summary(
    session: AsyncSession,
    conversation_id: int,
    entity_id: int,
    *,
    summary: str,
    document_embedding: Sequence[float],
    summary_episode_ids: Iterable[int],
) -> None:
    """Replace an entity's summary and its search document; ``summary_episode_ids`` (in
    ``attributes``) are the episodes the summary was written from, so that deleting one
    of them can clear it."""
    row = (
        await session.execute(
            update(Entity)
            .where(Entity.id == entity_id, Entity.conversation_id == conversation_id)
            .values(summary=summary, attributes={"summary_episode_ids": sorted(set(summary_episode_ids))})
            .returning(Entity.name, Entity.type)
        )
    ).one()
    await upsert_documents(
        session,
        conversation_id,
        [Document("entity", entity_id, entity_document_text(row.name, row.type, summary), document_embedding)],
    )
