"""Re-rendering the records a deleted or edited message still leaves standing, in the
deleting transaction (the rule is memory.graph.wording's; this module loads and plans).

For the relations and entities that lost the episode but keep other support, each record
is rendered from the witnesses that decide it, leaving out the episode and every wording
drawn from it (``plan_rewording``: reads only, so the audit's dry run can report it);
then those wordings are cleared (they may quote it) and each record whose text changed
is rewritten with its search document (``write_rewording``, through the writers of
provenance, entities, relations and search documents in memory.store). A changed text
needs a vector: a relation takes its chosen witness's stored sentence vector; an entity
whose summary went keeps its stored name vector (as its document's); anything else new
(a structural fact, another name form or summary) is embedded here, under the locks, in
one call. That happens only when the deleted message
was the one whose words a record showed and the others said it differently.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from memory.graph.wording import (
    EntityText,
    EntityWitness,
    FactWording,
    RelationWitness,
    render_entity,
    render_fact,
    structural_fact,
)
from memory.graph.writes import entity_document_text, relation_document_text
from memory.models.embedder import Embedder
from memory.store import documents, entities, provenance, relations
from memory.store.documents import Document
from memory.store.ledger import Usage, record_usage

_IDS = (
    bindparam("ids", type_=ARRAY(BigInteger)),
    bindparam("episodes", type_=ARRAY(BigInteger)),
    bindparam("cid", type_=BigInteger),
)
# The only witnesses render_entity reads (tests/pure/test_wording.py shows they suffice): the
# earliest, and the latest with a summary, through the (entity_id, episode_id) indexes,
# since a hub entity may have thousands.
ENTITY_WITNESSES = text(
    """SELECT e.id, e.name, e.type, e.summary, e.embedding::text, w.episode_id, w.name, w.type, w.summary, w.summary_sources
       FROM entities e CROSS JOIN LATERAL (
           (SELECT p.episode_id, p.name, p.type,
                   CASE WHEN p.summary_sources && :episodes THEN '' ELSE p.summary END AS summary,
                   CASE WHEN p.summary_sources && :episodes THEN '{}' ELSE p.summary_sources END AS summary_sources
            FROM entity_provenance p WHERE p.conversation_id = :cid AND p.entity_id = e.id AND p.episode_id <> ALL(:episodes)
            ORDER BY p.episode_id LIMIT 1)
           UNION
           (SELECT p.episode_id, p.name, p.type, p.summary, p.summary_sources
            FROM entity_provenance p WHERE p.conversation_id = :cid AND p.entity_id = e.id AND p.episode_id <> ALL(:episodes)
              AND p.summary <> ''
              AND NOT p.summary_sources && :episodes
            ORDER BY p.episode_id DESC LIMIT 1)
       ) w
       WHERE e.conversation_id = :cid AND e.id = ANY(:ids)"""
).bindparams(*_IDS)
RELATION_WITNESSES = text(
    """SELECT r.id, r.fact, r.valid_from, r.status, r.predicate, s.id, s.name, o.id, o.name,
              w.episode_id, w.fact, w.valid_from, w.sources, w.embedding::text
       FROM relations r JOIN entities s ON s.conversation_id = :cid AND s.id = r.subject_id
       JOIN entities o ON o.conversation_id = :cid AND o.id = r.object_id
       LEFT JOIN LATERAL (
           SELECT * FROM relation_provenance p
           WHERE p.conversation_id = :cid AND p.relation_id = r.id AND p.episode_id <> ALL(:episodes) AND p.fact <> ''
             AND NOT p.sources && :episodes
           ORDER BY p.episode_id LIMIT 1
       ) w ON true
       WHERE r.conversation_id = :cid AND r.id = ANY(:ids)"""
).bindparams(*_IDS)


@dataclass(frozen=True)
class EntityChange:
    entity_id: int
    rendered: EntityText
    name_vector: list[float] | None  # the stored one, when the name stays

    @property
    def document_text(self) -> str:
        return entity_document_text(self.rendered.name, self.rendered.type, self.rendered.summary)


@dataclass(frozen=True)
class RelationChange:
    relation_id: int
    fact: str
    wording: FactWording | None  # the witness wording shown; None: rendered from structure
    is_current: bool


def _vector(value: str | None) -> list[float] | None:
    return None if value is None else [float(x) for x in value.strip("[]").split(",")]


@dataclass(frozen=True)
class RewordPlan:
    """The records that lost the episode and stay, and those whose text changes, with
    what each will show."""

    kept_entities: tuple[int, ...]
    kept_relations: tuple[int, ...]
    entities: tuple[EntityChange, ...] = ()
    relations: tuple[RelationChange, ...] = ()


async def plan_rewording(
    session: AsyncSession, conversation_id: int, episode_ids: Collection[int], relations: Sequence[int], entities: Sequence[int]
) -> RewordPlan:
    """Render ``entities`` and ``relations`` (a structural fact uses the entities' new
    names) from their witnesses without ``episode_ids`` and what they contributed. Reads only."""
    values = {"cid": conversation_id, "episodes": sorted(episode_ids)}
    entity_changes = await _entity_changes(session, {**values, "ids": sorted(entities)}) if entities else []
    renamed = {c.entity_id: c.rendered.name for c in entity_changes}
    relation_changes = await _relation_changes(session, {**values, "ids": sorted(relations)}, renamed) if relations else []
    return RewordPlan(tuple(sorted(entities)), tuple(sorted(relations)), tuple(entity_changes), tuple(relation_changes))


async def write_rewording(
    session: AsyncSession, conversation_id: int, episode_ids: Collection[int], plan: RewordPlan, embedder: Embedder
) -> None:
    """Clear every wording drawn from the episodes and write the planned renderings,
    embedding the texts no stored vector covers."""
    await provenance.clear_wordings_from(session, conversation_id, episode_ids, plan.kept_entities, plan.kept_relations)
    needed = [c.rendered.name for c in plan.entities if c.name_vector is None]
    needed += [c.document_text for c in plan.entities if c.rendered.summary]
    needed += [c.fact for c in plan.relations if c.wording is None or c.wording.embedding is None]
    vectors = await _embed(session, conversation_id, embedder, list(dict.fromkeys(needed)))
    shown = []
    for change in plan.entities:
        name_vector = change.name_vector or vectors[change.rendered.name]
        rendered = change.rendered
        await entities.set_rendering(
            session,
            conversation_id,
            change.entity_id,
            name=rendered.name,
            type_=rendered.type,
            summary=rendered.summary,
            embedding=name_vector,
            attributes={"summary_episode_ids": sorted(rendered.summary_sources)} if rendered.summary else {},
        )
        document_vector = vectors.get(change.document_text, name_vector)
        shown.append(Document("entity", change.entity_id, change.document_text, document_vector))
    for fact in plan.relations:
        valid_from = fact.wording.valid_from if fact.wording else None
        stored = fact.wording.embedding if fact.wording else None
        await relations.set_fact(session, conversation_id, fact.relation_id, fact.fact, valid_from)
        shown.append(
            Document(
                "relation",
                fact.relation_id,
                relation_document_text(fact.fact),
                stored if stored is not None else vectors[fact.fact],
                valid_from,
                fact.is_current,
            )
        )
    await documents.upsert_documents(session, conversation_id, shown)


async def _embed(session: AsyncSession, conversation_id: int, embedder: Embedder, texts: list[str]) -> dict[str, list[float]]:
    if not texts:
        return {}
    batch = await embedder.embed(texts)
    await record_usage(session, conversation_id, Usage("ingestion", "embed_graph", batch.model, 1, batch.prompt_tokens))
    return dict(zip(texts, batch.vectors, strict=True))


async def _entity_changes(session: AsyncSession, values: dict[str, Any]) -> list[EntityChange]:
    """The entities whose rendered text differs from what they show."""
    witnesses: dict[int, list[EntityWitness]] = {}
    current: dict[int, tuple[str, str, str, str | None]] = {}
    for row in await session.execute(ENTITY_WITNESSES, values):
        entity_id, name, type_, summary, vector, episode, w_name, w_type, w_summary, w_sources = row
        current[entity_id] = (name, type_, summary, vector)
        witnesses.setdefault(entity_id, []).append(EntityWitness(episode, w_name, w_type, w_summary, frozenset(w_sources or ())))
    changes = []
    for entity_id, found in witnesses.items():
        rendered = render_entity(found)
        name, type_, summary, vector = current[entity_id]
        if rendered is not None and (rendered.name, rendered.type, rendered.summary) != (name, type_, summary):
            changes.append(EntityChange(entity_id, rendered, _vector(vector) if rendered.name == name else None))
    return changes


async def _relation_changes(session: AsyncSession, values: dict[str, Any], renamed: dict[int, str]) -> list[RelationChange]:
    """The relations whose rendered text or valid-from differs from what they show."""
    changes = []
    for row in await session.execute(RELATION_WITNESSES, values):
        (
            relation_id,
            fact,
            valid_from,
            status,
            predicate,
            subject_id,
            subject,
            object_id,
            object_,
            episode,
            w_fact,
            w_from,
            w_sources,
            w_vector,
        ) = row
        witnesses = (
            []
            if episode is None
            else [RelationWitness(episode, FactWording(w_fact, w_from, frozenset(w_sources or ()), _vector(w_vector)))]
        )
        chosen = render_fact(witnesses)
        wording = chosen.wording if chosen else None
        new_fact = (
            wording.fact
            if wording
            else structural_fact(renamed.get(subject_id, subject), predicate, renamed.get(object_id, object_))
        )
        if (new_fact, wording.valid_from if wording else None) != (fact, valid_from):
            changes.append(RelationChange(relation_id, new_fact, wording, status == "active"))
    return changes
