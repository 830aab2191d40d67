"""Consolidation: new episodes become entities and relations that remember which
episodes support them, chunk by chunk, from the conversation's checkpoint.

Per chunk: read the episodes, extract (LLM or not) *outside* any write transaction,
embed, look up entity candidates and adjudicate doubtful ones, then in ONE transaction
under the conversation's graph lock: re-check that the chunk's episodes still exist
unchanged (a deletion or edit meanwhile must not be resurrected), reconcile entities and
relations (memory.graph.reconcile), write them with their provenance and search
documents (memory.consolidation.saving) and save the new checkpoint and rolling context
(memory.store.checkpoints, memory.store.rolling_context). Killing the process at any
point loses nothing and duplicates nothing: a chunk is either fully written with its
checkpoint or not at all, and the next run starts from the checkpoint.

The steps live beside this module: reading (what a run reads), mentions (extraction to
mentions, pure), state (the run's state and a prepared chunk), saving (the chunk's graph
writes). This module runs them, with the LLM side calls, and writes nothing itself.

Episodes are taken in arrival (id) order, so ``last_episode_id`` is a watermark: every
episode at or below it was consolidated, except ``pending_episode_ids`` (edited after
consolidation), which are consolidated again. Bot messages are context, never evidence.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.consolidation.checkpoints import CheckpointUpdate, changed_since_read, next_checkpoint
from memory.consolidation.extraction import Chunk, Extraction, Extractor
from memory.consolidation.extraction.llm import LLMExtractor
from memory.consolidation.extraction.nlp import nlp
from memory.consolidation.extraction.offline import OfflineExtractor
from memory.consolidation.mentions import Mention, context_updates, entity_text, evidence_of, mentions_of
from memory.consolidation.reading import alive, chunk_of, nearest_entities
from memory.consolidation.rolling_context import context_size, merge_context, render_context
from memory.consolidation.saving import new_facts, write_entities, write_relations
from memory.consolidation.state import Prepared, RunState, start
from memory.consolidation.summary import SummaryLine, offline_summary, rebuild_summary
from memory.core import Memory
from memory.errors import LLMError
from memory.graph.reconcile import entity_decision
from memory.models.tokens import count_tokens, truncate_tokens
from memory.params import MemoryParams
from memory.prompts import COMPRESS_SYSTEM, RESOLVE_SYSTEM, SUMMARY_SYSTEM
from memory.store import checkpoints
from memory.store.ledger import Usage, record_usage
from memory.store.locks import LockPurpose, lock_conversation
from memory.store.rolling_context import load_context, save_context
from memory.store.schema import Checkpoint, Episode


@dataclass
class ConsolidationReport:
    conversation_id: int
    episodes: int = 0
    chunks: int = 0
    entities_created: int = 0
    entities_merged: int = 0
    relations_created: int = 0
    relations_duplicate: int = 0
    relations_superseded: int = 0
    skipped_deleted: int = 0  # episodes deleted or edited while their chunk was extracted
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    stopped: str | None = None  # why a run stopped early (another run got there first)

    def count_usage(self, usage: Usage) -> None:
        if usage.operation.startswith("embed"):
            return
        self.llm_calls += usage.calls
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --- LLM side calls -----------------------------------------------------------------


class _Match(BaseModel):
    mention: int
    entity_id: int | None = None


class _Matches(BaseModel):
    matches: list[_Match] = Field(default_factory=list)


class _CompressedEntry(BaseModel):
    entity_id: int
    text: str


class _Compressed(BaseModel):
    entries: list[_CompressedEntry] = Field(default_factory=list)


async def _adjudicate(memory: Memory, mentions: Sequence[Mention], usage: list[Usage]) -> None:
    """One batched LLM call for every doubtful mention of the chunk."""
    doubtful = [m for m in mentions if m.candidates]
    if not doubtful or memory.llm is None:
        return
    lines = [
        f"M{index}: "
        + json.dumps(
            {
                "name": mention.name,
                "type": mention.type,
                "summary": mention.summary,
                "candidates": [{"id": c.entity_id, "name": c.name} for c in mention.candidates],
            }
        )
        for index, mention in enumerate(doubtful)
    ]
    result = await memory.llm.complete_json(
        system=RESOLVE_SYSTEM, user="\n".join(lines), schema=_Matches, phase="ingestion", operation="resolve_entity"
    )
    usage.append(result.usage)
    for match in result.value.matches:
        if 0 <= match.mention < len(doubtful) and match.entity_id is not None:
            mention = doubtful[match.mention]
            if match.entity_id in {c.entity_id for c in mention.candidates}:
                mention.decision, mention.entity_id = "merge", match.entity_id


async def _compress(memory: Memory, entries: list[dict[str, Any]], usage: list[Usage]) -> list[dict[str, Any]]:
    """Ask the LLM to shorten the rolling context; the episodes behind each entry stay."""
    budget = memory.params.context_tokens
    if memory.llm is None or context_size(entries) <= budget:
        return entries
    result = await memory.llm.complete_json(
        system=COMPRESS_SYSTEM.format(budget=budget),
        user=render_context(entries),
        schema=_Compressed,
        phase="ingestion",
        operation="compress_context",
    )
    usage.append(result.usage)
    texts = {item.entity_id: item.text.strip() for item in result.value.entries if item.text.strip()}
    return [{**item, "text": texts.get(item["entity_id"], item["text"])} for item in entries]


# --- the run ------------------------------------------------------------------------


def default_extractor(memory: Memory) -> Extractor:
    return LLMExtractor(memory.llm) if memory.llm is not None else OfflineExtractor()


def warm_up(memory: Memory) -> None:
    """Load what the first run would otherwise load on its way: the token counter and,
    offline, the spaCy model (seconds of CPU). Blocking: call it in a thread."""
    count_tokens("")
    if memory.llm is None:
        nlp()


async def unconsolidated_count(session: AsyncSession, conversation_id: int) -> int:
    """Episodes waiting for consolidation: after the checkpoint, or edited since."""
    checkpoint = await session.get(Checkpoint, conversation_id)
    last, pending = (checkpoint.last_episode_id, list(checkpoint.pending_episode_ids or [])) if checkpoint else (0, [])
    return (
        await session.execute(
            select(func.count())
            .select_from(Episode)
            .where(Episode.conversation_id == conversation_id, (Episode.id > last) | Episode.id.in_(pending))
        )
    ).scalar_one()


async def consolidate(
    memory: Memory,
    conversation_id: int,
    extractor: Extractor | None = None,
    on_progress: Callable[[int], object] | None = None,
    *,
    reconcile: bool = True,
    max_tokens: int | None = None,
) -> ConsolidationReport:
    """Consolidate the conversation's new (and edited) episodes from its checkpoint: all
    of them, or the oldest within ``max_tokens`` (the rest waits for the next run).

    ``reconcile=False`` appends every extraction as new entities and relations: the
    baseline of the update benchmark, never what the service does. An ``LLMError``
    propagates after the chunks before it were saved; the failed chunk's episodes stay
    unconsolidated and are retried by the next run.
    """
    extractor = extractor or default_extractor(memory)
    report = ConsolidationReport(conversation_id)
    state, cuts = await start(memory, conversation_id, max_tokens)
    for cut in cuts:
        chunk = chunk_of(conversation_id, cut.context, cut.new, state.summary, state.rolling)
        usage: list[Usage] = []
        try:
            extraction = await extractor.extract(chunk)
            usage += extraction.usage
            prepared = await _prepare(memory, chunk, extraction, state, usage, reconcile)
            read_edits = {e.id: e.edited_at for e in [*cut.context, *cut.new]}
            saved = await _save(memory, chunk, prepared, state, read_edits, usage, report, reconcile)
        except LLMError as error:
            await _record_failed(memory, conversation_id, usage, error)
            raise
        if not saved:
            report.stopped = "another consolidation run saved this chunk first"
            break
        report.chunks += 1
        report.episodes += len(cut.new)
        if on_progress:
            on_progress(len(cut.new))
    return report


async def _record_failed(memory: Memory, conversation_id: int, usage: list[Usage], error: LLMError) -> None:
    """What a failed chunk cost still goes into the ledger (nothing else of it is kept)."""
    spent = [*usage, *([error.usage] if error.usage else [])]
    if spent:
        async with memory._sessions.begin() as session:
            for item in spent:
                await record_usage(session, conversation_id, item)


async def _embed(memory: Memory, texts: list[str], usage: list[Usage]) -> list[list[float]]:
    """The texts' vectors (none for no texts); the call goes into ``usage``."""
    if not texts:
        return []
    batch = await memory.embedder.embed(texts)
    usage.append(Usage.embedding("ingestion", "embed_graph", batch))
    return batch.vectors


