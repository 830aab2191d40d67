"""Bulk append: many messages in batches, embedding the next batch while the database
stores the current one (onnxruntime releases the GIL), one transaction per batch.

Every message reaching here passed ``Message``'s checks, so the database should accept
it; if it still refuses a batch, the batch is split in halves, each stored in its own
transaction, down to the one message it refuses, which is rejected with the database's
reason. One bad message costs the others nothing, and a batch of good ones still costs
one transaction. An embedding endpoint that fails stops the run: what was stored stays
stored, and the report says where it stopped (a rerun skips the stored ids).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy.exc import DBAPIError

from memory.core import Memory
from memory.episodes.append import AppendResult, Message, append_messages
from memory.errors import ModelUnavailable
from memory.models.embedder import EmbeddingBatch
from memory.store.ledger import Usage, record_usage

# What the database (or the driver encoding a value for it) raises for one bad value.
_REFUSED = (DBAPIError, UnicodeError, OverflowError)


@dataclass
class IngestRun:
    """One result per message attempted, in input order; ``stopped`` says why the run
    ended early (the messages after the last result were not attempted)."""

    results: list[AppendResult] = field(default_factory=list)
    stopped: str | None = None


def _reason(error: BaseException) -> str:
    detail = str(error.orig if isinstance(error, DBAPIError) else error).strip().splitlines()[0]
    return "the database refused it: " + re.sub(r"^<class '[\w.]+'>: ", "", detail)


async def _record(memory: Memory, conversation_id: int, usage: Usage) -> None:
    async with memory._sessions.begin() as session:
        await record_usage(session, conversation_id, usage)


async def _store(
    memory: Memory, conversation_id: int, batch: Sequence[Message], vectors: Sequence[Sequence[float]], usage: Usage | None
) -> list[AppendResult]:
    """Store ``batch`` in one transaction, or failing that its halves apart (see above)."""
    try:
        async with memory._sessions.begin() as session:
            results = await append_messages(session, memory.embedder, conversation_id, batch, vectors)
            if usage is not None:
                await record_usage(session, conversation_id, usage)
        return results
    except _REFUSED as error:
        if isinstance(error, DBAPIError) and error.connection_invalidated:
            raise  # the server went away: not this batch's fault
        if len(batch) == 1:
            refused = [AppendResult(batch[0].platform_message_id, "rejected", None, _reason(error))]
            if usage is not None:
                await _record(memory, conversation_id, usage)
            return refused
    half = len(batch) // 2
    first = await _store(memory, conversation_id, batch[:half], vectors[:half], usage)
    return first + await _store(memory, conversation_id, batch[half:], vectors[half:], None)


def _merged(messages: Sequence[Message], opted_out: frozenset[str], run: IngestRun) -> IngestRun:
    """The results of the messages kept, with the opted-out ones back in input order, up
    to the first kept message the run did not attempt. Pure."""
    attempted = iter(run.results)
    results: list[AppendResult] = []
    for message in messages:
        if message.speaker_id in opted_out:
            results.append(AppendResult(message.platform_message_id, "opted_out", None))
        elif (result := next(attempted, None)) is not None:
            results.append(result)
        else:
            break
    return IngestRun(results, run.stopped)


async def ingest_messages(
    memory: Memory,
    conversation_id: int,
    messages: Sequence[Message],
    batch_size: int = 64,
    on_batch: Callable[[list[AppendResult]], object] | None = None,
    opted_out: frozenset[str] = frozenset(),
) -> IngestRun:
    """Append messages; one result per message (stored, duplicate, tombstoned, rejected,
    or ``opted_out``: its speaker is in ``opted_out``, and it is neither embedded nor stored)."""
    if opted_out:
        kept = [m for m in messages if m.speaker_id not in opted_out]
        if len(kept) < len(messages):
            skipped = [AppendResult(m.platform_message_id, "opted_out", None) for m in messages if m.speaker_id in opted_out]
            if on_batch:
                on_batch(skipped)
            return _merged(messages, opted_out, await ingest_messages(memory, conversation_id, kept, batch_size, on_batch))
    batches = [messages[i : i + batch_size] for i in range(0, len(messages), batch_size)]
    run = IngestRun()
    pending: asyncio.Future[EmbeddingBatch] | None = None
    try:
        for index, batch in enumerate(batches):
            try:
                embedded = await (pending or memory.embedder.embed([m.document_text for m in batch]))
            except ModelUnavailable as error:
                run.stopped = str(error)
                break
            pending = (
                asyncio.ensure_future(memory.embedder.embed([m.document_text for m in batches[index + 1]]))
                if index + 1 < len(batches)
                else None
            )
            usage = Usage.embedding("ingestion", "embed_episode", embedded)
            results = await _store(memory, conversation_id, batch, embedded.vectors, usage)
            run.results += results
            if on_batch:
                on_batch(results)
    finally:
        if pending is not None:  # a failed batch must not leave the next embedding running
            pending.cancel()
    return run
