"""The background work each conversation is waiting for, and which conversations are due.

``conversation_locks.due_at`` (migration 0016) holds, per conversation and writer lock,
when its work should next be looked at: every transaction that takes the conversation's
CHAIN or GRAPH lock (every writer) sets it to now (memory.store.locks), and the scheduler's
discovery (``read_due``) reads only the rows due by now, through a partial index, the
longest waiting first (by its oldest waiting message, else its mark), then
clears each one with nothing left or moves it to when its waiting messages become due
(``defer_due``, only where no writer marked it again meanwhile). A tick therefore costs what is due, not what exists: a quiet
conversation's rows have no ``due_at`` and are outside the index.

Every figure is computed per conversation (subqueries filtered by its id, joined on
``conversation_id`` throughout), so under Citus each query runs on every shard at once
(or on one, for one conversation) with nothing to join across shards. Unconsolidated
tokens are an estimate (UTF-8 bytes / 4): counting exactly would read every waiting
message into Python.

With a retention window (the conversation's own, else the store's default), each row also
says when its oldest message passes the window (``retention_due``): discovery defers a
conversation to then at the latest, so the retention job finds it on time without any
look at conversations with nothing due (memory/privacy/retention.py).

Each row says how much its most used dirty community was used lately, since when its
oldest dirty one is dirty, and how many of its dirty ones are warm (not cold:
memory/communities/use.py): community regeneration wants only a conversation with a warm
one, the most used first; a conversation whose dirty communities are all cold is not
looked at again until a write (or an answer that uses one of them) marks it due.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.communities.use import decayed_sql, warm_sql
from memory.privacy.retention import expires_at, window
from memory.store.conversations import ConversationRef
from memory.store.locks import WRITERS, defer_marks

# ``{key}``: the conversation each figure is of (its id for one conversation: a correlated
# subquery is not pinned by the outer query's filter, and Citus would not route it);
# ``{use}``: a community's decayed use now (memory/communities/use.py).
_SELECT = """
SELECT d.conversation_id, c.platform, c.workspace_id, c.channel_id,
       w.messages, w.tokens, w.oldest, w.newest,
       u.dirty,
       coalesce(k.summary_dirty, false) AS summary_dirty,
       coalesce((SELECT max(id) FROM entities x WHERE x.conversation_id = {key}), 0) > coalesce(s.seen_entity_id, 0)
       OR coalesce((SELECT max(id) FROM relations r WHERE r.conversation_id = {key}), 0)
          > coalesce(s.seen_relation_id, 0) AS graph_changed,
       d.due_at, d.purposes, d.marks,
       (SELECT min(o.message_time) FROM episodes o WHERE o.conversation_id = {key}) AS oldest_said,
       rw.conversation_id IS NOT NULL AS own_window, rw.days,
       u.dirty_use, u.dirty_since, u.warm
FROM (
    SELECT conversation_id, max(due_at) AS due_at,
           array_agg(purpose ORDER BY purpose) AS purposes, array_agg(due_at ORDER BY purpose) AS marks
    FROM conversation_locks WHERE {marked} GROUP BY conversation_id
) d
LEFT JOIN conversations c ON c.id = {key}
LEFT JOIN checkpoints k ON k.conversation_id = {key}
LEFT JOIN community_state s ON s.conversation_id = {key}
LEFT JOIN conversation_retention rw ON rw.conversation_id = {key}
CROSS JOIN LATERAL (
    SELECT count(*) AS messages, coalesce(sum(octet_length(e.text)), 0) / 4 AS tokens,
           min(e.ingested_at) AS oldest, max(e.ingested_at) AS newest
    FROM episodes e
    WHERE e.conversation_id = {key}
      AND (e.id > coalesce(k.last_episode_id, 0) OR e.id = ANY(coalesce(k.pending_episode_ids, '{{}}')))
) w
CROSS JOIN LATERAL (
    SELECT count(*) AS dirty, coalesce(max({use}), 0) AS dirty_use, min(m.updated_at) AS dirty_since,
           count(*) FILTER (WHERE {warm}) AS warm
    FROM communities m WHERE m.conversation_id = {key} AND m.dirty
) u
"""
_USE = decayed_sql("m.used_score", "m.used_at")
_WARM = warm_sql("m.used_score", "m.used_at")
_WRITTEN = f"purpose IN ({', '.join(str(int(p)) for p in WRITERS)})"
_ONE = _SELECT.format(use=_USE, warm=_WARM, key=":conversation", marked=f"conversation_id = :conversation AND {_WRITTEN}")
_ALL = (
    "/* multi-shard: backlog-listing */\n"
    + _SELECT.format(use=_USE, warm=_WARM, key="d.conversation_id", marked=_WRITTEN)
    + "ORDER BY d.conversation_id"
)
_DUE = (
    "/* multi-shard: due-backlog */\n"
    + _SELECT.format(use=_USE, warm=_WARM, key="d.conversation_id", marked=f"due_at <= now() AND {_WRITTEN}")
    + "ORDER BY coalesce(w.oldest, d.due_at), d.conversation_id LIMIT :limit"
)
# Every conversation with a waiting message has a mark (a write sets it; discovery clears
# it only when nothing waits, else moves it to when the messages become due), so the
# marked rows are where every waiting message is: the total costs what waits, not what exists.
_WAITING = """/* multi-shard: waiting-backlog */
SELECT coalesce(sum(w.messages), 0), coalesce(sum(CASE WHEN w.messages > 0 THEN 1 ELSE 0 END), 0), min(w.oldest)
FROM (SELECT DISTINCT conversation_id FROM conversation_locks WHERE due_at IS NOT NULL AND {written}) d
LEFT JOIN checkpoints k ON k.conversation_id = d.conversation_id
CROSS JOIN LATERAL (
    SELECT count(*) AS messages, min(e.ingested_at) AS oldest
    FROM episodes e
    WHERE e.conversation_id = d.conversation_id
      AND (e.id > coalesce(k.last_episode_id, 0) OR e.id = ANY(coalesce(k.pending_episode_ids, '{{}}')))
) w
""".format(written=_WRITTEN)


@dataclass(frozen=True)
class Backlog:
    """One conversation's waiting background work."""

    conversation_id: int
    conversation: ConversationRef
    unconsolidated_messages: int
    unconsolidated_tokens: int  # estimate
    oldest_unconsolidated: datetime | None  # when the oldest waiting message arrived
    newest_unconsolidated: datetime | None
    dirty_communities: int
    summary_dirty: bool
    graph_changed: bool  # entities or relations the community pass has not seen yet
    due_at: datetime | None = None  # when discovery is to look at it next (None: nothing marked)
    marks: tuple[tuple[int, datetime | None], ...] = ()  # (lock purpose, its due_at) as read
    retention_due: datetime | None = None  # when its oldest message passes its retention window (None: never)
    dirty_use: float = 0.0  # the most used dirty community's use now (memory/communities/use.py)
    dirty_since: datetime | None = None  # when its oldest dirty community became dirty
    warm_communities: int = 0  # dirty ones not cold: what community regeneration is due for

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "conversation": str(self.conversation)}


