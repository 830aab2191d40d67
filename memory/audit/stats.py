"""``stats()``: a conversation's memory in numbers, in one round trip (each count an
index scan filtered by the conversation), plus usage by phase from the ledger, the
retention window that applies and how many people opted out of its workspace."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.audit.forgotten import RETENTION_BATCH_ACTION
from memory.consolidation.run import unconsolidated_count
from memory.privacy.retention import Retention, window
from memory.store.conversations import ConversationRef
from memory.store.participants import count_opted_out, read_retention
from memory.store.schema import (
    AnswerTrace,
    AuditEntry,
    Checkpoint,
    Community,
    Entity,
    Episode,
    Relation,
    Speaker,
    UsageEntry,
)


@dataclass(frozen=True)
class PhaseUsage:
    phase: str
    calls: int
    prompt_tokens: int
    completion_tokens: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


@dataclass(frozen=True)
class Stats:
    conversation: str
    messages: int
    speakers: int
    entities: int
    anchors: int
    relations_active: int
    relations_superseded: int
    communities: int
    communities_dirty: int
    answers: int
    deletions: int
    waiting: int  # messages not consolidated yet (new, or edited since)
    consolidated_at: datetime | None  # the checkpoint's last save
    usage: tuple[PhaseUsage, ...]
    retention: Retention = Retention(None, "none")  # the window that applies
    opted_out: int = 0  # people opted out of the conversation's workspace

    def as_dict(self) -> dict[str, Any]:
        fields = {k: v for k, v in self.__dict__.items() if k not in ("usage", "consolidated_at", "retention")}
        return {
            **fields,
            "retention_days": self.retention.days,
            "retention_source": self.retention.source,
            "consolidated_at": self.consolidated_at.isoformat() if self.consolidated_at else None,
            "usage": [u.as_dict() for u in self.usage],
        }


COUNTED = (
    "messages",
    "speakers",
    "entities",
    "anchors",
    "relations_active",
    "relations_superseded",
    "communities",
    "communities_dirty",
    "answers",
    "deletions",
)


def _count(model: Any, conversation_id: int, *conditions: Any) -> Any:
    return select(func.count()).select_from(model).where(model.conversation_id == conversation_id, *conditions).scalar_subquery()


def _deleted_messages(conversation_id: int) -> Any:
    """Messages forgotten: one per deletion row, a retention batch's each."""
    per_row = case((AuditEntry.action == RETENTION_BATCH_ACTION, func.jsonb_array_length(AuditEntry.details["deleted"])), else_=1)
    return (
        select(func.coalesce(func.sum(per_row), 0))
        .where(
            AuditEntry.conversation_id == conversation_id,
            AuditEntry.action.in_(["delete_episode", RETENTION_BATCH_ACTION]),
        )
        .scalar_subquery()
    )


async def conversation_stats(
    session: AsyncSession, conversation: ConversationRef, conversation_id: int, default_days: int | None = None
) -> Stats:
    """``default_days``: the store's default retention window."""
    cid = conversation_id
    counts = (
        await session.execute(
            select(
                _count(Episode, cid),
                _count(Speaker, cid),
                _count(Entity, cid),
                _count(Entity, cid, Entity.is_anchor.is_(True)),
                _count(Relation, cid, Relation.status == "active"),
                _count(Relation, cid, Relation.status == "superseded"),
                _count(Community, cid),
                _count(Community, cid, Community.dirty.is_(True)),
                _count(AnswerTrace, cid),
                _deleted_messages(cid),
                select(Checkpoint.updated_at).where(Checkpoint.conversation_id == cid).scalar_subquery(),
            )
        )
    ).one()
    usage = await session.execute(
        select(
            UsageEntry.phase,
            func.sum(UsageEntry.calls),
            func.sum(UsageEntry.prompt_tokens),
            func.sum(UsageEntry.completion_tokens),
        )
        .where(UsageEntry.conversation_id == cid)
        .group_by(UsageEntry.phase)
        .order_by(UsageEntry.phase)
    )
    numbers = dict(zip(COUNTED, (int(c) for c in counts[: len(COUNTED)]), strict=True))
    own = await read_retention(session, cid)
    return Stats(
        conversation=str(conversation),
        **numbers,
        waiting=await unconsolidated_count(session, cid),
        consolidated_at=counts[len(COUNTED)],
        usage=tuple(PhaseUsage(phase, int(calls), int(prompt), int(completion)) for phase, calls, prompt, completion in usage),
        retention=window(None if own is None else (own.days,), default_days),
        opted_out=await count_opted_out(session, conversation.workspace),
    )
