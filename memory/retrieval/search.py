"""Hybrid search over one conversation's search documents.

For every query variant and every document kind: pgvector nearest neighbours (cosine,
``<=>``, between ``halfvec`` values: the stored vectors and the query, bound as one, are
in half precision since migration 0023) and Postgres full-text search (the question's
terms OR-ed, ranked by their idf), top ``search_top`` each (the messages' vector lists
``message_vector_top``: MemoryParams). All the ranked lists are
fused by reciprocal rank fusion, which also merges and de-duplicates across variants.
Every statement filters on ``conversation_id``: nothing from another conversation can
come back.

How each kind is searched by vector, and which terms the full text looks for, is chosen
by memory.retrieval.search_plan (pure); this module reads what the choice needs from the
database, runs the ranked lists it chose and fuses them.

Named speakers. Documents hold a message's text alone; each speaker the question names
("What do Jon and Gina both like?" names two) has their messages searched by vector on
their own as one more ranked list (the speaker indexed apart from the text), and the
messages by or naming any of them are weighted up after fusion.

Threads. A question asked inside a thread has that thread's messages searched by vector
on their own as one more ranked list (the thread first, then the channel), and the
speakers it names have their messages in that thread searched apart.

Anchored messages. The entities nearest the question (``anchors``), found by their own
vectors, bring the messages that mention them (``anchor_supports`` each, the nearest the
question) as one more ranked list, weighed at ``ANCHORED_WEIGHT``: a question asks for a
kind of thing ("What activities...") whose instances the messages name without its word.

Named times. When the question names a time ("on 7 July, 2023", "last week"), the
messages of that time are searched by vector on their own as one more ranked list, so
they compete even when messages of other times say more of the question's words; they
are also weighted up after fusion. When it names people too, each one's messages of that
time are one more list: in a busy channel a day holds every conversation's messages.

Sizes. A capped count (index-only, stops at ``EXACT_SCAN_ROWS``) tells small from
large; the size of a large (conversation, kind), and the rows its vector index holds,
are the planner's own estimates, read from ``EXPLAIN`` (planned, not run), because an
exact count of 100K rows costs more than the whole search. ``EXPLAIN`` rather than
``pg_stats``: under Citus the coordinator has no statistics of a distributed table,
while a statement routed to the conversation's shard is planned by the worker that holds
it, with that shard's statistics, and the index is the shard's (search_sql). Without
statistics the estimate falls back to the cap, which errs towards a larger
``ef_search`` or the exact scan.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from memory.retrieval import search_sql as sql
from memory.retrieval.fusion import (
    preference_weight,
    ranked,
    reciprocal_rank_fusion,
    spread_to_neighbours,
    weigh,
)
from memory.retrieval.search_plan import (
    EXACT_SCAN_ROWS,
    PRUNE_FROM_MESSAGES,
    TERM_SAMPLE,
    TEXT_MATCH_ROWS,
    Statements,
    VectorPlan,
    choose_plan,
    estimate_size,
    rare_terms,
    term_weight,
    tsquery_text,
    vector_statements,
)
from memory.retrieval.search_sql import Key
from memory.retrieval.timeparse import TimeRange, states_time
from memory.store.database import custom_plans
from memory.store.documents import KINDS, capped_counts
from memory.store.vector_indexes import OWN_INDEX_ROWS, own_index_rows, present

METHODS = ("vector", "text")
# Weight of each ranked list in the fusion, by what it lists: a kind of document, or the
# anchored list (``anchored_sql``). Facts and entities are views of the messages (their
# supporting episodes are attached to them); a kind with a few dozen documents puts every
# one of them in its top 60, so at full weight a weak fact would rank with the best
# messages. The anchored list's weight, and the entities and supports per entity of the
# service's search (MemoryParams), were chosen on the LoCoMo calibration split: all
# evidence at K = 30 84.3 -> 84.9% (inference questions 56.8 -> 63.6%); held-out 80.9 -> 81.6%.
ANCHORED_WEIGHT = 0.3
LIST_WEIGHTS = {"episode": 1.0, "entity": 0.5, "relation": 0.5, "community": 0.5, "anchored": ANCHORED_WEIGHT}
METHOD_WEIGHTS = {"vector": 1.0, "text": 1.0}
# An anchor's mentions ranked at most: its most recent ones (a person named in every
# other message must not cost a scan of the conversation).
ANCHOR_SCAN = 200
# Messages of a named time compared with the question at most (a wide range stays cheap).
DATED_CAP = 2_000


@dataclass(frozen=True)
class QueryVariant:
    """One phrasing of what is asked: the question itself, a sub-query, an anchor phrase."""

    text: str
    embedding: Sequence[float]


@dataclass(frozen=True)
class Candidate:
    """One fused search result. ``similarity`` is the best cosine similarity of the
    document's own vector any variant reached (0 when only full-text or a neighbour
    found it); ``text_rank`` the best ts_rank_cd."""

    kind: str
    ref_id: int
    text: str
    message_time: datetime | None
    is_current: bool
    score: float
    similarity: float
    text_rank: float

    @property
    def key(self) -> Key:
        return (self.kind, self.ref_id)


@dataclass(frozen=True)
class SearchConfig:
    """What a search looks at and how it ranks: search behaviour as data, so that the
    service's search and the benchmark's baselines are configurations (``PRESETS``),
    not flags. ``methods`` limits the search to ``vector`` or ``text``;
    ``common_terms=True`` keeps common terms in the full-text query and ranks by
    ts_rank_cd alone; ``exchange_vectors=False`` ranks messages by their own vectors,
    by an exact scan; with ``chain_share`` the messages next to a found message gain
    that share of its score (``spread_to_neighbours``); with ``anchors``, the messages
    behind that many entities nearest the question are one more ranked list
    (``anchor_supports`` per entity). Each ranked list holds ``top`` documents, the
    messages' vector lists ``message_vector_top`` (None: ``top``); an HNSW scan's
    ``ef_search`` is chosen for ``top`` and is at least twice it, so the deeper lists
    come from the same candidates."""

    top: int = 60
    message_vector_top: int | None = None
    rrf_k: int = 60
    kinds: tuple[str, ...] = KINDS
    methods: tuple[str, ...] = METHODS
    common_terms: bool = False
    exchange_vectors: bool = True
    chain_share: float = 0.0
    anchors: int = 0
    anchor_supports: int = 0

    def __post_init__(self) -> None:
        unknown = (set(self.kinds) - set(KINDS)) | (set(self.methods) - set(METHODS))
        if unknown:
            raise ValueError(f"unknown document kinds or search methods: {sorted(unknown)}")
        if self.message_vector_top is not None and not self.top <= self.message_vector_top <= 2 * self.top:
            raise ValueError(f"message_vector_top must be between top and twice it, not {self.message_vector_top}")

    def depth(self, kind: str) -> int:
        """How many documents of ``kind`` a vector list holds."""
        return (self.message_vector_top or self.top) if kind == "episode" else self.top


@dataclass(frozen=True)
class SearchHints:
    """What the question itself says: the times it names (their messages are searched
    on their own and weighted up), whether it asks about the present (current facts
    weighted up), whether it asks when (documents that name a time weighted up), and
    the speakers it names (display names: their messages searched apart and weighted up),
    and the thread it was asked in (its messages searched apart)."""

    time_ranges: tuple[TimeRange, ...] = ()
    prefer_current: bool = True
    asks_when: bool = False
    named_speakers: tuple[str, ...] = ()
    thread: str | None = None


# Named configurations. The service's own search takes its sizes from MemoryParams
# (``memory.retrieval.pipeline``); these are the raw-turn baselines of
# ``stashbird bench retrieval`` (plain full text, plain vector search of the messages'
# own vectors), sized by ``dataclasses.replace(preset, top=k)``.
PRESETS: dict[str, SearchConfig] = {
    "full_text": SearchConfig(kinds=("episode",), methods=("text",), common_terms=True, exchange_vectors=False),
    "vector": SearchConfig(kinds=("episode",), methods=("vector",), common_terms=True, exchange_vectors=False),
}


@dataclass
class SearchResult:
    candidates: list[Candidate]
    plan: VectorPlan
    lists: int = field(default=0)


async def _plan(session: AsyncSession, conversation_id: int, kinds: Sequence[str], top: int) -> VectorPlan:
    """Count (capped) and, for a large kind, estimate; choose; set ``ef_search`` for HNSW."""
    # A kind with its own index is not counted (past 20K rows the count costs more than
    # the search). Its own index is searched whatever its size; its size, which the
    # full text's bounds need for the messages, is the rows the catalogue says the index
    # holds (read with its validity), else the planner's estimate (an EXPLAIN, 2-8 ms at
    # 1M messages), else own_index_rows(kind), the least it held when it was built.
    indexes = await present(session, conversation_id, kinds)
    own = indexes.own
    sizes = await capped_counts(session, conversation_id, [k for k in kinds if k not in own], EXACT_SCAN_ROWS)
    table_rows = 0.0
    large = [kind for kind, size in sizes.items() if size >= EXACT_SCAN_ROWS]
    unknown = [kind for kind in own if kind == "episode" and kind not in indexes.rows]
    planned: dict[str, float] = {}
    if large or unknown:
        table_rows, planned = await sql.planned_sizes(session, conversation_id, [*large, *unknown], indexes.shared)
        sizes = {kind: estimate_size(size, planned.get(kind)) for kind, size in sizes.items()}
    sizes |= {kind: int(indexes.rows.get(kind, planned.get(kind, own_index_rows(kind)))) for kind in own}
    plan = choose_plan(sizes, int(table_rows), top, own, shared=indexes.shared)
    if plan.hnsw:
        await sql.set_hnsw_scan(session, plan.ef_search)
    return plan


@dataclass
class _Search:
    """One search's inputs and what its ranked lists found so far."""

    conversation_id: int
    variants: Sequence[QueryVariant]
    config: SearchConfig
    hints: SearchHints
    found: sql.Found = field(default_factory=sql.Found)
    # The full text's connection is set once (custom plans, and the anchored list's
    # ``ef_search`` in the same statement): each statement is a round trip.
    reader_set: bool = False

    def base_params(self) -> dict[str, Any]:
        return {"c": self.conversation_id, "n": self.config.top}

    @property
    def around(self) -> bool:
        """Whether the ranked lists bring each episode's neighbours (the chain spread's)."""
        return bool(self.config.chain_share) and "episode" in self.config.kinds