@dataclass(frozen=True)
class Waiting:
    """Every conversation's consolidation backlog in one figure: what the scheduler's
    backlog shedding and the service's health judge by."""

    messages: int  # stored, not yet consolidated (new, or edited since)
    conversations: int  # with at least one such message
    oldest: datetime | None  # when the oldest of them arrived

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _backlogs(rows: Any, default_days: int | None) -> list[Backlog]:
    """A conversation that was dropped has no row in ``conversations`` (its lock rows stay:
    memory.store.locks); it is left out (``read_due`` clears its mark). ``default_days``:
    the store's default retention window."""
    found = []
    for row in rows:
        cid, platform, workspace, channel, messages, tokens, oldest, newest, dirty, summary_dirty, changed = row[:11]
        due_at, purposes, marks, oldest_said, own_window, days, dirty_use, dirty_since, warm = row[11:]
        applies = window((days,) if own_window else None, default_days)
        if platform is None:
            continue
        found.append(
            Backlog(
                cid,
                ConversationRef(platform, workspace, channel),
                int(messages),
                int(tokens),
                oldest,
                newest,
                int(dirty),
                bool(summary_dirty),
                bool(changed),
                due_at,
                tuple(zip(purposes, marks, strict=True)),
                expires_at(oldest_said, applies.days),
                float(dirty_use),
                dirty_since,
                int(warm),
            )
        )
    return found


async def read_backlog(
    session: AsyncSession, conversation_id: int | None = None, default_days: int | None = None
) -> list[Backlog]:
    """Every conversation that was ever written to (an operator's listing), or one."""
    if conversation_id is None:
        return _backlogs(await session.execute(text(_ALL)), default_days)
    return _backlogs(await session.execute(text(_ONE), {"conversation": conversation_id}), default_days)


async def read_due(session: AsyncSession, limit: int, default_days: int | None = None) -> list[Backlog]:
    """The conversations due by now, the longest waiting first (by the oldest waiting
    message, else by the mark: a busy conversation's mark is always new), at most ``limit``; the marks of
    dropped conversations are cleared on the way (committed)."""
    rows = (await session.execute(text(_DUE), {"limit": limit})).all()
    for row in rows:
        if row[1] is None:
            await defer_marks(session, row[0], list(zip(row[12], row[13], strict=True)), None)
    await session.commit()
    return _backlogs(rows, default_days)


async def read_waiting(session: AsyncSession) -> Waiting:
    """The messages waiting for consolidation in all conversations (see ``_WAITING``)."""
    messages, conversations, oldest = (await session.execute(text(_WAITING))).one()
    return Waiting(int(messages), int(conversations), oldest)


async def defer_due(session: AsyncSession, item: Backlog, next_at: datetime | None) -> bool:
    """Look at ``item`` next at ``next_at`` (None: not until a writer marks it), unless a
    writer marked it since it was read (each lock row apart); whether any row was moved."""
    return await defer_marks(session, item.conversation_id, list(item.marks), next_at)
