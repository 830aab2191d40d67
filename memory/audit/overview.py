"""The whole of one conversation's memory for the audit report (entities with their
communities, every fact with its history and messages, the deletion log, usage by day),
and the list of conversations an operator can audit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import Date, cast, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.audit.facts import FactView, load_facts
from memory.audit.forgotten import Forgotten, deletion_log
from memory.audit.stats import Stats, conversation_stats
from memory.store.conversations import ConversationRef
from memory.store.schema import (
    Community,
    CommunityMember,
    Conversation,
    Entity,
    EntityProvenance,
    Episode,
    Relation,
    UsageEntry,
)

# A report draws at most this many entities (the most mentioned) and lists the facts
# among them; beyond it a graph drawing stops being readable anyway.
REPORT_ENTITIES = 1500
REPORT_DELETIONS = 500


@dataclass(frozen=True)
class Node:
    id: int
    name: str
    type: str
    is_anchor: bool
    community: int | None
    mentions: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CommunityView:
    id: int
    label: str
    dirty: bool
    members: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class DailyUsage:
    day: date
    phase: str
    calls: int
    tokens: int

    def as_dict(self) -> dict[str, Any]:
        return {"day": self.day.isoformat(), "phase": self.phase, "calls": self.calls, "tokens": self.tokens}


@dataclass(frozen=True)
class Overview:
    stats: Stats
    entities: tuple[Node, ...]
    facts: tuple[FactView, ...]
    communities: tuple[CommunityView, ...]
    deletions: tuple[Forgotten, ...]
    usage_by_day: tuple[DailyUsage, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "stats": self.stats.as_dict(),
            "entities": [e.as_dict() for e in self.entities],
            "facts": [f.as_dict() for f in self.facts],
            "communities": [c.as_dict() for c in self.communities],
            "deletions": [d.as_dict() for d in self.deletions],
            "usage_by_day": [u.as_dict() for u in self.usage_by_day],
        }


async def _nodes(session: AsyncSession, conversation_id: int) -> list[Node]:
    mentions = (
        select(func.count())
        .where(EntityProvenance.conversation_id == conversation_id, EntityProvenance.entity_id == Entity.id)
        .scalar_subquery()
    )
    community = (
        select(func.min(CommunityMember.community_id))
        .where(CommunityMember.conversation_id == conversation_id, CommunityMember.entity_id == Entity.id)
        .scalar_subquery()
    )
    rows = await session.execute(
        select(Entity.id, Entity.name, Entity.type, Entity.is_anchor, community, mentions)
        .where(Entity.conversation_id == conversation_id)
        .order_by(mentions.desc(), Entity.id)
        .limit(REPORT_ENTITIES)
    )
    return [Node(e, name, type_, anchor, c, int(m)) for e, name, type_, anchor, c, m in rows]


async def overview(
    session: AsyncSession, conversation: ConversationRef, conversation_id: int, default_days: int | None = None
) -> Overview:
    nodes = await _nodes(session, conversation_id)
    drawn = [n.id for n in nodes]
    relation_ids = (
        await session.execute(
            select(Relation.id).where(
                Relation.conversation_id == conversation_id, Relation.subject_id.in_(drawn), Relation.object_id.in_(drawn)
            )
        )
    ).scalars()
    facts = await load_facts(session, conversation, conversation_id, relation_ids)
    members = func.count(CommunityMember.entity_id)
    communities = await session.execute(
        select(Community.id, Community.label, Community.dirty, members)
        .outerjoin(
            CommunityMember, (CommunityMember.community_id == Community.id) & (CommunityMember.conversation_id == conversation_id)
        )
        .where(Community.conversation_id == conversation_id)
        .group_by(Community.conversation_id, Community.id)
        .order_by(Community.id)
    )
    day = cast(UsageEntry.created_at, Date)
    usage = await session.execute(
        select(
            day, UsageEntry.phase, func.sum(UsageEntry.calls), func.sum(UsageEntry.prompt_tokens + UsageEntry.completion_tokens)
        )
        .where(UsageEntry.conversation_id == conversation_id)
        .group_by(day, UsageEntry.phase)
        .order_by(day, UsageEntry.phase)
    )
    return Overview(
        await conversation_stats(session, conversation, conversation_id, default_days),
        tuple(nodes),
        tuple(sorted(facts.values(), key=lambda f: f.id)),
        tuple(CommunityView(c, "" if dirty else label, dirty, int(n)) for c, label, dirty, n in communities),
        tuple(await deletion_log(session, conversation_id, None, REPORT_DELETIONS)),
        tuple(DailyUsage(d, phase, int(calls), int(tokens)) for d, phase, calls, tokens in usage),
    )


@dataclass(frozen=True)
class ConversationSummary:
    conversation: str
    created_at: datetime
    messages: int
    last_message_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "created_at": self.created_at.isoformat(),
            "messages": self.messages,
            "last_message_at": self.last_message_at.isoformat() if self.last_message_at else None,
        }


async def conversation_summaries(session: AsyncSession) -> list[ConversationSummary]:
    """Every conversation, each counted on its own rows (the listing is the one audit
    query that spans conversations, and only the operator or a configured admin runs it)."""
    # Counted per conversation in a subquery grouped by it, joined on it: a correlated
    # subquery from the conversations (a Citus reference table) is refused by Citus.
    counts = (
        select(Episode.conversation_id, func.count().label("messages"), func.max(Episode.message_time).label("last"))
        .group_by(Episode.conversation_id)
        .subquery()
    )
    rows = await session.execute(
        select(
            Conversation.platform,
            Conversation.workspace_id,
            Conversation.channel_id,
            Conversation.created_at,
            func.coalesce(counts.c.messages, 0),
            counts.c.last,
        )
        .outerjoin(counts, counts.c.conversation_id == Conversation.id)
        .prefix_with("/* multi-shard: audit-conversations */")
        .order_by(Conversation.id)
    )
    return [
        ConversationSummary(str(ConversationRef(platform, workspace, channel)), created, int(count), last_at)
        for platform, workspace, channel, created, count, last_at in rows
    ]
