"""The background work each conversation is waiting for, in one read.

The scheduler's discovery query, and the only kind of query that spans conversations:
every figure inside it is computed per conversation (lateral subqueries filtered by
its id), so it splits by conversation when sharded. Unconsolidated tokens are an
estimate (UTF-8 bytes / 4): counting exactly would read every waiting message into
Python on every tick.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.conversations import ConversationRef

_BACKLOG = """
/* multi-shard: consolidation-backlog */
SELECT c.id, c.platform, c.workspace_id, c.channel_id,
       w.messages, w.tokens, w.oldest, w.newest,
       (SELECT count(*) FROM communities m WHERE m.conversation_id = c.id AND m.dirty) AS dirty,
       coalesce(k.summary_dirty, false) AS summary_dirty,
       g.top_entity > coalesce(s.seen_entity_id, 0) OR g.top_relation > coalesce(s.seen_relation_id, 0) AS graph_changed
FROM conversations c
LEFT JOIN checkpoints k ON k.conversation_id = c.id
LEFT JOIN community_state s ON s.conversation_id = c.id
CROSS JOIN LATERAL (
    SELECT count(*) AS messages, coalesce(sum(octet_length(e.text)), 0) / 4 AS tokens,
           min(e.ingested_at) AS oldest, max(e.ingested_at) AS newest
    FROM episodes e
    WHERE e.conversation_id = c.id
      AND (e.id > coalesce(k.last_episode_id, 0) OR e.id = ANY(coalesce(k.pending_episode_ids, '{}')))
) w
CROSS JOIN LATERAL (
    SELECT coalesce((SELECT max(id) FROM entities x WHERE x.conversation_id = c.id), 0) AS top_entity,
           coalesce((SELECT max(id) FROM relations r WHERE r.conversation_id = c.id), 0) AS top_relation
) g
WHERE CAST(:conversation AS bigint) IS NULL OR c.id = :conversation
ORDER BY c.id
"""


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

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "conversation": str(self.conversation)}


async def read_backlog(session: AsyncSession, conversation_id: int | None = None) -> list[Backlog]:
    rows = await session.execute(text(_BACKLOG), {"conversation": conversation_id})
    return [
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
        )
        for cid, platform, workspace, channel, messages, tokens, oldest, newest, dirty, summary_dirty, changed in rows
    ]
