"""``provenance(message_id)``: everything derived from one message, and a dry run of its
deletion.

The dry run is the deletion's own planning step (memory.forgetting.plan
``plan_retraction``: the same loader and the same rules, ``decide_deletion``), run in a
read-only snapshot that is rolled back, so what it predicts is what ``forget`` would
report now: removed, kept, anchored, restored, dirtied, withdrawn.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memory.audit.messages import MessageRef, message_columns, message_ref
from memory.core import Memory
from memory.errors import ValidationError
from memory.forgetting.plan import Retraction, documents_to_remove, plan_retraction
from memory.store.conversations import ConversationRef
from memory.store.schema import (
    EPISODE_SPEAKER,
    CommunityMember,
    Entity,
    EntityProvenance,
    Episode,
    Relation,
    RelationProvenance,
    Speaker,
    Tombstone,
)


@dataclass(frozen=True)
class Derived:
    """A record the message supports, and how many other messages support it."""

    kind: str  # entity | relation
    id: int
    text: str  # the entity's name or the relation's fact
    status: str  # entity: entity | anchor; relation: active | superseded
    other_support: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Provenance:
    conversation: str
    platform_message_id: str
    status: str  # stored | deleted (a tombstone: nothing is derived from it any more)
    message: MessageRef | None = None
    entities: tuple[Derived, ...] = ()
    relations: tuple[Derived, ...] = ()
    communities: tuple[int, ...] = ()  # holding an entity it supports
    answers: tuple[int, ...] = ()  # answer traces whose evidence showed it
    in_summary: bool = False
    context_entries: int = 0  # rolling-context entries that drew on it
    dry_run: Retraction = field(default_factory=Retraction)

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "platform_message_id": self.platform_message_id,
            "status": self.status,
            "message": self.message.as_dict() if self.message else None,
            "entities": [d.as_dict() for d in self.entities],
            "relations": [d.as_dict() for d in self.relations],
            "communities": list(self.communities),
            "answers": list(self.answers),
            "in_summary": self.in_summary,
            "context_entries": self.context_entries,
            "dry_run": {**asdict(self.dry_run), "counts": self.dry_run.counts()},
        }


async def _derived(session: AsyncSession, conversation_id: int, episode_id: int, kind: str) -> tuple[Derived, ...]:
    link: Any = EntityProvenance if kind == "entity" else RelationProvenance
    owner: Any = link.entity_id if kind == "entity" else link.relation_id
    model: Any = Entity if kind == "entity" else Relation
    other = aliased(link)
    others = (
        select(func.count())
        .where(other.conversation_id == conversation_id, getattr(other, owner.key) == model.id, other.episode_id != episode_id)
        .scalar_subquery()
    )
    label, status = (Entity.name, Entity.is_anchor) if kind == "entity" else (Relation.fact, Relation.status)
    rows = await session.execute(
        select(model.id, label, status, others)
        .join(link, owner == model.id)
        .where(link.conversation_id == conversation_id, link.episode_id == episode_id, model.conversation_id == conversation_id)
        .order_by(model.id)
    )
    return tuple(
        Derived(kind, record_id, label_text, ("anchor" if state else "entity") if kind == "entity" else state, int(count))
        for record_id, label_text, state, count in rows
    )


async def provenance(memory: Memory, conversation: ConversationRef, conversation_id: int, message_id: str) -> Provenance:
    message_id = message_id.strip()
    async with memory._sessions() as session:  # never committed: the dry run writes nothing
        await session.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))
        row = (
            await session.execute(
                select(Episode.id, *message_columns())
                .join(Speaker, EPISODE_SPEAKER)
                .where(Episode.conversation_id == conversation_id, Episode.platform_message_id == message_id)
            )
        ).one_or_none()
        if row is None:
            deleted = await session.scalar(
                select(func.count())
                .select_from(Tombstone)
                .where(Tombstone.conversation_id == conversation_id, Tombstone.platform_message_id == message_id)
            )
            if not deleted:
                raise ValidationError("message", f"no message {message_id!r} in conversation {str(conversation)!r}")
            return Provenance(str(conversation), message_id, "deleted")
        episode_id = row[0]
        entities = await _derived(session, conversation_id, episode_id, "entity")
        communities = (
            await session.execute(
                select(CommunityMember.community_id)
                .where(
                    CommunityMember.conversation_id == conversation_id,
                    CommunityMember.entity_id.in_([e.id for e in entities]),
                )
                .distinct()
                .order_by(CommunityMember.community_id)
            )
        ).scalars()
        plan = await plan_retraction(session, conversation_id, episode_id, for_update=False)
        dry_run = plan.retraction()
        dry_run.documents_removed = await documents_to_remove(session, conversation_id, plan.decision, [episode_id])
        context = [entry for _, entry in plan.stored_context.values()]
        return Provenance(
            str(conversation),
            message_id,
            "stored",
            message_ref(conversation, row[1:]),
            entities,
            await _derived(session, conversation_id, episode_id, "relation"),
            tuple(communities),
            plan.answers,
            plan.summary_drew_on,
            sum(1 for entry in context if episode_id in entry.get("episode_ids", [])),
            dry_run,
        )
