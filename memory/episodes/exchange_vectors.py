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

The previous message is part of the exchange where at most two people talk (counted as
for the neighbours' share, memory.retrieval.pipeline.chain_share); where more do, it is
most often another conversation's, so a message is searched by its own vector alone,
unless it replies in a thread after a message of that thread (``joins_predecessor``).
On the ring channel of ``bench retrieval --group`` (five conversations interleaved
message by message, each name in two of them), the calibration channel kept 79.1% of
its questions' evidence at K = 30 searched with the channel's predecessor, 79.5-80.0% by
own vectors (the range: the same vectors in other physical orders, which break the full
text's ties), 80.5% with the predecessor of each message's own conversation (which only
the benchmark knows); held-out 74.2%, 76.4-76.7%, 76.7%. Migration 0026 applied the rule
to the stored documents.

The own vector is ``episodes.embedding``, so that search documents stay as narrow as
they were (two vectors in one row would push one of them out of line, and every exact
scan would fetch it back). An episode without one (bulk benchmark rows) keeps the
searched vector it has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store import documents
from memory.store.schema import Episode, Speaker

# Chosen on LoCoMo (0.5 and 1.0 tried; 0.5 found as much evidence with fewer tokens). A
# change needs a migration that recomputes every episode's vector, as 0002 does.
PREVIOUS_SHARE = 0.5
# Where at most this many people talk, the message before is the other's turn.
EXCHANGE_SPEAKERS = 2


def exchange_vector(own: Sequence[float], previous: Sequence[float] | None) -> list[float]:
    """``own + PREVIOUS_SHARE * previous`` (just ``own`` for the first message). Pure;
    ``memory.store.documents.refresh_exchange_vectors`` computes the same in SQL."""
    if previous is None:
        return list(own)
    combined = np.asarray(own, dtype=np.float64) + PREVIOUS_SHARE * np.asarray(previous, dtype=np.float64)
    return [float(x) for x in combined]


def joins_predecessor(speakers: int, thread_id: str | None, message_id: str, previous: tuple[str | None, str]) -> bool:
    """Whether a message (its thread and id) is searched with a share of its predecessor's
    vector (``previous``: that one's thread and id), in a conversation where ``speakers``
    people talk: always where they are at most two; where more, only for a reply in a
    thread (a thread id not its own) after a message of that thread, its first included.
    Pure; ``memory.store.documents.refresh_exchange_vectors`` decides the same in SQL."""
    if speakers <= EXCHANGE_SPEAKERS:
        return True
    in_thread = thread_id is not None and thread_id != message_id
    return in_thread and thread_id in previous


async def exchange_vectors_of(
    session: AsyncSession, conversation_id: int, own: Mapping[int, Sequence[float]], prev_of: Mapping[int, int | None]
) -> dict[int, list[float]]:
    """Searched vectors of stored episodes about to be (re)written, from their own vectors
    (``own``, by episode id) and their predecessors' (``prev_of``) where the predecessor
    joins (``joins_predecessor``), taken from ``own`` or, for predecessors outside it,
    from the database: computed before the documents are written, so that each is
    written once. One statement reads the threads, those vectors and the speakers."""
    linked = {e: p for e, p in prev_of.items() if e in own and p is not None}
    if not linked:
        return {e: exchange_vector(vector, None) for e, vector in own.items()}
    stored_ids = {p for p in linked.values() if p not in own}
    speakers = select(func.count()).where(Speaker.conversation_id == conversation_id).scalar_subquery()
    stored_vector = case((Episode.id.in_(stored_ids), Episode.embedding))
    query = select(Episode.id, Episode.thread_id, Episode.platform_message_id, stored_vector, speakers).where(
        Episode.conversation_id == conversation_id, Episode.id.in_({*linked, *linked.values()})
    )
    rows = (await session.execute(query)).all()
    threads = {e: (thread, message) for e, thread, message, _, _ in rows}
    vectors = {**{e: vector for e, _, _, vector, _ in rows if vector is not None}, **own}
    count = int(rows[0][4]) if rows else 0

    def previous(e: int) -> Sequence[float] | None:
        p = linked.get(e)
        if p is None or e not in threads or p not in threads:
            return None
        return vectors.get(p) if joins_predecessor(count, *threads[e], threads[p]) else None

    return {e: exchange_vector(vector, previous(e)) for e, vector in own.items()}


async def refresh_exchange_vectors(session: AsyncSession, conversation_id: int, episode_ids: Iterable[int]) -> None:
    """Recompute the searched vector of these episodes from their current predecessor
    in the chain where it joins (``joins_predecessor``; one statement; the caller holds
    the chain lock)."""
    await documents.refresh_exchange_vectors(session, conversation_id, episode_ids, PREVIOUS_SHARE, EXCHANGE_SPEAKERS)
