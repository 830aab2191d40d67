"""The vector an episode is searched by: its own plus a share of the previous message's.

A chat message is often half of an exchange: "Been doing it for 3 years." answers "How
long have you been doing yoga?" and shares none of its words. Searching each message by
``own + share * previous own`` (cosine, so no normalisation is needed) lets the answer
be found by what was asked. On the LoCoMo retrieval benchmark this found as much
evidence as embedding the two messages' text together (80.7% against 80.6% of questions
with all their evidence, one point more than own vectors alone) at no extra embedding
cost: the vector is a sum of stored vectors, recomputed in SQL whenever the chain
changes (an insertion before a message, the deletion or edit of the message before it),
so a deleted message leaves nothing of itself in its successor's vector.

The own vector is ``episodes.embedding``, so that search documents stay as narrow as
they were (two vectors in one row would push one of them out of line, and every exact
scan would fetch it back). An episode without one (bulk benchmark rows) keeps the
searched vector it has.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

# Chosen on LoCoMo (0.5 and 1.0 tried; 0.5 found as much evidence with fewer tokens). A
# change needs a migration that recomputes every episode's vector, as 0002 does.
PREVIOUS_SHARE = 0.5
_REFRESH = text(
    "UPDATE search_documents d SET embedding = CASE WHEN p.embedding IS NULL THEN e.embedding "
    "ELSE e.embedding + p.embedding * "
    "CAST(array_fill(CAST(:share AS real), ARRAY[vector_dims(p.embedding)]) AS vector) END "
    "FROM episodes e LEFT JOIN episodes p ON p.id = e.prev_id "
    "WHERE e.conversation_id = :c AND e.id = ANY(:ids) AND e.embedding IS NOT NULL "
    "AND d.kind = 'episode' AND d.ref_id = e.id"
)


async def refresh_exchange_vectors(session: AsyncSession, conversation_id: int, episode_ids: Iterable[int]) -> None:
    """Recompute the searched vector of these episodes from their current predecessor
    in the chain (one statement; the caller holds the chain lock)."""
    ids = sorted(set(episode_ids))
    if ids:
        await session.execute(_REFRESH, {"c": conversation_id, "ids": ids, "share": PREVIOUS_SHARE})
