"""Loading the part of the graph deleting a set of episodes can change (the rules'
SupplyGraph): one message's deletion, or a batch's (a person's messages, a retention
window) in one load.

Reads only: Algorithm 1 decides over what this loads (memory.forgetting.rules), the
deletion writes through memory.forgetting.apply, and the audit's dry run reports the
same decision without writing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, all_, any_, cast, func, select, union
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from memory.forgetting.rules import EntityFacts, RelationFacts, SupplyGraph
from memory.store.schema import CommunityMember, Entity, EntityProvenance, Relation, RelationProvenance


def _array(values: Iterable[int]) -> Any:
    return cast(sorted(values), ARRAY(BigInteger))


def _witness(link: Any, owner: Any, conversation_id: int, gone: Any, *, deleted: bool) -> Any:
    """One episode supporting the owner among the deleted (``deleted``) or beyond them,
    if any: the rules only ask whether either exists, and a hub entity may have
    thousands."""
    episode = link.class_.episode_id
    mine = link.class_.conversation_id == conversation_id
    which = episode == any_(gone) if deleted else episode != all_(gone)
    return select(episode).where(mine, link == owner, which).limit(1).scalar_subquery()


def _support(*witnesses: int | None) -> frozenset[int]:
    return frozenset(w for w in witnesses if w is not None)


async def _load_relations(session: AsyncSession, conversation_id: int, gone: Any, ids: Any) -> dict[int, RelationFacts]:
    link = RelationProvenance.relation_id
    rows = await session.execute(
        select(
            Relation.id,
            Relation.subject_id,
            Relation.object_id,
            Relation.status,
            Relation.superseded_by,
            _witness(link, Relation.id, conversation_id, gone, deleted=True),
            _witness(link, Relation.id, conversation_id, gone, deleted=False),
        ).where(Relation.conversation_id == conversation_id, Relation.id.in_(ids))
    )
    return {
        r: RelationFacts(s, o, _support(held, witness), by if status == "superseded" else None)
        for r, s, o, status, by, held, witness in rows
    }


def _ids(values: Iterable[int]) -> Any:
    return select(func.unnest(_array(values)))


@dataclass(frozen=True)
class Affected:
    graph: SupplyGraph


async def load_subgraph(session: AsyncSession, conversation_id: int, episode_ids: Collection[int]) -> Affected:
    """The part of the graph deleting ``episode_ids`` can change (see SupplyGraph).

    Each query names its rows through the provenance, endpoint and supersession indexes
    (unions of id sets, never an OR that would scan the conversation), so the cost
    follows what is affected, not the size of the memory.
    """
    gone = _array(episode_ids)
    holding_r = select(RelationProvenance.relation_id).where(
        RelationProvenance.conversation_id == conversation_id, RelationProvenance.episode_id == any_(gone)
    )
    superseded = select(Relation.id).where(Relation.conversation_id == conversation_id, Relation.superseded_by.in_(holding_r))
    relations = await _load_relations(session, conversation_id, gone, union(holding_r, superseded))
    holding_e = select(EntityProvenance.entity_id).where(
        EntityProvenance.conversation_id == conversation_id, EntityProvenance.episode_id == any_(gone)
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
                _witness(EntityProvenance.entity_id, Entity.id, conversation_id, gone, deleted=True),
                _witness(EntityProvenance.entity_id, Entity.id, conversation_id, gone, deleted=False),
                communities_of,
            ).where(Entity.conversation_id == conversation_id, Entity.id.in_(union(holding_e, _ids(endpoints))))
        )
    ).all()
    entities = {e: EntityFacts(_support(held, witness)) for e, held, witness, _ in rows}
    communities: dict[int, set[int]] = {}
    for entity_id, _, _, held_by in rows:
        for community_id in held_by or ():
            communities.setdefault(community_id, set()).add(entity_id)
    deleted = frozenset(episode_ids)
    unsupported = [e for e, facts in entities.items() if not facts.support - deleted]
    if unsupported:
        touching = union(
            select(Relation.id).where(Relation.conversation_id == conversation_id, Relation.subject_id.in_(unsupported)),
            select(Relation.id).where(Relation.conversation_id == conversation_id, Relation.object_id.in_(unsupported)),
        )
        more = await _load_relations(session, conversation_id, gone, touching)
        relations.update({r: rel for r, rel in more.items() if r not in relations})
    return Affected(SupplyGraph(relations, entities, {c: frozenset(m) for c, m in communities.items()}))
