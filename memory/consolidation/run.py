"""Consolidation: new episodes become entities and relations that remember which
episodes support them, chunk by chunk, from the conversation's checkpoint.

Per chunk: read the episodes, extract (LLM or not) *outside* any write transaction,
embed, look up entity candidates and adjudicate doubtful ones, then in ONE transaction
under the conversation's graph lock: re-check that the chunk's episodes still exist
unchanged (a deletion or edit meanwhile must not be resurrected), reconcile entities and
relations (memory/graph/reconcile.py), write them with their provenance and search documents
(memory/graph/writes.py) and save the new checkpoint. Killing the process at any point loses
nothing and duplicates nothing: a chunk is either fully written with its checkpoint or
not at all, and the next run starts from the checkpoint.

Episodes are taken in arrival (id) order, so ``last_episode_id`` is a watermark: every
episode at or below it was consolidated, except ``pending_episode_ids`` (edited after
consolidation), which are consolidated again. Bot messages are context, never evidence.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from pgvector import Vector
from pydantic import BaseModel, Field
from sqlalchemy import Select, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.consolidation.checkpoints import CheckpointUpdate, changed_since_read, next_checkpoint
from memory.consolidation.chunking import Cut, cut_chunks, within
from memory.consolidation.extraction import (
    Chunk,
    ChunkLine,
    ExtractedEntity,
    ExtractedRelation,
    Extraction,
    Extractor,
)
from memory.consolidation.extraction.llm import LLMExtractor
from memory.consolidation.extraction.nlp import nlp
from memory.consolidation.extraction.offline import OfflineExtractor
from memory.consolidation.rolling_context import (
    context_size,
    entry,
    fit_context,
    merge_context,
    one_per_entity,
    render_context,
    without_episodes,
)
from memory.consolidation.summary import SummaryLine, offline_summary, rebuild_summary, summary_lines
from memory.core import Memory
from memory.errors import LLMError
from memory.graph import writes as graph
from memory.graph.reconcile import (
    EntityCandidate,
    FactDecision,
    NewFact,
    RelationBook,
    RelationState,
    apply_relation,
    entity_decision,
    normalize_name,
)
from memory.graph.wording import EntityWitness, FactWording
from memory.models.tokens import count_tokens, truncate_tokens
from memory.params import MemoryParams
from memory.prompts import COMPRESS_SYSTEM, RESOLVE_SYSTEM, SUMMARY_SYSTEM
from memory.store import checkpoints
from memory.store.ledger import Usage, record_usage
from memory.store.locks import LockPurpose, lock_conversation
from memory.store.rolling_context import in_order, load_context, save_context
from memory.store.schema import EPISODE_SPEAKER, Checkpoint, Entity, Episode, Relation, Speaker

FACTS_PER_CONTEXT_ENTRY = 3


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


@dataclass(frozen=True)
class _Episode:
    id: int
    message_id: str
    speaker: str
    role: str
    text: str
    time: datetime
    edited_at: datetime | None


@dataclass
class _Mention:
    """An entity as this chunk knows it, before and after resolution."""

    name: str
    type: str
    summary: str
    episodes: set[int]
    summary_episodes: set[int] = field(default_factory=set)
    decision: str = "new"  # new | merge
    entity_id: int | None = None  # merge target, then the written id
    candidates: tuple[EntityCandidate, ...] = ()
    context_key: int = 0  # placeholder id in the rolling context until written
    forms: dict[int, str] = field(default_factory=dict)  # episode -> the name form it used

    def witnesses(self) -> list[EntityWitness]:
        """Each episode's own mention (memory.graph.wording): the name form it used,
        not the one resolution chose, and the summary if it was drawn from it."""
        return [
            EntityWitness(
                e,
                self.forms.get(e, self.name),
                self.type,
                *((self.summary, frozenset(self.summary_episodes)) if e in self.summary_episodes else ("", frozenset())),
            )
            for e in sorted(self.episodes)
        ]


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


async def _adjudicate(memory: Memory, mentions: Sequence[_Mention], usage: list[Usage]) -> None:
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


# --- reading ------------------------------------------------------------------------


async def _ensure_checkpoint(memory: Memory, conversation_id: int) -> None:
    async with memory.sessions.begin() as session:
        await checkpoints.ensure_checkpoint(session, conversation_id)


def _episode_query(conversation_id: int) -> Select[int, str, str, str, str, datetime, datetime | None]:
    return (
        select(
            Episode.id,
            Episode.platform_message_id,
            Speaker.display_name,
            Episode.role,
            Episode.text,
            Episode.message_time,
            Episode.edited_at,
        )
        .join(Speaker, EPISODE_SPEAKER)
        .where(Episode.conversation_id == conversation_id)
    )


async def _work(
    session: AsyncSession, conversation_id: int, checkpoint: Checkpoint, overlap_tokens: int
) -> tuple[list[_Episode], list[_Episode]]:
    """The episodes to consolidate (id order) and the tail of consolidated ones before them."""
    pending = list(checkpoint.pending_episode_ids or [])
    new_rows = await session.execute(
        _episode_query(conversation_id)
        .where((Episode.id > checkpoint.last_episode_id) | Episode.id.in_(pending))
        .order_by(Episode.id)
    )
    episodes = [_Episode(*row) for row in new_rows]
    lead_rows = await session.execute(
        _episode_query(conversation_id)
        .where(Episode.id <= checkpoint.last_episode_id, Episode.id.not_in(pending or [0]))
        .order_by(Episode.id.desc())
        .limit(max(1, overlap_tokens // 8))
    )
    lead = [_Episode(*row) for row in lead_rows][::-1]
    return episodes, lead


def _line_size(episode: _Episode) -> int:
    return count_tokens(f"{episode.speaker}: {episode.text}") + 8  # + line number and time


def _chunk(
    conversation_id: int, context: Sequence[_Episode], new: Sequence[_Episode], summary: str, rolling: list[dict[str, Any]]
) -> Chunk:
    ordered_new = sorted(new, key=lambda e: (e.time, e.id))
    lines = [
        ChunkLine(number, e.id, e.message_id, e.speaker, e.role, e.text, e.time)
        for number, e in enumerate([*context, *ordered_new], start=1)
    ]
    return Chunk(conversation_id, lines, len(context), summary, rolling)


# --- from extraction to mentions ----------------------------------------------------


def _evidence(extraction: Extraction, allowed: set[int]) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
    """Keep only evidence from user/admin episodes of the chunk; drop what has none left."""
    entities = [
        dataclasses.replace(e, episode_ids=e.episode_ids & allowed) for e in extraction.entities if e.episode_ids & allowed
    ]
    relations = [
        dataclasses.replace(r, episode_ids=r.episode_ids & allowed)
        for r in extraction.relations
        if r.episode_ids & allowed
        and normalize_name(r.subject)
        and normalize_name(r.object)
        and normalize_name(r.subject) != normalize_name(r.object)
    ]
    return entities, relations


def _mentions(entities: Sequence[ExtractedEntity], relations: Sequence[ExtractedRelation]) -> dict[str, _Mention]:
    """One mention per normalised name within the chunk. A relation's episodes mention
    both its ends."""
    mentions: dict[str, _Mention] = {}
    for e in entities:
        key = normalize_name(e.name)
        if not key:
            continue
        mention = mentions.setdefault(key, _Mention(e.name, e.type, "", set()))
        mention.episodes |= e.episode_ids
        mention.forms.update({episode: e.name for episode in e.episode_ids if episode not in mention.forms})
        if e.summary:
            mention.summary, mention.summary_episodes = e.summary, set(e.episode_ids)
    for r in relations:
        for name in (r.subject, r.object):
            mention = mentions.setdefault(normalize_name(name), _Mention(name, "thing", "", set()))
            mention.episodes |= r.episode_ids
            mention.forms.update({episode: name for episode in r.episode_ids if episode not in mention.forms})
    for index, mention in enumerate(mentions.values(), start=1):
        mention.context_key = -index
    return mentions


_CANDIDATES = text(
    "SELECT m.key, c.id, c.name, c.distance "
    "FROM unnest(CAST(:keys AS text[]), CAST(:vectors AS text[])) AS m(key, vector) "
    "CROSS JOIN LATERAL (SELECT e.id, e.name, e.embedding <=> CAST(m.vector AS vector) AS distance FROM entities e "
    "WHERE e.conversation_id = :c AND e.embedding IS NOT NULL ORDER BY distance, e.id LIMIT :k) c"
)


async def _candidates(
    session: AsyncSession, conversation_id: int, vectors: Mapping[str, Sequence[float]], limit: int
) -> dict[str, list[EntityCandidate]]:
    """The ``limit`` nearest entities to each vector (by key, nearest first, then by id:
    entities with one name and vector resolve the same way every time), one query for
    all of them."""
    rows = await session.execute(
        _CANDIDATES,
        {"keys": list(vectors), "vectors": [Vector._to_db(list(v)) for v in vectors.values()], "c": conversation_id, "k": limit},
    )
    found: dict[str, list[EntityCandidate]] = {key: [] for key in vectors}
    for key, entity_id, name, distance in rows:
        found[key].append(EntityCandidate(entity_id, name, 1.0 - float(distance)))
    return found


def _entity_text(mention: _Mention, name: str, type_: str) -> str:
    return graph.entity_document_text(name, type_, mention.summary)


def _context_updates(
    mentions: dict[str, _Mention], relations: Sequence[ExtractedRelation], names: dict[str, tuple[str, str]]
) -> list[dict[str, Any]]:
    """Rolling-context entries for the entities this chunk touched, with their newest facts."""
    facts: dict[str, list[ExtractedRelation]] = {}
    for r in relations:
        facts.setdefault(normalize_name(r.subject), []).append(r)
    updates = []
    for key, mention in mentions.items():
        name, type_ = names[key]
        own = facts.get(key, [])[-FACTS_PER_CONTEXT_ENTRY:]
        text = _entity_text(mention, name, type_)
        if own:
            text += " Facts: " + "; ".join(r.fact for r in own)
        episodes = set(mention.episodes).union(*(r.episode_ids for r in own)) if own else set(mention.episodes)
        key_id = mention.entity_id if mention.decision == "merge" and mention.entity_id is not None else mention.context_key
        updates.append(entry(key_id, name, text, episodes))
    return updates


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


@dataclass
class RunState:
    """What a run carries from one saved chunk to the next: the checkpoint as this run
    last saved it (``last``: its watermark, to detect another run), and offline, the
    summary lines the next offline summary extends."""

    last: int
    summary: str
    summary_ids: list[int]
    rolling: list[dict[str, Any]]
    summary_lines: list[SummaryLine]

    def saved(self, update: CheckpointUpdate, rolling: list[dict[str, Any]], chunk: Chunk, offline: bool) -> None:
        self.last, self.summary, self.summary_ids = update.last_episode_id, update.summary, update.summary_episode_ids
        self.rolling = rolling
        if offline:
            self.summary_lines += [SummaryLine(line.episode_id, f"{line.speaker}: {line.text}") for line in chunk.new_lines]


@dataclass
class _Prepared:
    """A chunk resolved and embedded, with its summary and rolling context: everything
    decided outside the write transaction (the LLM calls included)."""

    mentions: dict[str, _Mention]
    relations: list[ExtractedRelation]
    name_vectors: dict[str, list[float]]
    fact_vectors: list[list[float]]
    doc_vectors: dict[str, list[float]]
    summary: str
    summary_ids: list[int]
    rolling: list[dict[str, Any]]


async def _start(memory: Memory, conversation_id: int, max_tokens: int | None = None) -> tuple[RunState, list[Cut[_Episode]]]:
    """The run state from the saved checkpoint, and the work (the oldest episodes within
    ``max_tokens``, else all) cut into chunks."""
    params = memory.params
    await _ensure_checkpoint(memory, conversation_id)
    async with memory.sessions() as session:
        checkpoint = await session.get(Checkpoint, conversation_id)
        assert checkpoint is not None
        episodes, lead = await _work(session, conversation_id, checkpoint, int(params.chunk_tokens * params.chunk_overlap))
        summary_ids = list(checkpoint.summary_episode_ids or [])
        lines = await summary_lines(session, conversation_id, summary_ids) if memory.llm is None else []
        state = RunState(
            checkpoint.last_episode_id,
            checkpoint.summary,
            summary_ids,
            in_order(await load_context(session, conversation_id)),
            lines,
        )
    sizes = [_line_size(e) for e in episodes]
    taken = within(sizes, max_tokens)
    cuts = cut_chunks(
        episodes[:taken],
        sizes[:taken],
        params.chunk_tokens,
        params.chunk_overlap,
        lead,
        [_line_size(e) for e in lead],
    )
    return state, cuts


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
    state, cuts = await _start(memory, conversation_id, max_tokens)
    for cut in cuts:
        chunk = _chunk(conversation_id, cut.context, cut.new, state.summary, state.rolling)
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
        async with memory.sessions.begin() as session:
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
    memory: Memory, conversation_id: int, mentions: dict[str, _Mention], name_vectors: dict[str, list[float]], usage: list[Usage]
) -> None:
    """Entity resolution: candidates (read), decisions (pure), adjudication of the
    doubtful ones (one batched LLM call)."""
    params = memory.params
    async with memory.sessions() as session:
        candidates = await _candidates(session, conversation_id, name_vectors, params.entity_neighbours)
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
) -> _Prepared:
    """Everything before the write: evidence, mentions, embeddings (names for resolution,
    relation facts, entity documents), resolution, summary and rolling context."""
    evidence_ids = {line.episode_id for line in chunk.lines if line.role != "bot"}
    entities, relations = _evidence(extraction, evidence_ids)
    mentions = _mentions(entities, relations)
    keys = list(mentions)
    # Names and facts in one call (none without a mention: a relation always has two).
    vectors = await _embed(memory, [mentions[k].name for k in keys] + [r.fact for r in relations], usage) if keys else []
    name_vectors = dict(zip(keys, vectors[: len(keys)], strict=True))
    fact_vectors = vectors[len(keys) :]
    if reconcile and keys:
        await _resolve_entities(memory, chunk.conversation_id, mentions, name_vectors, usage)
    names = {k: (m.name, m.type) for k, m in mentions.items()}
    doc_texts = {k: _entity_text(m, m.name, m.type) for k, m in mentions.items()}
    doc_vectors = dict(zip(doc_texts, await _embed(memory, list(doc_texts.values()), usage), strict=True))
    summary, summary_ids = await _next_summary(memory, chunk, extraction, state, usage)
    rolling = merge_context(state.rolling, _context_updates(mentions, relations, names))
    rolling = await _compress(memory, rolling, usage)
    return _Prepared(mentions, relations, name_vectors, fact_vectors, doc_vectors, summary, summary_ids, rolling)


async def _alive(session: AsyncSession, conversation_id: int, ids: Iterable[int]) -> dict[int, datetime | None]:
    """Which of ``ids`` still exist, with their current ``edited_at``."""
    rows = await session.execute(
        select(Episode.id, Episode.edited_at).where(Episode.conversation_id == conversation_id, Episode.id.in_(list(ids)))
    )
    return {episode_id: edited_at for episode_id, edited_at in rows.all()}


def _final_rolling(
    rolling: list[dict[str, Any]], mentions: dict[str, _Mention], vanished: dict[int, int | None], gone: set[int], budget: int
) -> list[dict[str, Any]]:
    """The rolling context to save: without what rests on gone episodes, placeholder ids
    replaced by the written entities' (dropped when none was written), within budget."""
    rolling = without_episodes(rolling, gone)
    placeholders = {m.context_key: m.entity_id for m in mentions.values()} | vanished
    rolling = [{**item, "entity_id": placeholders.get(item["entity_id"], item["entity_id"])} for item in rolling]
    rolling = [item for item in rolling if item["entity_id"] is not None and item["entity_id"] > 0]
    return fit_context(one_per_entity(rolling), budget)


