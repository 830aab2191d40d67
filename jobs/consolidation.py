"""Background consolidation: every conversation with unconsolidated episodes, claimed by
one worker at a time through a session-level advisory lock (no in-process state, so any
number of workers can run this). A conversation whose LLM fails keeps its episodes
stored and unconsolidated; the next pass retries it."""

from __future__ import annotations

import logging
from typing import Collection

from sqlalchemy import func, select, text

from memory.consolidation.run import ConsolidationReport, consolidate
from memory.core import Memory
from memory.models.llm import LLMError
from memory.store.locks import LockPurpose
from memory.store.schema import Checkpoint, Episode

log = logging.getLogger(__name__)


async def conversations_with_backlog(memory: Memory) -> list[int]:
    """Conversations with episodes after their checkpoint or edited since (a discovery
    query across conversations: the scheduler's only one)."""
    last = func.coalesce(Checkpoint.last_episode_id, 0)
    pending = func.coalesce(Checkpoint.pending_episode_ids, text("'{}'::bigint[]"))
    query = (
        select(Episode.conversation_id)
        .outerjoin(Checkpoint, Checkpoint.conversation_id == Episode.conversation_id)
        .where((Episode.id > last) | (Episode.id == func.any(pending)))
        .group_by(Episode.conversation_id)
        .order_by(Episode.conversation_id)
    )
    async with memory.sessions() as session:
        return list((await session.execute(query)).scalars())


async def consolidate_backlog(memory: Memory, only: Collection[int] | None = None) -> list[ConsolidationReport]:
    """Consolidate every conversation with a backlog that no other worker holds
    (``only``: among these conversations, e.g. one shard's)."""
    reports: list[ConsolidationReport] = []
    for conversation_id in await conversations_with_backlog(memory):
        if only is not None and conversation_id not in only:
            continue
        async with memory.engine.connect() as claim:
            key = {"purpose": int(LockPurpose.CONSOLIDATION), "conversation": conversation_id}
            claimed = (await claim.execute(text("SELECT pg_try_advisory_lock(:purpose, :conversation)"), key)).scalar()
            await claim.commit()
            if not claimed:
                continue
            try:
                reports.append(await consolidate(memory, conversation_id))
            except LLMError as error:
                log.warning("consolidation of conversation %s stopped: %s", conversation_id, error)
                reports.append(ConsolidationReport(conversation_id, stopped=f"LLM failed: {error}"))
            finally:
                await claim.execute(text("SELECT pg_advisory_unlock(:purpose, :conversation)"), key)
                await claim.commit()
    return reports