async def _resolve_entities(
    memory: Memory, conversation_id: int, mentions: dict[str, Mention], name_vectors: dict[str, list[float]], usage: list[Usage]
) -> None:
    """Entity resolution: candidates (read), decisions (pure), adjudication of the
    doubtful ones (one batched LLM call)."""
    params = memory.params
    async with memory._sessions() as session:
        candidates = await nearest_entities(session, conversation_id, name_vectors, params.entity_neighbours)
    for key, mention in mentions.items():
        found = candidates[key]
        decision = entity_decision(mention.name, found, params)
        if decision.kind == "merge":
            mention.decision, mention.entity_id = "merge", decision.entity_id
            mention.name = next(c.name for c in found if c.entity_id == decision.entity_id)
        elif decision.kind == "adjudicate":
            mention.candidates = decision.candidates
    await _adjudicate(memory, list(mentions.values()), usage)
    for mention in mentions.values():
        if mention.decision == "merge" and mention.candidates:
            mention.name = next(c.name for c in mention.candidates if c.entity_id == mention.entity_id)


async def _prepare(
    memory: Memory, chunk: Chunk, extraction: Extraction, state: RunState, usage: list[Usage], reconcile: bool
) -> Prepared:
    """Everything before the write: evidence, mentions, embeddings (names for resolution,
    relation facts, entity documents), resolution, summary and rolling context."""
    evidence_ids = {line.episode_id for line in chunk.lines if line.role != "bot"}
    entities, relations = evidence_of(extraction, evidence_ids)
    mentions = mentions_of(entities, relations)
    keys = list(mentions)
    # Names and facts in one call (none without a mention: a relation always has two).
    vectors = await _embed(memory, [mentions[k].name for k in keys] + [r.fact for r in relations], usage) if keys else []
    name_vectors = dict(zip(keys, vectors[: len(keys)], strict=True))
    fact_vectors = vectors[len(keys) :]
    if reconcile and keys:
        await _resolve_entities(memory, chunk.conversation_id, mentions, name_vectors, usage)
    names = {k: (m.name, m.type) for k, m in mentions.items()}
    doc_texts = {k: entity_text(m, m.name, m.type) for k, m in mentions.items()}
    doc_vectors = dict(zip(doc_texts, await _embed(memory, list(doc_texts.values()), usage), strict=True))
    summary, summary_ids = await _next_summary(memory, chunk, extraction, state, usage)
    rolling = merge_context(state.rolling, context_updates(mentions, relations, names))
    rolling = await _compress(memory, rolling, usage)
    return Prepared(mentions, relations, name_vectors, fact_vectors, doc_vectors, summary, summary_ids, rolling)


