"""Relations as the audit shows them: both ends by name, status and history (what
superseded a fact, and when), and the messages that support it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memory.audit.messages import MessageRef, supporting_messages
from memory.store.conversations import ConversationRef
from memory.store.schema import Entity, Relation, RelationProvenance

# Messages shown per fact; the count of all of them is given with them.
MESSAGES_PER_FACT = 5


@dataclass(frozen=True)
class FactView:
    id: int
    subject_id: int
    subject: str
    predicate: str
    object_id: int
    object: str
    fact: str
    status: str  # active | superseded
    valid_from: datetime | None
    created_at: datetime
    superseded_at: datetime | None  # when it stopped holding (its invalid_at, else when its successor came)
    superseded_by: int | None
    superseded_by_fact: str | None
    messages: tuple[MessageRef, ...]
    message_count: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "subject_id": self.subject_id,
            "subject": self.subject,
            "predicate": self.predicate,
            "object_id": self.object_id,
            "object": self.object,
            "fact": self.fact,
            "status": self.status,
            "valid_from": _iso(self.valid_from),
            "created_at": self.created_at.isoformat(),
            "superseded_at": _iso(self.superseded_at),
            "superseded_by": self.superseded_by,
            "superseded_by_fact": self.superseded_by_fact,
            "message_count": self.message_count,
            "messages": [m.as_dict() for m in self.messages],
        }


ROW_FIELDS = tuple(f.name for f in fields(FactView))[:-2]  # all but the messages


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


async def load_facts(
    session: AsyncSession, conversation: ConversationRef, conversation_id: int, relation_ids: Iterable[int]
) -> dict[int, FactView]:
    """The relations ``relation_ids`` of the conversation, with their supporting messages."""
    ids = sorted(set(relation_ids))
    if not ids:
        return {}
    subject, obj, successor = aliased(Entity), aliased(Entity), aliased(Relation)
    rows = (
        await session.execute(
            select(
                Relation.id,
                Relation.subject_id,
                subject.name,
                Relation.predicate,
                Relation.object_id,
                obj.name,
                Relation.fact,
                Relation.status,
                Relation.valid_from,
                Relation.created_at,
                func.coalesce(Relation.invalid_at, successor.created_at),
                Relation.superseded_by,
                successor.fact,
            )
            .join(subject, subject.id == Relation.subject_id)
            .join(obj, obj.id == Relation.object_id)
            .outerjoin(successor, (successor.id == Relation.superseded_by) & (successor.conversation_id == conversation_id))
            .where(
                Relation.conversation_id == conversation_id,
                subject.conversation_id == conversation_id,
                obj.conversation_id == conversation_id,
                Relation.id.in_(ids),
            )
        )
    ).all()
    support = await supporting_messages(
        session, conversation, conversation_id, RelationProvenance.relation_id, ids, MESSAGES_PER_FACT
    )
    return {row[0]: _fact(row, *support.get(row[0], ([], 0))) for row in rows}


def _fact(row: Any, messages: list[MessageRef], count: int) -> FactView:
    """A FactView from ``load_facts``'s row (its columns are the view's fields, in order)."""
    values = dict(zip(ROW_FIELDS, row, strict=True))
    if values["status"] != "superseded":
        values["superseded_at"] = None
    return FactView(**values, messages=tuple(messages), message_count=count)
