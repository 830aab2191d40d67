"""Writing the provenance graph: entities and relations with their supporting episodes
and their search documents, inside the caller's transaction. The reconciliation and
deletion rules decide *what* to write; this module composes the writers of each kind
(memory.store.entities, .relations, .provenance, .documents) and writes nothing itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from memory.graph.wording import EntityWitness, FactWording
from memory.store import documents, entities, provenance, relations
from memory.store.documents import Document


def entity_document_text(name: str, type_: str, summary: str) -> str:
    return f"{name} ({type_}): {summary}" if summary else f"{name} ({type_})"


def relation_document_text(fact: str) -> str:
    return fact


@dataclass(frozen=True)
class NewEntity:
    """An entity to create: ``embedding`` is what entity resolution compares (the name's),
    ``document_embedding`` the search document's (its full text; the name's when None);
    ``witnesses`` give each supporting episode's own wording."""

    name: str
    type: str
    summary: str
    embedding: Sequence[float]
    witnesses: Sequence[EntityWitness]
    document_embedding: Sequence[float] | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NewRelation:
    """An active relation to create, with each supporting episode's wording (the key)."""

    subject_id: int
    object_id: int
    predicate: str
    fact: str
    embedding: Sequence[float]
    wordings: Mapping[int, FactWording]
    valid_from: datetime | None = None


def _entity_links(entity_id: int, witnesses: Iterable[EntityWitness]) -> list[dict[str, Any]]:
    return [
        {
            "entity_id": entity_id,
            "episode_id": w.episode_id,
            "name": w.name,
            "type": w.type,
            "summary": w.summary,
            "summary_sources": sorted(w.summary_sources) if w.summary else [],
        }
        for w in witnesses
    ]


def _relation_links(relation_id: int, wordings: Mapping[int, FactWording]) -> list[dict[str, Any]]:
    return [
        {
            "relation_id": relation_id,
            "episode_id": episode_id,
            "fact": w.fact,
            "valid_from": w.valid_from,
            "sources": sorted(w.sources),
            "embedding": list(w.embedding) if w.embedding is not None else None,
        }
        for episode_id, w in wordings.items()
    ]


async def add_entity_support(
    session: AsyncSession, conversation_id: int, entity_id: int, witnesses: Iterable[EntityWitness]
) -> None:
    """Add episodes to P(e), each with its name form, type and summary contribution."""
    await add_entities_support(session, conversation_id, {entity_id: witnesses})


async def add_entities_support(
    session: AsyncSession, conversation_id: int, witnesses: Mapping[int, Iterable[EntityWitness]]
) -> None:
    """``add_entity_support`` for several entities (by id) in one statement."""
    rows = [row for entity_id, said in witnesses.items() for row in _entity_links(entity_id, said)]
    await provenance.add_entity_links(session, conversation_id, rows)


async def add_relation_support(
    session: AsyncSession, conversation_id: int, relation_id: int, wordings: Mapping[int, FactWording]
) -> None:
    """Add episodes to P(r), each (the key) with the wording its extraction gave."""
    await add_relations_support(session, conversation_id, {relation_id: wordings})


async def add_relations_support(
    session: AsyncSession, conversation_id: int, wordings: Mapping[int, Mapping[int, FactWording]]
) -> None:
    """``add_relation_support`` for several relations (by id) in one statement."""
    rows = [row for relation_id, said in wordings.items() for row in _relation_links(relation_id, said)]
    await provenance.add_relation_links(session, conversation_id, rows)


def same_wording(name: str, type_: str, summary: str, episode_ids: Iterable[int]) -> list[EntityWitness]:
    """Witnesses that all said the same (the summary drawn from all of them)."""
    episodes = frozenset(episode_ids)
    return [EntityWitness(e, name, type_, summary, episodes if summary else frozenset()) for e in episodes]