async def _save(
    memory: Memory,
    chunk: Chunk,
    prepared: _Prepared,
    state: RunState,
    read_edits: dict[int, datetime | None],
    usage: list[Usage],
    report: ConsolidationReport,
    reconcile: bool,
) -> bool:
    """Write one chunk with its checkpoint, in one transaction under the graph lock.
    False when another run moved the checkpoint meanwhile (its work stands; this chunk
    is not written twice)."""
    conversation_id, params = chunk.conversation_id, memory.params
    chunk_ids = [line.episode_id for line in chunk.new_lines]
    async with memory.sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.GRAPH)
        checkpoint = await session.get(Checkpoint, conversation_id, with_for_update=True)
        assert checkpoint is not None
        if checkpoint.last_episode_id != state.last:
            return False
        # The rolling context and summary carried from earlier chunks may rest on episodes
        # deleted since this run read them: check those too, or they would be written back.
        carried = {e for item in prepared.rolling for e in item["episode_ids"]} | set(prepared.summary_ids)
        alive = await _alive(session, conversation_id, set(read_edits) | carried)
        deleted, edited = changed_since_read(read_edits, carried, alive)
        gone = deleted | edited
        report.skipped_deleted += len(gone & set(chunk_ids))
        for mention in prepared.mentions.values():
            mention.episodes -= gone
            if mention.summary_episodes & gone:
                mention.summary, mention.summary_episodes = "", set()
        vanished = await _write_entities(
            session, conversation_id, prepared.mentions, prepared.name_vectors, prepared.doc_vectors, report
        )
        await _write_relations(
            session,
            conversation_id,
            chunk,
            prepared.relations,
            prepared.fact_vectors,
            prepared.mentions,
            gone,
            params,
            reconcile,
            report,
        )
        rolling = _final_rolling(prepared.rolling, prepared.mentions, vanished, gone, params.context_tokens)
        update = next_checkpoint(
            state.last,
            checkpoint.pending_episode_ids or [],
            chunk_ids,
            deleted,
            edited,
            prepared.summary,
            prepared.summary_ids,
        )
        await _write_checkpoint(session, checkpoint, update, rolling)
        for item in usage:
            await record_usage(session, conversation_id, item)
            report.count_usage(item)
    if update.summary_stale:  # it may have quoted a deleted message: cleared above, regenerated now
        async with memory.sessions.begin() as session:
            await lock_conversation(session, conversation_id, LockPurpose.GRAPH)
            await rebuild_summary(memory, session, conversation_id)
    state.saved(update, rolling, chunk, offline=memory.llm is None)
    return True