async def _kind_lists(session: AsyncSession, run: _Search, statements: Statements) -> list[dict[str, list[Key]]]:
    """Each variant's nearest documents of each statement's kinds, exact or by HNSW."""
    found = list[dict[str, list[Key]]]()
    for variant in run.variants if "vector" in run.config.methods else ():
        for kinds, exact in statements:
            statement = sql.vector_sql(kinds, exact, own_vectors=not run.config.exchange_vectors, around=run.around)
            params = {**run.base_params(), "q": list(variant.embedding), **sql.kind_params(kinds)}
            params |= sql.depth_params(kinds, run.config.depth)
            found.append(await sql.ranked_lists(session, statement, params, run.found, "similarity", True))
    return found


async def _messages_apart(session: AsyncSession, run: _Search, statement: str, **bounds: Any) -> dict[str, list[Key]]:
    """One more ranked list of messages searched apart (a named time's, speaker's or
    thread's, at most ``DATED_CAP`` compared) by the question's vector."""
    params = {**run.base_params(), "n": run.config.depth("episode"), "cap": DATED_CAP, "q": list(run.variants[0].embedding)}
    params |= bounds
    return await sql.ranked_lists(session, statement, params, run.found, "similarity", True)


async def _vector_lists(
    session: AsyncSession, run: _Search, planned: Awaitable[VectorPlan], *, two_connections: bool = False
) -> list[dict[str, list[Key]]]:
    """The vector lists of the first connection (``vector_statements``)."""
    plan = await planned
    config, hints, found = run.config, run.hints, list[dict[str, list[Key]]]()
    if "vector" not in config.methods:
        return found
    if "episode" in config.kinds and run.variants:
        ranges = hints.time_ranges
        bounds = {f"{edge}{i}": getattr(r, edge) for i, r in enumerate(ranges) for edge in ("start", "end")}
        if ranges:
            # A question about a named time brings that time's messages even when other
            # times' messages say more of its words.
            found.append(await _messages_apart(session, run, sql.in_range_sql(len(ranges), run.around), **bounds))
        in_thread = {"thread": hints.thread} if hints.thread is not None else {}
        for name in hints.named_speakers:
            # The speaker is indexed apart from the text: each named person's own messages
            # are one more ranked list; asked in a thread, their messages in that thread
            # (a name in a busy channel may talk in several threads about other things).
            statement = sql.by_speaker_sql(run.around, in_thread=bool(in_thread))
            found.append(await _messages_apart(session, run, statement, name=name, **in_thread))
            if ranges:
                # And their messages of the named time: a channel's day holds every
                # conversation's messages, the named person's among many (LoCoMo
                # calibration ring channel, all evidence at K = 30: 81.3 -> 81.6%).
                statement = sql.by_speaker_sql(run.around, in_thread=bool(in_thread), ranges=len(ranges))
                found.append(await _messages_apart(session, run, statement, name=name, **in_thread, **bounds))
        if hints.thread is not None:
            # A question asked in a thread looks at its thread first: its messages are one
            # more ranked list, whatever the rest of the channel says.
            found.append(await _messages_apart(session, run, sql.in_thread_sql(run.around), thread=hints.thread))
    return found + await _kind_lists(session, run, vector_statements(plan, two_connections)[0])


