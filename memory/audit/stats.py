"""``stats()``: a conversation's memory in numbers, in one round trip (each count an
index scan filtered by the conversation), plus usage by phase from the ledger."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.consolidation.run import unconsolidated_count
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

    def as_dict(self) -> dict[str, Any]:
        fields = {k: v for k, v in self.__dict__.items() if k not in ("usage", "consolidated_at")}
        return {
            **fields,
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


async def conversation_stats(session: AsyncSession, conversation: str, conversation_id: int) -> Stats:
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
                _count(AuditEntry, cid, AuditEntry.action == "delete_episode"),
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
    return Stats(
        conversation=conversation,
        **numbers,
        waiting=await unconsolidated_count(session, cid),
        consolidated_at=counts[len(COUNTED)],
        usage=tuple(PhaseUsage(phase, int(calls), int(prompt), int(completion)) for phase, calls, prompt, completion in usage),
    )
