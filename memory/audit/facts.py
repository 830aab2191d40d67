"""Relations as the audit shows them: both ends by name, status and history (what
superseded a fact, and when), and the messages that support it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.audit.messages import MessageRef, message_ref
from memory.store.conversations import ConversationRef

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


# The relations with both ends by name, their successor's fact and time, and per relation
# its first MESSAGES_PER_FACT supporting messages in time order (as parallel arrays) and how
# many there are: one statement, one row per relation. Every table names the conversation
# itself, the lateral one included (see memory.store.citus).
_FACTS = text(
    """
    SELECT r.id, r.subject_id, s.name, r.predicate, r.object_id, o.name, r.fact, r.status, r.valid_from,
           r.created_at, coalesce(r.invalid_at, n.created_at), r.superseded_by, n.fact,
           m.total, m.message_ids, m.speakers, m.roles, m.times, m.texts
    FROM relations AS r
    JOIN entities AS s ON s.conversation_id = :conversation AND s.id = r.subject_id
    JOIN entities AS o ON o.conversation_id = :conversation AND o.id = r.object_id
    LEFT JOIN relations AS n ON n.conversation_id = :conversation AND n.id = r.superseded_by
    CROSS JOIN LATERAL (
        SELECT max(x.total) AS total,
               array_agg(x.platform_message_id ORDER BY x.message_time, x.id) AS message_ids,
               array_agg(x.display_name ORDER BY x.message_time, x.id) AS speakers,
               array_agg(x.role ORDER BY x.message_time, x.id) AS roles,
               array_agg(x.message_time ORDER BY x.message_time, x.id) AS times,
               array_agg(x.text ORDER BY x.message_time, x.id) AS texts
        FROM (
            SELECT e.id, e.platform_message_id, sp.display_name, e.role, e.message_time, e.text,
                   count(*) OVER () AS total
            FROM relation_provenance AS p
            JOIN episodes AS e ON e.conversation_id = :conversation AND e.id = p.episode_id
            JOIN speakers AS sp ON sp.conversation_id = :conversation AND sp.id = e.speaker_id
            WHERE p.conversation_id = :conversation AND p.relation_id = r.id
            ORDER BY e.message_time, e.id
            LIMIT :messages
        ) AS x
    ) AS m
    WHERE r.conversation_id = :conversation AND r.id = ANY(CAST(:ids AS bigint[]))
    """
)


async def load_facts(
    session: AsyncSession, conversation: ConversationRef, conversation_id: int, relation_ids: Iterable[int]
) -> dict[int, FactView]:
    """The relations ``relation_ids`` of the conversation, with their supporting messages."""
    ids = sorted(set(relation_ids))
    if not ids:
        return {}
    arguments = {"conversation": conversation_id, "ids": ids, "messages": MESSAGES_PER_FACT}
    return {row[0]: _fact(conversation, row) for row in await session.execute(_FACTS, arguments)}


def _fact(conversation: ConversationRef, row: Any) -> FactView:
    """A FactView from a ``_FACTS`` row: the view's fields in order, then the count of
    supporting messages and their columns as arrays (none when it has none)."""
    values = dict(zip(ROW_FIELDS, row[: len(ROW_FIELDS)], strict=True))
    if values["status"] != "superseded":
        values["superseded_at"] = None
    total, *columns = row[len(ROW_FIELDS) :]
    messages = tuple(message_ref(conversation, m) for m in zip(*(c or () for c in columns), strict=True))
    return FactView(**values, messages=messages, message_count=int(total or 0))
