"""The vector an episode is searched by: its own plus a share of the previous message's.

A chat message is often half of an exchange: "Been doing it for 3 years." answers "How
long have you been doing yoga?" and shares none of its words. Searching each message by
``own + share * previous own`` (cosine, so no normalisation is needed) lets the answer
be found by what was asked. On the LoCoMo retrieval benchmark this found as much
evidence as embedding the two messages' text together (80.7% against 80.6% of questions
with all their evidence, one point more than own vectors alone) at no extra embedding
cost: the vector is a sum of stored vectors. A new message's is computed before its
document is written (``exchange_vectors_of``); when the chain changes under a stored
message (an insertion before it, the deletion or edit of the message before it) it is
recomputed in SQL, so a deleted message leaves nothing of itself in its successor's.
Either way the sum is taken in single or double precision and rounded to the column's
``halfvec`` (migration 0023) as it is written.

The own vector is ``episodes.embedding``, so that search documents stay as narrow as
they were (two vectors in one row would push one of them out of line, and every exact
scan would fetch it back). An episode without one (bulk benchmark rows) keeps the
searched vector it has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store import documents
from memory.store.schema import Episode

# Chosen on LoCoMo (0.5 and 1.0 tried; 0.5 found as much evidence with fewer tokens). A
# change needs a migration that recomputes every episode's vector, as 0002 does.
PREVIOUS_SHARE = 0.5


def exchange_vector(own: Sequence[float], previous: Sequence[float] | None) -> list[float]:
    """``own + PREVIOUS_SHARE * previous`` (just ``own`` for the first message). Pure;
    ``memory.store.documents.refresh_exchange_vectors`` computes the same in SQL."""
    if previous is None:
        return list(own)
    combined = np.asarray(own, dtype=np.float64) + PREVIOUS_SHARE * np.asarray(previous, dtype=np.float64)
    return [float(x) for x in combined]


async def exchange_vectors_of(
    session: AsyncSession, conversation_id: int, own: Mapping[int, Sequence[float]], prev_of: Mapping[int, int | None]
) -> dict[int, list[float]]:
    """Searched vectors of episodes about to be (re)written, from their own vectors
    (``own``, by episode id) and their predecessors' (``prev_of``), taken from ``own``
    or, for predecessors outside it, from the database: computed before the documents
    are written, so that each is written once."""
    stored_ids = {p for p in prev_of.values() if p is not None and p not in own}
    query = select(Episode.id, Episode.embedding).where(Episode.conversation_id == conversation_id, Episode.id.in_(stored_ids))
    stored: dict[int, Sequence[float]] = dict((await session.execute(query)).all()) if stored_ids else {}
    vectors = {**stored, **own}
    previous = {e: vectors.get(p) if p is not None else None for e, p in prev_of.items()}
    return {e: exchange_vector(vector, previous.get(e)) for e, vector in own.items()}


async def refresh_exchange_vectors(session: AsyncSession, conversation_id: int, episode_ids: Iterable[int]) -> None:
    """Recompute the searched vector of these episodes from their current predecessor
    in the chain (one statement; the caller holds the chain lock)."""
    await documents.refresh_exchange_vectors(session, conversation_id, episode_ids, PREVIOUS_SHARE)
