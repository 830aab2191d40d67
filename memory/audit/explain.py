"""``explain(answer_id)``: a stored answer's trace: the question, its sub-queries and
resolved times, each evidence item with its scores and the messages it showed, the model
usage.

Evidence is shown as it stands now: a record or message deleted since is reported as
removed, never shown. A withdrawn answer (a message it drew on was deleted or edited)
says so and names that message's platform id and when, from the deletion log, never
its text: the stored answer text was replaced when it was withdrawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, cast, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from memory.audit.forgotten import ACTIONS, forgotten_messages
from memory.audit.messages import MessageRef, message_columns, message_ref
from memory.errors import ValidationError
from memory.forgetting.apply import ANSWER_WITHDRAWN
from memory.store.conversations import ConversationRef
from memory.store.schema import EPISODE_SPEAKER, AnswerTrace, AuditEntry, Community, Entity, Episode, Relation, Speaker

TEXT_OF: dict[str, tuple[Any, Any]] = {
    "entity": (Entity, Entity.name),
    "relation": (Relation, Relation.fact),
    "community": (Community, case((Community.dirty, ""), else_=Community.label)),  # a dirty one's label is stale
}


@dataclass(frozen=True)
class EvidenceView:
    label: str
    kind: str  # episode | entity | relation | community
    ref_id: int
    score: float
    similarity: float
    text_rank: float
    text: str | None  # as it stands now; None when the record was removed since
    messages: tuple[MessageRef, ...]  # the stored messages the item showed
    messages_removed: int  # messages it showed that were deleted since

    def as_dict(self) -> dict[str, Any]:
        return {**{k: v for k, v in self.__dict__.items() if k != "messages"}, "messages": [m.as_dict() for m in self.messages]}


@dataclass(frozen=True)
class Withdrawal:
    at: datetime
    action: str  # delete | edit
    platform_message_id: str

    def as_dict(self) -> dict[str, Any]:
        return {"at": self.at.isoformat(), "action": self.action, "platform_message_id": self.platform_message_id}


@dataclass(frozen=True)
class Explanation:
    conversation: str
    answer_id: int
    asked_at: datetime
    asked_by: str
    question: str
    sub_queries: tuple[str, ...]
    retrieval: dict[str, Any]  # question date, mode, resolved time ranges, cited labels
    answer: str | None  # None when withdrawn
    withdrawn_because: tuple[Withdrawal, ...]
    evidence: tuple[EvidenceView, ...]
    usage: dict[str, Any]

    @property
    def withdrawn(self) -> bool:
        return self.answer is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "answer_id": self.answer_id,
            "asked_at": self.asked_at.isoformat(),
            "asked_by": self.asked_by,
            "question": self.question,
            "sub_queries": list(self.sub_queries),
            "retrieval": self.retrieval,
            "answer": self.answer,
            "withdrawn": self.withdrawn,
            "withdrawn_because": [w.as_dict() for w in self.withdrawn_because],
            "evidence": [e.as_dict() for e in self.evidence],
            "usage": self.usage,
        }


async def _withdrawals(session: AsyncSession, conversation_id: int, answer_id: int) -> tuple[Withdrawal, ...]:
    rows = await session.execute(
        select(AuditEntry.created_at, AuditEntry.action, AuditEntry.details)
        .where(
            AuditEntry.conversation_id == conversation_id,
            AuditEntry.action.in_(list(ACTIONS)),
            AuditEntry.details["ids"]["answers_withdrawn"].contains(cast([answer_id], JSONB)),
        )
        .order_by(AuditEntry.created_at)
    )
    return tuple(Withdrawal(at, ACTIONS[action], ", ".join(forgotten_messages(details))) for at, action, details in rows)


async def _texts(session: AsyncSession, conversation_id: int, items: list[dict[str, Any]]) -> dict[tuple[str, int], str]:
    found: dict[tuple[str, int], str] = {}
    for kind, (model, column) in TEXT_OF.items():
        ids = [int(i["ref_id"]) for i in items if i.get("kind") == kind]
        if ids:
            rows = await session.execute(
                select(model.id, column).where(model.conversation_id == conversation_id, model.id.in_(ids))
            )
            found.update({(kind, r): t for r, t in rows})
    return found


async def _messages(
    session: AsyncSession, conversation: ConversationRef, conversation_id: int, items: list[dict[str, Any]]
) -> dict[int, MessageRef]:
    ids = sorted({int(e) for i in items for e in i.get("episode_ids", [])})
    rows = await session.execute(
        select(Episode.id, *message_columns())
        .join(Speaker, EPISODE_SPEAKER)
        .where(Episode.conversation_id == conversation_id, Episode.id.in_(ids))
    )
    return {row[0]: message_ref(conversation, row[1:]) for row in rows}


def _evidence(item: dict[str, Any], texts: dict[tuple[str, int], str], messages: dict[int, MessageRef]) -> EvidenceView:
    kind, ref_id = str(item["kind"]), int(item["ref_id"])
    shown = [int(e) for e in item.get("episode_ids", [])]
    text = messages[ref_id].text if kind == "episode" and ref_id in messages else texts.get((kind, ref_id))
    return EvidenceView(
        str(item["label"]),
        kind,
        ref_id,
        float(item["score"]),
        float(item["similarity"]),
        float(item["text_rank"]),
        text,
        tuple(messages[e] for e in shown if e in messages),
        sum(1 for e in shown if e not in messages),
    )


async def explain(session: AsyncSession, conversation: ConversationRef, conversation_id: int, answer_id: int) -> Explanation:
    trace = (
        await session.execute(
            select(AnswerTrace).where(AnswerTrace.conversation_id == conversation_id, AnswerTrace.id == answer_id)
        )
    ).scalar_one_or_none()
    if trace is None:
        raise ValidationError("answer", f"no answer {answer_id} in conversation {str(conversation)!r}")
    retrieval = dict(trace.retrieval or {})
    items = list(retrieval.pop("evidence", []))
    texts = await _texts(session, conversation_id, items)
    messages = await _messages(session, conversation, conversation_id, items)
    withdrawn = trace.answer == ANSWER_WITHDRAWN
    return Explanation(
        str(conversation),
        trace.id,
        trace.created_at,
        trace.principal,
        trace.question,
        tuple(trace.sub_queries or []),
        retrieval,
        None if withdrawn else trace.answer,
        await _withdrawals(session, conversation_id, answer_id) if withdrawn else (),
        tuple(_evidence(item, texts, messages) for item in items),
        dict(trace.usage or {}),
    )
