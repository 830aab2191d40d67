"""Bulk append: many messages in batches, embedding the next batch while the database
stores the current one (onnxruntime releases the GIL), one transaction per batch."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Callable, Sequence

from memory.core import Memory
from memory.episodes.append import AppendResult, Message, append_messages
from memory.models.embedder import EmbeddingBatch
from memory.store.ledger import Usage, record_usage


async def ingest_messages(
    memory: Memory,
    conversation_id: int,
    messages: Sequence[Message],
    batch_size: int = 64,
    on_batch: Callable[[list[AppendResult]], None] | None = None,
) -> Counter[str]:
    """Append messages; returns counts by status (stored, duplicate, tombstoned)."""
    batches = [messages[i:i + batch_size] for i in range(0, len(messages), batch_size)]
    counts: Counter[str] = Counter()
    pending: asyncio.Future[EmbeddingBatch] | None = None
    try:
        for index, batch in enumerate(batches):
            embedded = await (pending or memory.embedder.embed([m.document_text for m in batch]))
            pending = (
                asyncio.ensure_future(memory.embedder.embed([m.document_text for m in batches[index + 1]]))
                if index + 1 < len(batches)
                else None
            )
            async with memory.sessions.begin() as session:
                results = await append_messages(session, memory.embedder, conversation_id, batch, embedded.vectors)
                await record_usage(
                    session,
                    conversation_id,
                    Usage("ingestion", "embed_episode", embedded.model, 1, embedded.prompt_tokens),
                )
            counts.update(r.status for r in results)
            if on_batch:
                on_batch(results)
    finally:
        if pending is not None:  # a failed batch must not leave the next embedding running
            pending.cancel()
    return counts
