"""The writer of checkpoints: the only module that inserts or changes a conversation's
checkpoint row (tests/architecture/test_writers.py). The arithmetic of a saved chunk is
memory.consolidation.checkpoints' (pure); the callers hold the row locked (FOR UPDATE)
and pass it in, and the change is written when their transaction flushes."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.consolidation.checkpoints import CheckpointUpdate
from memory.store.schema import Checkpoint, Entity


async def ensure_checkpoint(session: AsyncSession, conversation_id: int) -> None:
    await session.execute(insert(Checkpoint).values(conversation_id=conversation_id).on_conflict_do_nothing())


async def save_chunk(session: AsyncSession, checkpoint: Checkpoint, update: CheckpointUpdate) -> None:
    """A consolidated chunk: the new watermark, pending episodes and summary, and the
    conversation's entity count."""
    checkpoint.last_episode_id = update.last_episode_id
    checkpoint.pending_episode_ids = update.pending_episode_ids
    if update.summary_stale:
        checkpoint.summary_dirty = True
    checkpoint.summary = update.summary
    checkpoint.summary_episode_ids = update.summary_episode_ids
    checkpoint.entity_count = (
        await session.execute(
            select(func.count()).select_from(Entity).where(Entity.conversation_id == checkpoint.conversation_id)
        )
    ).scalar_one()
    checkpoint.updated_at = func.now()


async def forget_episodes(
    session: AsyncSession, checkpoint: Checkpoint, episode_ids: Collection[int], *, clear_summary: bool, requeue: bool
) -> None:
    """The episodes leave the pending list (an edited one at or below the watermark is
    queued again); ``clear_summary``: the summary drew on one of them, so it is cleared
    and marked dirty until it is rebuilt from what survives."""
    if clear_summary:
        checkpoint.summary = ""
        checkpoint.summary_episode_ids = []
        checkpoint.summary_dirty = True
    gone = set(episode_ids)
    pending = [e for e in (checkpoint.pending_episode_ids or []) if e not in gone]
    if requeue:
        pending += sorted(e for e in gone if e <= checkpoint.last_episode_id)
    if pending != list(checkpoint.pending_episode_ids or []):
        checkpoint.pending_episode_ids = pending
    await session.flush()


def set_summary(checkpoint: Checkpoint, text: str, episode_ids: Sequence[int]) -> None:
    """A rebuilt summary, with the episodes it drew on; no longer dirty."""
    checkpoint.summary = text
    checkpoint.summary_episode_ids = list(episode_ids)
    checkpoint.summary_dirty = False