async def _save(
    memory: Memory,
    chunk: Chunk,
    prepared: Prepared,
    state: RunState,
    read_edits: dict[int, datetime | None],
    usage: list[Usage],
    report: ConsolidationReport,
    reconcile: bool,
) -> bool:
    """Write one chunk with its checkpoint, in one transaction under the graph lock.
    False when another run moved the checkpoint meanwhile (its work stands; this chunk
    is not written twice)."""
    conversation_id = chunk.conversation_id
    async with memory._sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.GRAPH)
        checkpoint = await session.get(Checkpoint, conversation_id, with_for_update=True)
        assert checkpoint is not None
        if checkpoint.last_episode_id != state.last:
            return False
        update, rolling = await _write_chunk(
            session, memory.params, checkpoint, chunk, prepared, state, read_edits, report, reconcile
        )
        for item in usage:
            await record_usage(session, conversation_id, item)
            report.count_usage(item)
    if update.summary_stale:  # it may have quoted a deleted message: cleared above, regenerated now
        async with memory._sessions.begin() as session:
            await lock_conversation(session, conversation_id, LockPurpose.GRAPH)
            await rebuild_summary(memory, session, conversation_id)
    state.saved(update, rolling, chunk, offline=memory.llm is None)
    return True


async def _write_chunk(
    session: AsyncSession,
    params: MemoryParams,
    checkpoint: Checkpoint,
    chunk: Chunk,
    prepared: Prepared,
    state: RunState,
    read_edits: dict[int, datetime | None],
    report: ConsolidationReport,
    reconcile: bool,
) -> tuple[CheckpointUpdate, list[dict[str, Any]]]:
    """The chunk's graph, rolling context and checkpoint, through their writers. The
    rolling context and summary carried from earlier chunks may rest on episodes deleted
    since this run read them: those are checked too, or they would be written back."""
    conversation_id = chunk.conversation_id
    chunk_ids = [line.episode_id for line in chunk.new_lines]
    carried = prepared.carried
    surviving = await alive(session, conversation_id, set(read_edits) | carried)
    deleted, edited = changed_since_read(read_edits, carried, surviving)
    gone = deleted | edited
    report.skipped_deleted += len(gone & set(chunk_ids))
    prepared.without(gone)
    vanished = await write_entities(
        session, conversation_id, prepared.mentions, prepared.name_vectors, prepared.doc_vectors, report
    )
    facts = new_facts(chunk, prepared.relations, prepared.fact_vectors, prepared.mentions, gone)
    await write_relations(session, conversation_id, facts, params, reconcile, report)
    rolling = prepared.final_rolling(vanished, gone, params.context_tokens)
    pending = checkpoint.pending_episode_ids or []
    update = next_checkpoint(state.last, pending, chunk_ids, deleted, edited, prepared.summary, prepared.summary_ids)
    await save_context(session, conversation_id, await load_context(session, conversation_id), rolling)
    await checkpoints.save_chunk(session, checkpoint, update)
    return update, rolling


