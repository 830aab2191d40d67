"""``about(name)``: the entities a name means, and what the memory holds about each.

An entity matches by its name (rapidfuzz WRatio, so "Mel" finds "Melanie" and a
misspelling still finds its entity) or by meaning (cosine of the name's embedding and the
entity's, an exact scan of the conversation's entities: the vector index serves all
conversations, and filtering its nearest few by conversation could lose them all).
Anchors have no name left to match; they show up as the ends of relations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz, process, utils
from sqlalchemy import bindparam, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.audit.facts import FactView, load_facts
from memory.core import Memory
from memory.models.embedder import EmbeddingBatch
from memory.store.conversations import ConversationRef
from memory.store.ledger import Usage, record_usage
from memory.store.schema import Entity

MATCHES = 5
NAME_SCORE = 80  # rapidfuzz WRatio, 0-100
SIMILARITY = 0.6  # cosine of the name vectors
# Relations shown per entity (current first, newest first); how many there are is given.
RELATIONS_PER_ENTITY = 40


@dataclass(frozen=True)
class EntityView:
    id: int
    name: str
    type: str
    summary: str
    is_anchor: bool
    match: float  # the better of name score / 100 and cosine similarity
    mentions: int  # messages that mention it
    current: tuple[FactView, ...]
    superseded: tuple[FactView, ...]
    relation_count: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "type": self.type,
            "summary": self.summary,
            "is_anchor": self.is_anchor,
            "match": round(self.match, 3),
            "mentions": self.mentions,
            "relation_count": self.relation_count,
            "current": [f.as_dict() for f in self.current],
            "superseded": [f.as_dict() for f in self.superseded],
        }


@dataclass(frozen=True)
class About:
    conversation: str
    query: str
    entities: tuple[EntityView, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"conversation": self.conversation, "query": self.query, "entities": [e.as_dict() for e in self.entities]}


def best_matches(name_scores: dict[int, float], similarities: dict[int, float], limit: int) -> list[tuple[int, float]]:
    """Entities matching by name or by meaning, best first. Pure."""
    scores = {e: s / 100 for e, s in name_scores.items() if s >= NAME_SCORE}
    for e, similarity in similarities.items():
        if similarity >= SIMILARITY:
            scores[e] = max(scores.get(e, 0.0), similarity)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]


# The conversation's entity ids and names, in the same order. The names come as one text
# by an index-only scan (``ix_entities_names``, which ``NOT is_anchor`` matches and
# ``is_anchor IS false`` does not): 20K rows of a large conversation cost the client more
# than the matching.
_NAMES = select(func.array_agg(Entity.id), func.string_agg(func.replace(Entity.name, "\n", " "), "\n")).where(
    Entity.conversation_id == bindparam("conversation"), ~Entity.is_anchor
)
# The nearest entities by cosine. The distance is the one output column the rows are
# ordered by, so the database computes it once per entity, not once more for the order.
_DISTANCE = Entity.embedding.cosine_distance(bindparam("vector", type_=Entity.embedding.type)).label("distance")
_NEAREST = (
    select(Entity.id, _DISTANCE)
    .where(Entity.conversation_id == bindparam("conversation"), Entity.embedding.is_not(None))
    .order_by(_DISTANCE)
    .limit(MATCHES)
)


def _name_scores(ids: list[int], names: list[str], name: str) -> dict[int, float]:
    found = process.extract(
        name, names, scorer=fuzz.WRatio, processor=utils.default_process, limit=MATCHES, score_cutoff=NAME_SCORE
    )
    return {ids[index]: float(score) for _, score, index in found}


async def _matched_by_name(session: AsyncSession, conversation_id: int, name: str) -> dict[int, float]:
    """Matching runs in a thread, so the vector scan proceeds in the database meanwhile."""
    ids, listed = (await session.execute(_NAMES, {"conversation": conversation_id})).one()
    return await asyncio.to_thread(_name_scores, ids or [], listed.split("\n") if ids else [], name)


async def _matched_by_meaning(memory: Memory, conversation_id: int, embedded: EmbeddingBatch) -> dict[int, float]:
    async with memory._sessions.begin() as session:
        await record_usage(session, conversation_id, Usage.embedding("audit", "embed_query", embedded))
        rows = await session.execute(_NEAREST, {"conversation": conversation_id, "vector": embedded.vectors[0]})
        return {e: 1 - float(d) for e, d in rows}


# The matched entities, each in one row: what it is, how many messages mention it, how
# many relations it has, and the candidates for the relations to show (``shown_relations``):
# per end (subject or object), its newest current relations and its newest others, each at
# most RELATIONS_PER_ENTITY, by index (a speaker is the end of thousands of relations;
# ranking them all cost more than the rest of ``about``). One statement, not one per part.
_ENTITIES = text(
    """
    SELECT e.id, e.name, e.type, e.summary, e.is_anchor,
           (SELECT count(*) FROM entity_provenance
            WHERE conversation_id = :conversation AND entity_id = e.id),
           (SELECT count(*) FROM relations WHERE conversation_id = :conversation AND subject_id = e.id)
         + (SELECT count(*) FROM relations
            WHERE conversation_id = :conversation AND object_id = e.id AND subject_id <> e.id),
           r.ids, r.current
    FROM entities AS e
    CROSS JOIN LATERAL (
        SELECT array_agg(c.id) AS ids, array_agg(c.current) AS current FROM (
            (SELECT id, true AS current FROM relations
             WHERE conversation_id = :conversation AND subject_id = e.id AND status = 'active'
             ORDER BY id DESC LIMIT :limit)
            UNION ALL
            (SELECT id, true FROM relations
             WHERE conversation_id = :conversation AND object_id = e.id AND status = 'active'
             ORDER BY id DESC LIMIT :limit)
            UNION ALL
            (SELECT id, false FROM relations
             WHERE conversation_id = :conversation AND subject_id = e.id AND status <> 'active'
             ORDER BY id DESC LIMIT :limit)
            UNION ALL
            (SELECT id, false FROM relations
             WHERE conversation_id = :conversation AND object_id = e.id AND status <> 'active'
             ORDER BY id DESC LIMIT :limit)
        ) AS c
    ) AS r
    WHERE e.conversation_id = :conversation AND e.id = ANY(CAST(:ids AS bigint[]))
    """
)


@dataclass(frozen=True)
class _Entity:
    """A matched entity's row, with the relations to show."""

    name: str
    type: str
    summary: str
    is_anchor: bool
    mentions: int
    relation_count: int
    shown: list[int]