async def create_entities(session: AsyncSession, conversation_id: int, new: Sequence[NewEntity]) -> list[int]:
    """New entities with their provenance and search documents: one statement per table
    whatever their number. Returns their ids, in order."""
    if not new:
        return []
    ids = await entities.insert_entities(
        session,
        [
            {
                "conversation_id": conversation_id,
                "name": e.name,
                "type": e.type,
                "summary": e.summary,
                "embedding": list(e.embedding),
                "attributes": dict(e.attributes),
            }
            for e in new
        ],
    )
    pairs = list(zip(ids, new, strict=True))
    await add_entities_support(session, conversation_id, {i: e.witnesses for i, e in pairs})
    shown = [
        Document("entity", i, entity_document_text(e.name, e.type, e.summary), e.document_embedding or e.embedding)
        for i, e in pairs
    ]
    await documents.upsert_documents(session, conversation_id, shown)
    return ids


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
    """One new entity (``create_entities``); by default every episode said ``name``,
    ``type_`` and ``summary``."""
    said = list(witnesses) if witnesses is not None else same_wording(name, type_, summary, episode_ids)
    entity = NewEntity(name, type_, summary, embedding, said, document_embedding, attributes or {})
    return (await create_entities(session, conversation_id, [entity]))[0]


async def create_relations(session: AsyncSession, conversation_id: int, new: Sequence[NewRelation]) -> list[int]:
    """New active relations with their provenance and search documents: one statement
    per table whatever their number. Returns their ids, in order."""
    if not new:
        return []
    ids = await relations.insert_relations(
        session,
        [
            {
                "conversation_id": conversation_id,
                "subject_id": r.subject_id,
                "object_id": r.object_id,
                "predicate": r.predicate,
                "fact": r.fact,
                "valid_from": r.valid_from,
                "status": "active",
            }
            for r in new
        ],
    )
    pairs = list(zip(ids, new, strict=True))
    await add_relations_support(session, conversation_id, {i: r.wordings for i, r in pairs})
    shown = [Document("relation", i, relation_document_text(r.fact), r.embedding, r.valid_from) for i, r in pairs]
    await documents.upsert_documents(session, conversation_id, shown)
    return ids


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
    """One new active relation (``create_relations``); by default all of its episodes
    said ``fact`` together."""
    if wordings is None:
        together = frozenset(episode_ids)
        wordings = {e: FactWording(fact, valid_from, together, embedding) for e in together}
    relation = NewRelation(subject_id, object_id, predicate, fact, embedding, wordings, valid_from)
    return (await create_relations(session, conversation_id, [relation]))[0]


async def set_currency(
    session: AsyncSession,
    conversation_id: int,
    ids: Iterable[int],
    superseded_by: int | None = None,
    invalid_at: datetime | None = None,
) -> None:
    """Supersede relations (``superseded_by`` given: kept as history, with when and by
    what) or make them current again (a deletion took their superseder's support); their
    search documents follow, not current while superseded, so retrieval prefers the fact
    that replaced them. The one place a relation's status and its document's flag change."""
    ids = sorted(ids)
    if not ids:
        return
    status = "active" if superseded_by is None else "superseded"
    await relations.set_status(session, conversation_id, ids, status, superseded_by, invalid_at)
    await documents.set_current(session, conversation_id, "relation", ids, superseded_by is None)


async def supersede_relation(
    session: AsyncSession, conversation_id: int, relation_id: int, replaced_by: int, invalid_at: datetime | None
) -> None:
    """Keep the old relation as history, superseded by ``replaced_by`` (``set_currency``)."""
    await set_currency(session, conversation_id, [relation_id], replaced_by, invalid_at)


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
    name, type_ = await entities.set_summary(session, conversation_id, entity_id, summary, summary_episode_ids)
    await documents.upsert_documents(
        session,
        conversation_id,
        [Document("entity", entity_id, entity_document_text(name, type_, summary), document_embedding)],
    )