async def _next_summary(
    memory: Memory, chunk: Chunk, extraction: Extraction, state: RunState, usage: list[Usage]
) -> tuple[str, list[int]]:
    """The conversation summary after this chunk, with the episodes it rests on: the
    extractor's, else the LLM's, else the offline one (the newest lines that fit)."""
    all_ids = [*state.summary_ids, *(line.episode_id for line in chunk.lines)]
    if extraction.summary is not None:
        return truncate_tokens(extraction.summary, memory.params.summary_tokens), all_ids
    if memory.llm is not None:
        prompt = f"Summary so far:\n{chunk.summary or '(none)'}\n\nNew messages:\n" + "\n".join(
            f"{line.speaker}: {line.text}" for line in chunk.new_lines
        )
        result = await memory.llm.complete_text(
            system=SUMMARY_SYSTEM,
            user=truncate_tokens(prompt, memory.params.summary_tokens, keep="tail"),
            phase="ingestion",
            operation="summary",
        )
        usage.append(result.usage)
        return truncate_tokens(result.value.strip(), memory.params.summary_tokens), all_ids
    lines = [
        *state.summary_lines,
        *(SummaryLine(line.episode_id, f"{line.speaker}: {' '.join(line.text.split())}") for line in chunk.new_lines),
    ]
    return offline_summary(lines, memory.params.offline_summary_tokens)