def _anchored(run: _Search, plan: VectorPlan) -> bool:
    """Whether the search brings the anchored list: it looks at entities and messages by
    vector and the conversation has entities."""
    config = run.config
    searched = "entity" in plan.exact or "entity" in plan.hnsw
    return bool(config.anchors and searched and "episode" in config.kinds and "vector" in config.methods and run.variants)


def _anchor_ef(run: _Search, plan: VectorPlan) -> int | None:
    """The anchored list's ``ef_search`` when it scans the entities' index (None when it
    does not): the plan's candidates scaled from ``top`` rows to ``anchors``. Set on the
    connection that runs the list (it may be the second one)."""
    if not _anchored(run, plan) or "entity" not in plan.hnsw:
        return None
    return max(40, math.ceil(plan.ef_search * run.config.anchors / run.config.top))


async def _anchored_lists(session: AsyncSession, run: _Search, plan: VectorPlan) -> list[dict[str, list[Key]]]:
    """The messages behind the entities nearest the question (``anchored_sql``), when the
    search looks at entities and messages and the conversation has entities."""
    if not _anchored(run, plan):
        return []
    config = run.config
    params = {
        **run.base_params(),
        "q": list(run.variants[0].embedding),
        "anchors": config.anchors,
        "supports": config.anchor_supports,
        "scan": ANCHOR_SCAN,
    }
    ef = _anchor_ef(run, plan)
    if ef is not None and not run.reader_set:
        await sql.set_hnsw_scan(session, ef)
    statement = sql.anchored_sql(ef is None, run.around)
    return [await sql.ranked_lists(session, statement, params, run.found, "similarity", True, label="anchored")]