async def _write_checkpoint(
    session: AsyncSession, checkpoint: Checkpoint, update: CheckpointUpdate, rolling: list[dict[str, Any]]
) -> None:
    await save_context(session, checkpoint.conversation_id, await load_context(session, checkpoint.conversation_id), rolling)
    await checkpoints.save_chunk(session, checkpoint, update)


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


async def _write_entities(
    session: AsyncSession,
    conversation_id: int,
    mentions: dict[str, _Mention],
    name_vectors: Mapping[str, Sequence[float]],
    doc_vectors: Mapping[str, Sequence[float]],
    report: ConsolidationReport,
) -> dict[int, int | None]:
    """Merge into or create the mentioned entities. Returns, for merge targets deleted
    meanwhile, the entity created instead (for the rolling context)."""
    targets = {m.entity_id for m in mentions.values() if m.decision == "merge"}
    existing = set(
        (
            await session.execute(
                select(Entity.id).where(Entity.conversation_id == conversation_id, Entity.id.in_(targets or {0}))
            )
        ).scalars()
    )
    vanished: dict[int, int | None] = {}
    support: dict[int, list[EntityWitness]] = {}
    created: list[tuple[str, _Mention]] = []
    for key, mention in mentions.items():
        if mention.decision == "merge" and mention.entity_id is not None and mention.entity_id not in existing:
            vanished[mention.entity_id] = None
            mention.decision = "new"
        if not mention.episodes:
            mention.entity_id = None
        elif mention.decision == "merge" and mention.entity_id is not None:
            support.setdefault(mention.entity_id, []).extend(mention.witnesses())
            report.entities_merged += 1
        else:
            created.append((key, mention))
    await graph.add_entities_support(session, conversation_id, support)
    for key, mention in mentions.items():
        if mention.decision == "merge" and mention.entity_id is not None and mention.episodes and mention.summary:
            await graph.update_entity_summary(
                session,
                conversation_id,
                mention.entity_id,
                summary=mention.summary,
                document_embedding=doc_vectors[key],
                summary_episode_ids=mention.summary_episodes,
            )
    new_ids = await graph.create_entities(
        session,
        conversation_id,
        [
            graph.NewEntity(
                m.name,
                m.type,
                m.summary,
                name_vectors[key],
                m.witnesses(),
                doc_vectors[key],
                {"summary_episode_ids": sorted(m.summary_episodes)} if m.summary else {},
            )
            for key, m in created
        ],
    )
    for (_, mention), entity_id in zip(created, new_ids, strict=True):
        if mention.entity_id in vanished:
            vanished[mention.entity_id] = entity_id
        mention.entity_id = entity_id
    report.entities_created += len(created)
    return vanished


