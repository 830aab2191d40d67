"""Deletion under the comparison policies of the forgetting benchmark.

``stashbird`` is the service's own deletion (``memory.forgetting.deletion``); the
others (``episode-only``: drop the message and nothing else; ``cascade``: drop
everything the message touched) are decided over the conversation's whole graph with
full supports, then applied by the same writer, so that the benchmark compares the
rules and nothing else.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.core import Memory
from memory.forgetting.apply import apply_decision, remove_episode
from memory.forgetting.deletion import DeletionReport
from memory.forgetting.rules import POLICIES, EntityFacts, RelationFacts, SupplyGraph
from memory.store.locks import LockPurpose, lock_conversation
from memory.store.schema import (
    CommunityMember,
    Entity,
    EntityProvenance,
    Episode,
    Relation,
    RelationProvenance,
)

ForgettingPolicy = Literal["stashbird", "episode-only", "cascade"]


async def whole_graph(session: AsyncSession, conversation_id: int) -> SupplyGraph:
    """The conversation's whole graph with full supports (the comparison policies need it)."""
    cid = conversation_id
    relation_support: dict[int, set[int]] = {}
    rows = await session.execute(
        select(RelationProvenance.relation_id, RelationProvenance.episode_id).where(RelationProvenance.conversation_id == cid)
    )
    for r, e in rows:
        relation_support.setdefault(r, set()).add(e)
    entity_support: dict[int, set[int]] = {}
    rows = await session.execute(
        select(EntityProvenance.entity_id, EntityProvenance.episode_id).where(EntityProvenance.conversation_id == cid)
    )
    for n, e in rows:
        entity_support.setdefault(n, set()).add(e)
    relations = {
        r: RelationFacts(s, o, frozenset(relation_support.get(r, ())), by if status == "superseded" else None)
        for r, s, o, status, by in await session.execute(
            select(Relation.id, Relation.subject_id, Relation.object_id, Relation.status, Relation.superseded_by).where(
                Relation.conversation_id == cid
            )
        )
    }
    entities = {
        e: EntityFacts(frozenset(entity_support.get(e, ())))
        for e in (await session.execute(select(Entity.id).where(Entity.conversation_id == cid))).scalars()
    }
    members: dict[int, set[int]] = {}
    rows = await session.execute(
        select(CommunityMember.community_id, CommunityMember.entity_id).where(CommunityMember.conversation_id == cid)
    )
    for c, e in rows:
        members.setdefault(c, set()).add(e)
    return SupplyGraph(relations, entities, {c: frozenset(m) for c, m in members.items()})


async def delete_by_policy(
    memory: Memory, conversation_id: int, platform_message_id: str, policy: ForgettingPolicy
) -> DeletionReport:
    """Delete one stored message by a comparison policy (not ``stashbird``), in one
    transaction under the conversation's chain and graph locks. The report holds the
    chain and the documents removed, not the retraction's details."""
    async with memory._sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.CHAIN, LockPurpose.GRAPH)
        episode = (
            await session.execute(
                select(Episode).where(
                    Episode.conversation_id == conversation_id, Episode.platform_message_id == platform_message_id
                )
            )
        ).scalar_one()
        decision = POLICIES[policy](await whole_graph(session, conversation_id), episode.id)
        documents = await apply_decision(session, conversation_id, decision)
        chain, episode_documents = await remove_episode(session, conversation_id, episode)
    report = DeletionReport(conversation_id, platform_message_id, "deleted", episode.id, chain)
    report.retraction.documents_removed = documents + episode_documents
    return report
