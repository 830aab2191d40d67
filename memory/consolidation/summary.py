"""The running conversation summary kept in the checkpoint.

With an LLM the summary is rewritten by the extraction call of each chunk (see
memory/consolidation/extraction/llm.py) and, when it must be regenerated (after a
deletion), from the newest surviving consolidated episodes that fit the summary window
(``summary_tokens``, 15K by default). Without an LLM the summary is extractive: the
newest lines that fit ``offline_summary_tokens``, so it only ever holds surviving text.
``summary_episode_ids`` always names the episodes the summary drew on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.core import Memory
from memory.models.tokens import count_tokens, truncate_tokens
from memory.prompts import SUMMARY_SYSTEM
from memory.store import checkpoints
from memory.store.ledger import record_usage
from memory.store.schema import EPISODE_SPEAKER, Checkpoint, Episode, Speaker


@dataclass(frozen=True)
class SummaryLine:
    episode_id: int
    text: str  # "Speaker: text"


def newest_within(lines: Sequence[SummaryLine], budget: int) -> list[SummaryLine]:
    """The newest lines whose total size fits ``budget`` tokens, in their order."""
    kept: list[SummaryLine] = []
    used = 0
    for line in reversed(lines):
        size = count_tokens(line.text) + 1
        if used + size > budget:
            break
        kept.append(line)
        used += size
    return kept[::-1]


def offline_summary(lines: Sequence[SummaryLine], budget: int) -> tuple[str, list[int]]:
    kept = newest_within(lines, budget)
    return "\n".join(line.text for line in kept), [line.episode_id for line in kept]


async def summary_lines(
    session: AsyncSession, conversation_id: int, episode_ids: Sequence[int] | None = None, up_to: int | None = None
) -> list[SummaryLine]:
    """Episodes in chain order (message time, then arrival) as summary lines: the given
    ids, or every episode consolidated up to ``up_to``."""
    query = (
        select(Episode.id, Speaker.display_name, Episode.text)
        .join(Speaker, EPISODE_SPEAKER)
        .where(Episode.conversation_id == conversation_id)
        .order_by(Episode.message_time, Episode.id)
    )
    if episode_ids is not None:
        query = query.where(Episode.id.in_(list(episode_ids)))
    if up_to is not None:
        query = query.where(Episode.id <= up_to)
    rows = await session.execute(query)
    return [SummaryLine(episode_id, f"{name}: {' '.join(text.split())}") for episode_id, name, text in rows]


async def llm_summary(
    memory: Memory, session: AsyncSession, conversation_id: int, lines: Sequence[SummaryLine]
) -> tuple[str, list[int]]:
    """Summarise the newest lines within the summary window with the LLM; records usage."""
    assert memory.llm is not None
    window = newest_within(lines, memory.params.summary_tokens)
    if not window:
        return "", []
    result = await memory.llm.complete_text(
        system=SUMMARY_SYSTEM, user="\n".join(line.text for line in window), phase="ingestion", operation="summary"
    )
    await record_usage(session, conversation_id, result.usage)
    return truncate_tokens(result.value.strip(), memory.params.summary_tokens), [line.episode_id for line in window]


async def rebuild_summary(memory: Memory, session: AsyncSession, conversation_id: int) -> None:
    """Regenerate the running summary from the surviving consolidated episodes (in the
    caller's transaction), e.g. after a deletion, so no trace of a deleted message stays."""
    checkpoint = await session.get(Checkpoint, conversation_id, with_for_update=True)
    if checkpoint is None:
        return
    pending = set(checkpoint.pending_episode_ids or [])
    lines = [
        line
        for line in await summary_lines(session, conversation_id, up_to=checkpoint.last_episode_id)
        if line.episode_id not in pending
    ]
    if memory.llm is not None:
        text, ids = await llm_summary(memory, session, conversation_id, lines)
    else:
        text, ids = offline_summary(lines, memory.params.offline_summary_tokens)
    checkpoints.set_summary(checkpoint, text, ids)
