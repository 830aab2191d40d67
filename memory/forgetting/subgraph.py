"""Loading the part of the graph deleting one episode can change (the rules' SupplyGraph).

Reads only: Algorithm 1 decides over what this loads (memory.forgetting.rules), the
deletion writes through memory.forgetting.apply, and the audit's dry run reports the
same decision without writing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, cast, exists, func, select, union
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from memory.forgetting.rules import EntityFacts, RelationFacts, SupplyGraph
from memory.store.schema import CommunityMember, Entity, EntityProvenance, Relation, RelationProvenance


def _witness(link: Any, owner: Any, conversation_id: int, episode_id: int) -> Any:
    """Another episode supporting the owner, if any: the rules only ask whether support
    beyond the deleted episode exists, and a hub entity may have thousands."""
    episode = link.class_.episode_id
    mine = link.class_.conversation_id == conversation_id
    return select(episode).where(mine, link == owner, episode != episode_id).limit(1).scalar_subquery()


def _holds(link: Any, owner: Any, conversation_id: int, episode_id: int) -> Any:
    return exists().where(link.class_.conversation_id == conversation_id, link == owner, link.class_.episode_id == episode_id)


def _support(holds: bool, witness: int | None, episode_id: int) -> frozenset[int]:
    return frozenset(([episode_id] if holds else []) + ([witness] if witness is not None else []))


async def _load_relations(session: AsyncSession, conversation_id: int, episode_id: int, ids: Any) -> dict[int, RelationFacts]:
    rows = await session.execute(
        select(
            Relation.id,
            Relation.subject_id,
            Relation.object_id,
            Relation.status,
            Relation.superseded_by,
            _holds(RelationProvenance.relation_id, Relation.id, conversation_id, episode_id),
            _witness(RelationProvenance.relation_id, Relation.id, conversation_id, episode_id),
        ).where(Relation.conversation_id == conversation_id, Relation.id.in_(ids))
    )
    return {
        r: RelationFacts(s, o, _support(holds, witness, episode_id), by if status == "superseded" else None)
        for r, s, o, status, by, holds, witness in rows
    }


def _ids(values: Iterable[int]) -> Any:
    return select(func.unnest(cast(sorted(values), ARRAY(BigInteger))))


@dataclass(frozen=True)
class Affected:
    graph: SupplyGraph


async def load_subgraph(session: AsyncSession, conversation_id: int, episode_id: int) -> Affected:
    """The part of the graph deleting ``episode_id`` can change (see SupplyGraph).

    Each query names its rows through the provenance, endpoint and supersession indexes
    (unions of id sets, never an OR that would scan the conversation), so the cost
    follows what is affected, not the size of the memory.
    """
    holding_r = select(RelationProvenance.relation_id).where(
        RelationProvenance.conversation_id == conversation_id, RelationProvenance.episode_id == episode_id
    )
    superseded = select(Relation.id).where(Relation.conversation_id == conversation_id, Relation.superseded_by.in_(holding_r))
    relations = await _load_relations(session, conversation_id, episode_id, union(holding_r, superseded))
    holding_e = select(EntityProvenance.entity_id).where(
        EntityProvenance.conversation_id == conversation_id, EntityProvenance.episode_id == episode_id
    )
    endpoints = {e for rel in relations.values() for e in rel.endpoints}
    communities_of = (
        select(func.array_agg(CommunityMember.community_id))
        .where(CommunityMember.conversation_id == conversation_id, CommunityMember.entity_id == Entity.id)
        .scalar_subquery()
    )
    rows = (
        await session.execute(
            select(
                Entity.id,
                _holds(EntityProvenance.entity_id, Entity.id, conversation_id, episode_id),
                _witness(EntityProvenance.entity_id, Entity.id, conversation_id, episode_id),
                communities_of,
            ).where(Entity.conversation_id == conversation_id, Entity.id.in_(union(holding_e, _ids(endpoints))))
        )
    ).all()
    entities = {e: EntityFacts(_support(holds, witness, episode_id)) for e, holds, witness, _ in rows}
    communities: dict[int, set[int]] = {}
    for entity_id, _, _, held_by in rows:
        for community_id in held_by or ():
            communities.setdefault(community_id, set()).add(entity_id)
    unsupported = [e for e, facts in entities.items() if not facts.support - {episode_id}]
    if unsupported:
        touching = union(
            select(Relation.id).where(Relation.conversation_id == conversation_id, Relation.subject_id.in_(unsupported)),
            select(Relation.id).where(Relation.conversation_id == conversation_id, Relation.object_id.in_(unsupported)),
        )
        more = await _load_relations(session, conversation_id, episode_id, touching)
        relations.update({r: rel for r, rel in more.items() if r not in relations})
    return Affected(SupplyGraph(relations, entities, {c: frozenset(m) for c, m in communities.items()}))
