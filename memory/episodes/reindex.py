"""Embedding a conversation's messages again from their document text, after a change
of what is indexed (migration 0004 took the speaker's name out of episode documents).

Batches of messages in id order: embed, store the own vectors, recompute the exchange
vectors of the batch and of the messages that follow it (their searched vector holds a
share of their predecessor's), under the chain lock, one transaction per batch, so that
a message edited or deleted meanwhile is never written back. When every conversation
has been reindexed, the store's ``episode_vectors`` mark is removed.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.core import Memory
from memory.episodes.exchange_vectors import refresh_exchange_vectors
from memory.store import episodes, settings
from memory.store.documents import episode_document_text
from memory.store.ledger import Usage, record_usage
from memory.store.locks import LockPurpose, lock_conversation
from memory.store.schema import Episode

STALE_VECTORS = "episode_vectors"
BATCH = 256


async def vectors_are_stale(session: AsyncSession) -> bool:
    """Were episode vectors embedded from text that is no longer what is indexed?"""
    return await settings.is_set(session, STALE_VECTORS)


async def reindex_episodes(
    memory: Memory, conversation_id: int, on_batch: Callable[[int], object] | None = None, batch: int = BATCH
) -> int:
    """Embed every message of the conversation again; returns how many were."""
    last, done = 0, 0
    while True:
        async with memory._sessions() as session:
            rows = (
                await session.execute(
                    select(Episode.id, Episode.text)
                    .where(Episode.conversation_id == conversation_id, Episode.id > last)
                    .order_by(Episode.id)
                    .limit(batch)
                )
            ).all()
        if not rows:
            return done
        embedded = await memory.embedder.embed([episode_document_text(body) for _, body in rows])
        async with memory._sessions.begin() as session:
            await lock_conversation(session, conversation_id, LockPurpose.CHAIN)
            texts = dict(
                (
                    await session.execute(
                        select(Episode.id, Episode.text).where(
                            Episode.conversation_id == conversation_id, Episode.id.in_([i for i, _ in rows])
                        )
                    )
                ).all()
            )
            changed = [(i, v) for (i, body), v in zip(rows, embedded.vectors, strict=True) if texts.get(i) == body]
            for episode_id, vector in changed:
                await episodes.set_embedding(session, conversation_id, episode_id, vector)
            ids = [i for i, _ in changed]
            following = (
                await session.execute(
                    select(Episode.next_id).where(Episode.conversation_id == conversation_id, Episode.id.in_(ids))
                )
            ).scalars()
            await refresh_exchange_vectors(session, conversation_id, ids + [n for n in following if n is not None])
            await record_usage(
                session, conversation_id, Usage("ingestion", "reindex_episode", embedded.model, 1, embedded.prompt_tokens)
            )
        last, done = rows[-1][0], done + len(changed)
        if on_batch is not None:
            on_batch(len(rows))


async def clear_stale_mark(memory: Memory) -> None:
    async with memory._sessions.begin() as session:
        await settings.clear(session, STALE_VECTORS)
