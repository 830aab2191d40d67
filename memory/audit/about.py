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
from sqlalchemy import Text, cast, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.audit.facts import FactView, load_facts
from memory.core import Memory
from memory.models.embedder import EmbeddingBatch
from memory.store.conversations import ConversationRef
from memory.store.ledger import Usage, record_usage
from memory.store.schema import Entity, EntityProvenance

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


async def _names(memory: Memory, conversation_id: int) -> dict[int, str]:
    """The conversation's entity names. They come as one text (an index-only scan,
    ``ix_entities_names``): 20K rows of a large conversation cost the client more than
    the matching."""
    async with memory.sessions() as session:
        listed = (
            await session.execute(
                select(func.string_agg(cast(Entity.id, Text) + "\t" + func.replace(Entity.name, "\n", " "), "\n")).where(
                    Entity.conversation_id == conversation_id, Entity.is_anchor.is_(False)
                )
            )
        ).scalar()
    return {int(key): value for key, _, value in (line.partition("\t") for line in (listed or "").split("\n") if line)}


def _name_scores(names: dict[int, str], name: str) -> dict[int, float]:
    found = process.extract(
        name, names, scorer=fuzz.WRatio, processor=utils.default_process, limit=MATCHES, score_cutoff=NAME_SCORE
    )
    return {key: float(score) for _, score, key in found}


async def _matched_by_name(memory: Memory, conversation_id: int, name: str) -> dict[int, float]:
    """Matching runs in a thread, so the vector scan proceeds in the database meanwhile."""
    return await asyncio.to_thread(_name_scores, await _names(memory, conversation_id), name)


async def _matched_by_meaning(memory: Memory, conversation_id: int, embedded: EmbeddingBatch) -> dict[int, float]:
    distance = Entity.embedding.cosine_distance(list(embedded.vectors[0]))
    async with memory.sessions.begin() as session:
        await record_usage(session, conversation_id, Usage.embedding("audit", "embed_query", embedded))
        rows = await session.execute(
            select(Entity.id, 1 - distance)
            .where(Entity.conversation_id == conversation_id, Entity.embedding.is_not(None))
            .order_by(distance)
            .limit(MATCHES)
        )
        return {e: float(similarity) for e, similarity in rows}


# Per entity and end (subject or object): its newest current relations and its newest
# others, each at most RELATIONS_PER_ENTITY, by index (a speaker is the end of thousands
# of relations; ranking them all cost more than the rest of ``about``); and how many it has.
_SHOWN = text(
    """
    SELECT e.id, r.id, r.current
    FROM unnest(CAST(:ids AS bigint[])) AS e(id)
    CROSS JOIN LATERAL (
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
    ) AS r
    """
)
_COUNTED = text(
    """
    SELECT e.id,
           (SELECT count(*) FROM relations WHERE conversation_id = :conversation AND subject_id = e.id)
         + (SELECT count(*) FROM relations
            WHERE conversation_id = :conversation AND object_id = e.id AND subject_id <> e.id)
    FROM unnest(CAST(:ids AS bigint[])) AS e(id)
    """
)


def shown_relations(candidates: Iterable[tuple[int, int, bool]], limit: int) -> dict[int, list[int]]:
    """Each entity's relations to show from ``(entity, relation, current)`` candidates:
    current first, newest first, each once (a relation of an entity with itself comes
    from both ends), at most ``limit``."""
    ranked: dict[int, dict[int, bool]] = {}
    for entity_id, relation_id, current in candidates:
        ranked.setdefault(entity_id, {})[relation_id] = current
    return {
        entity_id: sorted(relations, key=lambda r: (not relations[r], -r))[:limit]
        for entity_id, relations in ranked.items()
    }


async def _relations(session: AsyncSession, conversation_id: int, ids: list[int]) -> dict[int, tuple[list[int], int]]:
    """Each entity's relations to show and how many it has."""
    arguments = {"ids": ids, "conversation": conversation_id, "limit": RELATIONS_PER_ENTITY}
    shown = shown_relations(
        ((e, r, current) for e, r, current in await session.execute(_SHOWN, arguments)), RELATIONS_PER_ENTITY
    )
    return {
        entity_id: (shown.get(entity_id, []), int(total))
        for entity_id, total in await session.execute(_COUNTED, arguments)
        if total
    }


async def about(
    memory: Memory, conversation: ConversationRef, conversation_id: int, name: str, embedded: EmbeddingBatch
) -> About:
    """``embedded`` is the name's vector (the caller embeds it while checking the request)."""
    query = name.strip()
    by_name, by_meaning = await asyncio.gather(
        _matched_by_name(memory, conversation_id, query), _matched_by_meaning(memory, conversation_id, embedded)
    )
    matches = best_matches(by_name, by_meaning, MATCHES)
    async with memory.sessions() as session:
        ids = [e for e, _ in matches]
        mentions = (
            select(func.count())
            .where(EntityProvenance.conversation_id == conversation_id, EntityProvenance.entity_id == Entity.id)
            .scalar_subquery()
        )
        entities = {
            row[0]: row
            for row in await session.execute(
                select(Entity.id, Entity.name, Entity.type, Entity.summary, Entity.is_anchor, mentions).where(
                    Entity.conversation_id == conversation_id, Entity.id.in_(ids)
                )
            )
        }
        shown = await _relations(session, conversation_id, ids)
        facts = await load_facts(session, conversation, conversation_id, (r for rs, _ in shown.values() for r in rs))
    views = []
    for entity_id, score in matches:
        if entity_id not in entities:  # removed by a deletion meanwhile
            continue
        _, entity_name, type_, summary, is_anchor, mentioned = entities[entity_id]
        relation_ids, total = shown.get(entity_id, ([], 0))
        relations = [facts[r] for r in relation_ids if r in facts]
        views.append(
            EntityView(
                entity_id,
                entity_name,
                type_,
                summary,
                is_anchor,
                score,
                int(mentioned),
                tuple(f for f in relations if f.status == "active"),
                tuple(f for f in relations if f.status != "active"),
                total,
            )
        )
    return About(str(conversation), query, tuple(views))
