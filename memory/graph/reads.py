"""What the memory holds about a conversation: its relations with the messages that
support them (the seed of the admin audit: what is remembered, and why)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memory.store.schema import Entity, Episode, Relation, RelationProvenance


async def list_facts(session: AsyncSession, conversation_id: int, include_superseded: bool = True) -> list[dict[str, object]]:
    """Relations in creation order, each with its status and supporting message ids (none
    for a relation that lost its support: the store must never hold one, and a check
    must be able to see it if it did)."""
    subject, obj = aliased(Entity), aliased(Entity)
    query = (
        select(
            Relation.id,
            subject.name,
            Relation.predicate,
            obj.name,
            Relation.fact,
            Relation.status,
            func.array_agg(Episode.platform_message_id),
        )
        .join(subject, (subject.conversation_id == conversation_id) & (subject.id == Relation.subject_id))
        .join(obj, (obj.conversation_id == conversation_id) & (obj.id == Relation.object_id))
        .outerjoin(
            RelationProvenance,
            (RelationProvenance.conversation_id == conversation_id) & (RelationProvenance.relation_id == Relation.id),
        )
        .outerjoin(Episode, (Episode.conversation_id == conversation_id) & (Episode.id == RelationProvenance.episode_id))
        .where(Relation.conversation_id == conversation_id)
        .group_by(Relation.conversation_id, Relation.id, subject.name, obj.name)
        .order_by(Relation.id)
    )
    if not include_superseded:
        query = query.where(Relation.status == "active")
    return [
        {
            "id": relation_id,
            "subject": subject_name,
            "predicate": predicate,
            "object": object_name,
            "fact": fact,
            "status": status,
            "messages": sorted(m for m in messages if m is not None),
        }
        for relation_id, subject_name, predicate, object_name, fact, status, messages in await session.execute(query)
    ]
