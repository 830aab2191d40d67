"""The usage ledger: every LLM and embedding call with its phase, operation and tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.schema import UsageEntry

if TYPE_CHECKING:
    from memory.models.embedder import EmbeddingBatch


@dataclass(frozen=True)
class Usage:
    phase: str  # ingestion | retrieval | community
    operation: str  # embed_episode, extract, summary, rerank, answer, ...
    model: str
    calls: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @classmethod
    def embedding(cls, phase: str, operation: str, batch: EmbeddingBatch) -> Usage:
        """One embedding call (a batch of texts is one call)."""
        return cls(phase, operation, batch.model, calls=1, prompt_tokens=batch.prompt_tokens)


async def record_usage(session: AsyncSession, conversation_id: int, usage: Usage) -> None:
    await session.execute(
        insert(UsageEntry).values(
            conversation_id=conversation_id,
            phase=usage.phase,
            operation=usage.operation,
            model=usage.model,
            calls=usage.calls,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
        )
    )


async def usage_totals(session: AsyncSession, conversation_id: int) -> list[dict[str, object]]:
    """Totals by phase and operation for one conversation."""
    rows = await session.execute(
        select(
            UsageEntry.phase,
            UsageEntry.operation,
            UsageEntry.model,
            func.sum(UsageEntry.calls),
            func.sum(UsageEntry.prompt_tokens),
            func.sum(UsageEntry.completion_tokens),
        )
        .where(UsageEntry.conversation_id == conversation_id)
        .group_by(UsageEntry.phase, UsageEntry.operation, UsageEntry.model)
        .order_by(UsageEntry.phase, UsageEntry.operation)
    )
    return [
        {
            "phase": phase,
            "operation": operation,
            "model": model,
            "calls": int(calls),
            "prompt_tokens": int(prompt),
            "completion_tokens": int(completion),
        }
        for phase, operation, model, calls, prompt, completion in rows
    ]