def shown_relations(candidates: Iterable[tuple[int, int, bool]], limit: int) -> dict[int, list[int]]:
    """Each entity's relations to show from ``(entity, relation, current)`` candidates:
    current first, newest first, each once (a relation of an entity with itself comes
    from both ends), at most ``limit``."""
    ranked: dict[int, dict[int, bool]] = {}
    for entity_id, relation_id, current in candidates:
        ranked.setdefault(entity_id, {})[relation_id] = current
    return {entity_id: sorted(relations, key=lambda r: (not relations[r], -r))[:limit] for entity_id, relations in ranked.items()}


async def _entities(session: AsyncSession, conversation_id: int, ids: list[int]) -> dict[int, _Entity]:
    """The entities ``ids`` that still exist, by id."""
    if not ids:
        return {}
    rows = await session.execute(_ENTITIES, {"ids": ids, "conversation": conversation_id, "limit": RELATIONS_PER_ENTITY})
    found = {}
    for entity_id, name, type_, summary, is_anchor, mentions, total, relations, current in rows:
        candidates = ((entity_id, r, c) for r, c in zip(relations or (), current or (), strict=True))
        shown = shown_relations(candidates, RELATIONS_PER_ENTITY).get(entity_id, [])
        found[entity_id] = _Entity(name, type_, summary, is_anchor, int(mentions), int(total), shown)
    return found


async def about(
    memory: Memory, conversation: ConversationRef, conversation_id: int, name: str, embedded: EmbeddingBatch
) -> About:
    """``embedded`` is the name's vector (the caller embeds it while checking the request)."""
    query = name.strip()
    async with memory._sessions() as session:  # the name list's session serves the rest too
        by_name, by_meaning = await asyncio.gather(
            _matched_by_name(session, conversation_id, query), _matched_by_meaning(memory, conversation_id, embedded)
        )
        matches = best_matches(by_name, by_meaning, MATCHES)
        entities = await _entities(session, conversation_id, [e for e, _ in matches])
        facts = await load_facts(session, conversation, conversation_id, (r for e in entities.values() for r in e.shown))
    views = []
    for entity_id, score in matches:
        if entity_id not in entities:  # removed by a deletion meanwhile
            continue
        entity = entities[entity_id]
        relations = [facts[r] for r in entity.shown if r in facts]
        views.append(
            EntityView(
                entity_id,
                entity.name,
                entity.type,
                entity.summary,
                entity.is_anchor,
                score,
                entity.mentions,
                tuple(f for f in relations if f.status == "active"),
                tuple(f for f in relations if f.status != "active"),
                entity.relation_count,
            )
        )
    return About(str(conversation), query, tuple(views))