async def _relation_book(session: AsyncSession, conversation_id: int, subjects: set[int], reconcile: bool) -> RelationBook:
    """The active relations of these subjects, for reconciliation (none without it)."""
    rows = (
        await session.execute(
            select(Relation).where(
                Relation.conversation_id == conversation_id, Relation.status == "active", Relation.subject_id.in_(subjects)
            )
        )
        if reconcile
        else None
    )
    return RelationBook.of(
        RelationState(
            r.id,
            r.subject_id,
            r.object_id,
            r.predicate,
            r.fact,
            frozenset(),
            r.status,
            r.superseded_by,
            r.valid_from,
            r.invalid_at,
        )
        for r in (rows.scalars() if rows is not None else [])
    )


async def _write_relations(
    session: AsyncSession,
    conversation_id: int,
    chunk: Chunk,
    relations: Sequence[ExtractedRelation],
    vectors: Sequence[Sequence[float]],
    mentions: dict[str, _Mention],
    gone: set[int],
    params: MemoryParams,
    reconcile: bool,
    report: ConsolidationReport,
) -> None:
    times = {line.episode_id: line.time for line in chunk.lines}
    facts: list[tuple[NewFact, Sequence[float]]] = []
    for relation, vector in zip(relations, vectors, strict=False):
        episodes = relation.episode_ids - gone
        subject = mentions[normalize_name(relation.subject)].entity_id
        obj = mentions[normalize_name(relation.object)].entity_id
        if not episodes or subject is None or obj is None:
            continue
        valid_from = relation.valid_from or min(times[e] for e in episodes)
        decision = cast(FactDecision, relation.decision) if relation.decision in ("new", "duplicate", "contradiction") else None
        facts.append(
            (NewFact(subject, obj, relation.predicate, relation.fact, frozenset(episodes), valid_from, decision), vector)
        )
    if not facts:
        return
    book = await _relation_book(session, conversation_id, {fact.subject_id for fact, _ in facts}, reconcile)
    vector_of: dict[int, Sequence[float]] = {}
    wordings: dict[int, dict[int, FactWording]] = {}  # relation (book id) -> episode -> its wording
    for fact, vector in facts:
        outcome = apply_relation(book, fact, params, reconcile)
        if outcome.kind == "duplicate":
            assert outcome.target_id is not None
            target = outcome.target_id
            report.relations_duplicate += 1
        else:
            target = book.inserted[-1]
            vector_of[target] = vector
            report.relations_created += 1
            report.relations_superseded += outcome.kind == "contradiction"
        wording = FactWording(fact.fact, fact.valid_from, fact.episodes, vector)
        for episode in fact.episodes:
            wordings.setdefault(target, {}).setdefault(episode, wording)
    created = [book.relations[temp_id] for temp_id in book.inserted]
    ids = await graph.create_relations(
        session,
        conversation_id,
        [
            graph.NewRelation(
                state.subject_id,
                state.object_id,
                state.predicate,
                state.fact,
                vector_of[temp_id],
                wordings[temp_id],
                state.valid_from,
            )
            for temp_id, state in zip(book.inserted, created, strict=True)
        ],
    )
    real = dict(zip(book.inserted, ids, strict=True))
    await graph.add_relations_support(
        session,
        conversation_id,
        {relation_id: {e: wordings[relation_id][e] for e in added} for relation_id, added in book.supported.items()},
    )
    for old_id in book.superseded:
        old = book.relations[old_id]
        assert old.superseded_by is not None
        await graph.supersede_relation(
            session, conversation_id, real.get(old_id, old_id), real[old.superseded_by], old.invalid_at
        )