async def _text_lists(reader: AsyncSession, run: _Search, planned: Awaitable[VectorPlan]) -> list[dict[str, list[Key]]]:
    config, found = run.config, list[dict[str, list[Key]]]()
    if "text" not in config.methods:
        return found
    for variant in run.variants:
        # The term statistics need no plan: on a second connection they are read
        # while the first one plans.
        shares, sampled = await sql.term_shares(reader, run.conversation_id, variant.text, TERM_SAMPLE)
        plan = await planned
        searchable = [k for k in config.kinds if k in plan.exact or k in plan.hnsw]
        if not searchable:
            return found
        prune = not config.common_terms and plan.episode_rows >= PRUNE_FROM_MESSAGES
        # The match bound is about cost, which only a large conversation has.
        large = plan.episode_rows if plan.episode_rows >= EXACT_SCAN_ROWS else 0
        terms = rare_terms(shares, large) if prune else sorted(shares)
        if terms and plan.episode_rows >= OWN_INDEX_ROWS and not run.reader_set:  # it may have its own text index
            ef = _anchor_ef(run, plan)  # the anchored list's setting rides along
            await (custom_plans(reader) if ef is None else sql.set_hnsw_scan(reader, ef))
            run.reader_set = True
        if terms:
            # The plain baseline (common_terms) ranks by ts_rank_cd alone.
            weights = [0.0 if config.common_terms else term_weight(shares[t], sampled) for t in terms]
            params = {
                **run.base_params(),
                "t": tsquery_text(terms),
                "terms": terms,
                "weights": weights,
                "cap": TEXT_MATCH_ROWS if large else None,
                **sql.kind_params(searchable),
            }
            statement = sql.text_sql(searchable, run.around)
            found.append(await sql.ranked_lists(reader, statement, params, run.found, "text_rank", False))
    return found


async def _text_then_exact(
    reader: AsyncSession, run: _Search, planned: Awaitable[VectorPlan]
) -> tuple[list[dict[str, list[Key]]], list[dict[str, list[Key]]]]:
    """The full-text lists, then the vector statements of the second connection
    (``vector_statements``) and the anchored list."""
    by_text = await _text_lists(reader, run, planned)
    plan = await planned
    return by_text, await _kind_lists(reader, run, vector_statements(plan, True)[1]) + await _anchored_lists(reader, run, plan)


async def _ranked(
    session: AsyncSession, run: _Search, text_session: AsyncSession | None
) -> tuple[VectorPlan, list[dict[str, list[Key]]], list[dict[str, list[Key]]]]:
    """The plan and the vector and full-text lists, side by side on two connections
    when there are two."""
    kinds, top = run.config.kinds, run.config.top
    if text_session is None:
        planned = asyncio.create_task(_plan(session, run.conversation_id, kinds, top))
        by_vector = await _vector_lists(session, run, planned)
        by_text = await _text_lists(session, run, planned)
        return planned.result(), by_vector + await _anchored_lists(session, run, planned.result()), by_text
    async with asyncio.TaskGroup() as group:
        planned = group.create_task(_plan(session, run.conversation_id, kinds, top))
        vector_task = group.create_task(_vector_lists(session, run, planned, two_connections=True))
        text_task = group.create_task(_text_then_exact(text_session, run, planned))
    by_text, exact = text_task.result()
    return planned.result(), vector_task.result() + exact, by_text


async def _about_speakers(
    session: AsyncSession, conversation_id: int, names: Sequence[str], rows: dict[Key, sql.Row]
) -> set[Key]:
    """The found messages about the named speakers: theirs, or naming them (first name
    or full name), whoever wrote them. Documents hold no speaker name, so who wrote a
    message is read from its episode."""
    episodes = [ref_id for kind, ref_id in rows if kind == "episode"]
    about: set[Key] = set()
    for name in names if episodes else ():
        theirs = await sql.written_by(session, conversation_id, episodes, name)
        forms = "|".join(re.escape(form) for form in dict.fromkeys([name, name.split()[0] if name.split() else name]))
        naming = re.compile(rf"\b({forms})\b", re.IGNORECASE)
        about |= {("episode", ref_id) for ref_id in theirs}
        about |= {key for key in rows if key[0] == "episode" and naming.search(rows[key].text)}
    return about


def _preference(row: sql.Row, hints: SearchHints, about: bool) -> float:
    in_range = row.message_time is not None and any(r.contains(row.message_time) for r in hints.time_ranges)
    answers_when = hints.asks_when and row.message_time is not None and states_time(row.text, row.message_time)
    by_speaker = about
    return preference_weight(
        is_current=row.is_current,
        in_time_range=in_range,
        prefer_current=hints.prefer_current,
        answers_when=answers_when,
        by_named_speaker=by_speaker,
    )


async def search(
    session: AsyncSession,
    conversation_id: int,
    variants: Sequence[QueryVariant],
    config: SearchConfig = SearchConfig(),
    hints: SearchHints = SearchHints(),
    *,
    text_session: AsyncSession | None = None,
) -> SearchResult:
    """Fused candidates for all ``variants`` in one conversation, best first.

    Run inside a transaction (the HNSW plan sets ``hnsw.ef_search`` locally). Given a
    second session, ``text_session``, the full-text lists are searched on it while the
    vector lists are searched on ``session``, and the database runs them side by side;
    a plan with HNSW kinds leaves its exact scans to ``text_session`` too, after the
    full text (``vector_statements``).
    """
    run = _Search(conversation_id, variants, config, hints)
    plan, by_vector, by_text = await _ranked(session, run, text_session)
    rankings = [keys for lists in (*by_vector, *by_text) for keys in lists.values()]
    weights = [
        LIST_WEIGHTS[listed] * METHOD_WEIGHTS[method]
        for method, found in (("vector", by_vector), ("text", by_text))
        for lists in found
        for listed in lists
    ]
    rows = run.found.rows
    about = await _about_speakers(session, conversation_id, hints.named_speakers, rows)
    fused = reciprocal_rank_fusion(rankings, config.rrf_k, weights)
    scores = weigh(fused, lambda key: _preference(rows[key], hints, key in about))
    if run.around:
        for key, row in run.found.around.items():
            rows.setdefault(key, row)
        scores = spread_to_neighbours(scores, run.found.neighbours, config.chain_share)
    candidates = [
        Candidate(
            kind=rows[key].kind,
            ref_id=rows[key].ref_id,
            text=rows[key].text,
            message_time=rows[key].message_time,
            is_current=rows[key].is_current,
            score=scores[key],
            similarity=rows[key].similarity,
            text_rank=rows[key].text_rank,
        )
        for key in ranked(scores, tie_break=lambda key: (-rows[key].similarity, key))
    ]
    return SearchResult(candidates, plan, len(rankings))
