"""Hybrid search over one conversation's search documents.

For every query variant and every document kind: pgvector nearest neighbours (cosine,
``<=>``) and Postgres full-text search (the question's terms OR-ed, ranked by their
idf, see below), top ``search_top`` each. All the ranked lists are fused by reciprocal
rank fusion, which also merges and de-duplicates across variants. Every statement
filters on ``conversation_id``: nothing from another conversation can come back.

Vector plan. The HNSW index is global over all conversations and pgvector 0.6 filters
*after* the index returns its ``ef_search`` candidates, so a filtered HNSW scan finds
too few rows of a conversation that holds a small share of the table. Therefore:
- a (conversation, kind) with fewer than ``EXACT_SCAN_ROWS`` documents is scanned
  exactly through ``ix_search_documents_scope`` (the ``+ 0`` on the distance keeps the
  planner off the HNSW index): exact and, at that size, a few milliseconds;
- a larger one uses HNSW with ``hnsw.ef_search`` raised (``SET LOCAL``) so that the
  expected number of candidates of this conversation and kind is ``OVERFETCH`` times the
  rows wanted; when that would need more than pgvector's maximum ef_search (1000), the
  exact scan is used: slower but never silently incomplete.
Figures are printed by ``stashbird bench retrieval``.

Full-text query. The question's English lexemes are OR-ed into a ``tsquery``, each
quoted whole (the parser keeps "cut-over" as the lexeme ``cut-ov``, which is what
matches the compound; split again it would match nothing), so that any of them may
match. Matches are ranked by the summed weight of the terms they hold, BM25's idf
measured on up to ``TERM_SAMPLE`` messages of the conversation (all of them in a small
one), ties by ``ts_rank_cd`` (terms close together): ``ts_rank_cd`` alone knows nothing
of how common a term is and ranks a message that only names a speaker with one that
holds the question's rare word. Terms found in more than ``COMMON_TERM_SHARE`` of the
messages (a speaker's name in a two-person chat, "time", "love") are left out of the
query unless nothing else is left: they would match half the conversation and make the
ranking slow on a large one. In a large conversation the rarest terms are kept only
while the messages they are expected to match stay under ``TEXT_MATCH_ROWS``, and at
most that many matches are ranked, which bounds the work (the vector side still sees
everything).

Named speakers. Documents hold a message's text alone; when the question names one
speaker, that speaker's messages are searched by vector on their own as one more ranked
list (the speaker indexed apart from the text), and the messages by or naming them are
weighted up after fusion.

Named times. When the question names a time ("on 7 July, 2023", "last week"), the
messages of that time are searched by vector on their own as one more ranked list, so
they compete even when messages of other times say more of the question's words; they
are also weighted up after fusion.

Sizes. A capped count (index-only, stops at ``EXACT_SCAN_ROWS``) tells small from
large; the size of a large (conversation, kind) is estimated from the planner
statistics (``pg_stats`` frequencies of the conversation and of the kind, the table's
``reltuples``), as the planner itself does, because an exact count of 100K rows costs
more than the whole search. Without statistics the estimate falls back to the cap,
which errs towards a larger ``ef_search`` or the exact scan.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pgvector.sqlalchemy import Vector
from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.retrieval.fusion import (
    preference_weight,
    ranked,
    reciprocal_rank_fusion,
    spread_to_neighbours,
    weigh,
)
from memory.retrieval.timeparse import TimeRange, states_time
from memory.store.documents import KINDS

EXACT_SCAN_ROWS = 20_000
OVERFETCH = 2.0
MAX_EF_SEARCH = 1000
METHODS = ("vector", "text")
# Weight of each kind's ranked lists in the fusion. Facts and entities are views of the
# messages (their supporting episodes are attached to them); a kind with a few dozen
# documents puts every one of them in its top 60, so at full weight a weak fact would
# rank with the best messages.
KIND_WEIGHTS = {"episode": 1.0, "entity": 0.5, "relation": 0.5, "community": 0.5}
METHOD_WEIGHTS = {"vector": 1.0, "text": 1.0}
COMMON_TERM_SHARE = 0.10
TERM_SAMPLE = 1_000
# Matches the full-text query of a large conversation is built to expect, and ranks at
# most: 250 keeps the p99 of a search over 100K messages under 50 ms on two cores
# (500: 53-57 ms); the top 60 of 250 matches of the rarest terms is still a ranking.
TEXT_MATCH_ROWS = 250
# Messages of a named time compared with the question at most (a wide range stays cheap).
DATED_CAP = 2_000
# Below this many messages shares are too coarse to call a term common (one message in
# a short chat is already several percent), and ranking every match costs nothing.
PRUNE_FROM_MESSAGES = 200

Key = tuple[str, int]  # (kind, ref_id)


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


@dataclass
class _Row:
    kind: str
    ref_id: int
    text: str
    message_time: datetime | None
    is_current: bool
    similarity: float = 0.0
    text_rank: float = 0.0


@dataclass(frozen=True)
class VectorPlan:
    """How each kind is searched by vector: ``exact`` kinds and ``hnsw`` kinds with the
    ``ef_search`` to use; kinds with no documents are left out."""

    exact: tuple[str, ...]
    hnsw: tuple[str, ...] = ()
    ef_search: int = 0
    episode_rows: int = 0  # the conversation's messages (estimated when large)


@dataclass
class SearchResult:
    candidates: list[Candidate]
    plan: VectorPlan
    lists: int = field(default=0)


def rare_terms(
    shares: dict[str, float], messages: int = 0, limit: float = COMMON_TERM_SHARE, match_rows: int = TEXT_MATCH_ROWS
) -> list[str]:
    """The query terms to search for: those not common in the conversation (all of
    them when every one is common), rarest first while the ``messages`` they are
    expected to match stay under ``match_rows`` (the rarest is always kept). Pure."""
    rare = sorted((share, term) for term, share in shares.items() if share <= limit) or sorted(
        (share, term) for term, share in shares.items()
    )
    kept: list[str] = []
    expected = 0.0
    for share, term in rare:
        expected += share * messages
        if kept and expected > match_rows:
            break
        kept.append(term)
    return sorted(kept)


def tsquery_text(terms: Sequence[str]) -> str:
    """The lexemes OR-ed as ``tsquery`` input, each quoted so that it is taken as one
    lexeme whatever it holds: the English parser keeps hyphenated words whole
    ("cut-over" is the lexeme ``cut-ov`` besides ``cut`` and ``over``), and a parser
    would split them again. Pure."""
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in terms)


def term_weight(share: float, sampled: int) -> float:
    """How much matching one term says (BM25's idf from its share of the sampled
    messages): a rare term far more than a speaker's name found everywhere. Pure."""
    found = share * sampled
    return math.log(1 + (sampled - found + 0.5) / (found + 0.5))


async def _term_shares(session: AsyncSession, conversation_id: int, question: str) -> tuple[dict[str, float], int]:
    """Each English lexeme of ``question`` and the share of the conversation's messages
    (a sample of at most TERM_SAMPLE) that contain it, and the sample's size. Lexemes
    are compared whole (a hyphenated lexeme is not split again)."""
    rows = (
        await session.execute(
            text(
                "WITH sample AS MATERIALIZED (SELECT tsvector_to_array(tsv) AS lexemes FROM search_documents "
                "WHERE conversation_id = :c AND kind = 'episode' LIMIT :n), "
                "terms AS (SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', :q))) "
                "SELECT terms.lexeme, (SELECT count(*) FROM sample WHERE terms.lexeme = ANY(sample.lexemes)), "
                "(SELECT count(*) FROM sample) FROM terms"
            ),
            {"c": conversation_id, "n": TERM_SAMPLE, "q": question},
        )
    ).all()
    sampled = rows[0][2] if rows else 0
    return {lexeme: (found / total if total else 0.0) for lexeme, found, total in rows}, sampled


def estimate_size(counted: int, table_rows: float, conversation_share: float | None, kind_share: float | None) -> int:
    """Rows of one (conversation, kind): the capped count when it is below the cap,
    else the statistics' estimate, never below the count. Pure."""
    if counted < EXACT_SCAN_ROWS or conversation_share is None or kind_share is None:
        return counted
    return max(counted, int(table_rows * conversation_share * kind_share))


def choose_plan(sizes: dict[str, int], table_rows: int, top: int) -> VectorPlan:
    """Pure plan choice from the per-kind document counts of the conversation and the
    number of rows of the whole table (see the module docstring)."""
    exact: list[str] = []
    hnsw: list[str] = []
    ef = 0
    for kind, size in sizes.items():
        if size == 0:
            continue
        if size < EXACT_SCAN_ROWS:
            exact.append(kind)
            continue
        share = size / max(table_rows, size)
        needed = math.ceil(OVERFETCH * top / share)
        if needed > MAX_EF_SEARCH:
            exact.append(kind)
        else:
            hnsw.append(kind)
            ef = max(ef, needed, 40)
    return VectorPlan(tuple(exact), tuple(hnsw), ef, sizes.get("episode", 0))


async def _plan(session: AsyncSession, conversation_id: int, kinds: Sequence[str], top: int) -> VectorPlan:
    rows = await session.execute(
        text(
            "SELECT k.kind, (SELECT count(*) FROM (SELECT 1 FROM search_documents d "
            "WHERE d.conversation_id = :c AND d.kind = k.kind LIMIT :cap) s) "
            "FROM unnest(CAST(:kinds AS text[])) AS k(kind)"
        ),
        {"c": conversation_id, "kinds": list(kinds), "cap": EXACT_SCAN_ROWS},
    )
    sizes = dict(rows.all())
    table_rows = 0
    if any(size >= EXACT_SCAN_ROWS for size in sizes.values()):
        table_rows, conversation_share, kind_shares = (
            await session.execute(
                text(
                    "SELECT c.reltuples, "
                    "(SELECT m.f FROM pg_stats s, unnest(s.most_common_vals::text::bigint[], s.most_common_freqs) "
                    "AS m(v, f) WHERE s.tablename = 'search_documents' AND s.attname = 'conversation_id' AND m.v = :c), "
                    "(SELECT json_object_agg(m.v, m.f) FROM pg_stats s, unnest(s.most_common_vals::text::text[], "
                    "s.most_common_freqs) AS m(v, f) WHERE s.tablename = 'search_documents' AND s.attname = 'kind') "
                    "FROM pg_class c WHERE c.oid = 'search_documents'::regclass"
                ),
                {"c": conversation_id},
            )
        ).one()
        kind_shares = kind_shares or {}
        sizes = {
            kind: estimate_size(size, table_rows, conversation_share, kind_shares.get(kind))
            for kind, size in sizes.items()
        }
    return choose_plan(sizes, int(table_rows), top)


_COLUMNS = "kind, ref_id, text, message_time, is_current"
# Documents are ranked by ``embedding`` (for an episode, its exchange: see
# memory.episodes.exchange_vectors); the similarity reported is that of the message's own vector,
# which is what says whether this message itself bears on the question. It is looked up
# for the hits only, after the limit.
_HITS = "hits.kind, hits.ref_id, hits.text, hits.message_time, hits.is_current"
_OWN_SIMILARITY = (
    "1 - (coalesce((SELECT ep.embedding FROM episodes ep WHERE hits.kind = 'episode' AND ep.id = hits.ref_id), "
    "hits.embedding) <=> :q)"
)


def _with_own_similarity(hits_sql: str) -> str:
    """``hits_sql`` (rows of _COLUMNS, embedding and distance, nearest first) with the
    own similarity as score, in the same order."""
    return f"(SELECT {_HITS}, {_OWN_SIMILARITY} AS score FROM ({hits_sql}) AS hits ORDER BY hits.distance)"


def _vector_sql(kinds: Sequence[str], exact: bool, own_vectors: bool = False) -> str:
    parts = []
    for kind in kinds:
        if own_vectors:
            hits = (
                "SELECT d.kind, d.ref_id, d.text, d.message_time, d.is_current, d.embedding, "
                "coalesce(ep.embedding, d.embedding) <=> :q AS distance FROM search_documents d "
                "LEFT JOIN episodes ep ON d.kind = 'episode' AND ep.id = d.ref_id "
                f"WHERE d.conversation_id = :c AND d.kind = '{kind}' ORDER BY distance LIMIT :n"
            )
        else:
            order = "(embedding <=> :q) + 0" if exact else "embedding <=> :q"
            hits = (
                f"SELECT {_COLUMNS}, embedding, embedding <=> :q AS distance FROM search_documents "
                f"WHERE conversation_id = :c AND kind = '{kind}' ORDER BY {order} LIMIT :n"
            )
        parts.append(_with_own_similarity(hits))
    return " UNION ALL ".join(parts)


def _in_range_sql(ranges: int) -> str:
    """Nearest messages among those sent in the asked-about time ranges (at most
    ``DATED_CAP`` of them compared, so a wide range stays cheap)."""
    inside = " OR ".join(f"(message_time >= :start{i} AND message_time < :end{i})" for i in range(ranges))
    return _with_own_similarity(
        f"SELECT {_COLUMNS}, embedding, embedding <=> :q AS distance FROM (SELECT {_COLUMNS}, embedding "
        f"FROM search_documents WHERE conversation_id = :c AND kind = 'episode' AND ({inside}) LIMIT :cap) AS dated "
        "ORDER BY distance LIMIT :n"
    )


# Nearest messages among the named speaker's most recent ``DATED_CAP``.
_BY_SPEAKER_SQL = _with_own_similarity(
    f"SELECT {_COLUMNS}, embedding, embedding <=> :q AS distance FROM (SELECT d.kind, d.ref_id, d.text, "
    "d.message_time, d.is_current, d.embedding FROM search_documents d JOIN episodes e ON e.id = d.ref_id "
    "AND e.conversation_id = :c JOIN speakers s ON s.id = e.speaker_id AND s.display_name = :name "
    "WHERE d.conversation_id = :c AND d.kind = 'episode' ORDER BY d.message_time DESC LIMIT :cap) AS theirs "
    "ORDER BY distance LIMIT :n"
)


def _text_sql(kinds: Sequence[str]) -> str:
    """Matches ranked by the summed weight of the query terms they hold, ties by
    ts_rank_cd (terms close together), which is the score returned. Ranks at most
    ``:cap`` matches per kind (NULL: all of them). A large conversation passes
    ``TEXT_MATCH_ROWS``, the number its terms were chosen to match: the sampled shares
    can underestimate a term, and ranking four times as many matches made the slowest
    searches of 100K messages twice as slow (the vector side still sees everything)."""
    parts = [
        f"(SELECT {_COLUMNS}, ts_rank_cd(tsv, CAST(:t AS tsquery)) AS score FROM "
        f"(SELECT {_COLUMNS}, tsv FROM search_documents WHERE conversation_id = :c AND kind = '{kind}' "
        "AND tsv @@ CAST(:t AS tsquery) LIMIT :cap) AS matches "
        "ORDER BY (SELECT sum(q.w) FROM unnest(CAST(:terms AS text[]), CAST(:weights AS float8[])) AS q(term, w) "
        "WHERE q.term = ANY(tsvector_to_array(matches.tsv))) DESC, score DESC LIMIT :n)"
        for kind in kinds
    ]
    return " UNION ALL ".join(parts)


async def _ranked_lists(
    session: AsyncSession, sql: str, params: dict, rows: dict[Key, _Row], field_name: str, vector: bool
) -> dict[str, list[Key]]:
    statement = text(sql)
    if vector:
        statement = statement.bindparams(bindparam("q", type_=Vector()))
    lists: dict[str, list[Key]] = {}
    for kind, ref_id, doc_text, message_time, is_current, score in await session.execute(statement, params):
        key = (kind, ref_id)
        row = rows.setdefault(key, _Row(kind, ref_id, doc_text, message_time, is_current))
        setattr(row, field_name, max(getattr(row, field_name), float(score)))
        lists.setdefault(kind, []).append(key)
    return lists


async def _chain_neighbours(
    session: AsyncSession, conversation_id: int, episode_ids: Sequence[int], rows: dict[Key, _Row]
) -> dict[Key, list[Key]]:
    """The messages just before and after each of ``episode_ids`` in the chain (one
    query through the primary key and the documents' unique ref index); their documents
    are added to ``rows``."""
    neighbours: dict[Key, list[Key]] = {}
    result = await session.execute(
        text(
            "SELECT e.id, d.kind, d.ref_id, d.text, d.message_time, d.is_current FROM episodes e "
            "CROSS JOIN LATERAL (VALUES (e.prev_id), (e.next_id)) AS nb(id) "
            "JOIN search_documents d ON d.kind = 'episode' AND d.ref_id = nb.id AND d.conversation_id = :c "
            "WHERE e.conversation_id = :c AND e.id = ANY(:ids)"
        ),
        {"c": conversation_id, "ids": list(episode_ids)},
    )
    for episode_id, kind, ref_id, doc_text, message_time, is_current in result:
        rows.setdefault((kind, ref_id), _Row(kind, ref_id, doc_text, message_time, is_current))
        neighbours.setdefault(("episode", episode_id), []).append((kind, ref_id))
    return neighbours


async def _about_speaker(session: AsyncSession, conversation_id: int, name: str, rows: dict[Key, _Row]) -> set[Key]:
    """The found messages about the named speaker: theirs, or naming them (first name
    or full name), whoever wrote them. Documents hold no speaker name, so who wrote a
    message is read from its episode."""
    episodes = [ref_id for kind, ref_id in rows if kind == "episode"]
    if not episodes:
        return set()
    theirs = await session.execute(
        text(
            "SELECT e.id FROM episodes e JOIN speakers s ON s.id = e.speaker_id "
            "WHERE e.conversation_id = :c AND e.id = ANY(:ids) AND s.display_name = :name"
        ),
        {"c": conversation_id, "ids": episodes, "name": name},
    )
    forms = "|".join(re.escape(form) for form in dict.fromkeys([name, name.split()[0] if name.split() else name]))
    naming = re.compile(rf"\b({forms})\b", re.IGNORECASE)
    return {("episode", ref_id) for ref_id in theirs.scalars()} | {
        key for key in rows if key[0] == "episode" and naming.search(rows[key].text)
    }


async def search(
    session: AsyncSession,
    conversation_id: int,
    variants: Sequence[QueryVariant],
    *,
    top: int = 60,
    rrf_k: int = 60,
    kinds: Sequence[str] = KINDS,
    time_ranges: Sequence[TimeRange] = (),
    prefer_current: bool = True,
    methods: Sequence[str] = METHODS,
    common_terms: bool = False,
    asks_when: bool = False,
    named_speaker: str | None = None,
    chain_share: float = 0.0,
    exchange_vectors: bool = True,
    text_session: AsyncSession | None = None,
) -> SearchResult:
    """Fused candidates for all ``variants`` in one conversation, best first.

    ``methods`` limits the search to ``vector`` or ``text``, and ``common_terms=True``
    keeps common terms in the full-text query and ``exchange_vectors=False`` ranks
    messages by their own vectors, by an exact scan (the benchmark's raw-turn baselines).
    ``asks_when`` weights up documents that name a time, ``named_speaker`` (a display
    name) the messages of that speaker or naming them (``_about_speaker``); with ``chain_share`` the messages next to a
    found message gain that share of its score (``spread_to_neighbours``).
    Run inside a transaction (the HNSW plan sets ``hnsw.ef_search`` locally). Given a
    second session, ``text_session``, the full-text lists are searched on it while the
    vector lists are searched on ``session``: on a large conversation the two take
    about as long, and the database runs them side by side.
    """
    unknown = (set(kinds) - set(KINDS)) | (set(methods) - set(METHODS))
    if unknown:
        raise ValueError(f"unknown document kinds or search methods: {sorted(unknown)}")
    rows: dict[Key, _Row] = {}
    rankings: list[list[Key]] = []
    weights: list[float] = []

    def add(lists: dict[str, list[Key]], method: str) -> None:
        for kind, keys in lists.items():
            rankings.append(keys)
            weights.append(KIND_WEIGHTS[kind] * METHOD_WEIGHTS[method])

    async def make_plan() -> VectorPlan:
        plan = await _plan(session, conversation_id, kinds, top)
        if plan.hnsw:
            await session.execute(text(f"SET LOCAL hnsw.ef_search = {int(plan.ef_search)}"))
        return plan

    async def vector_lists(planned: asyncio.Task[VectorPlan]) -> list[dict[str, list[Key]]]:
        plan = await planned
        found = []
        if time_ranges and "vector" in methods and "episode" in kinds and variants:
            # A question about a named time brings that time's messages even when other
            # times' messages say more of its words.
            bounds = {f"{edge}{i}": getattr(r, edge) for i, r in enumerate(time_ranges) for edge in ("start", "end")}
            params = {"c": conversation_id, "n": top, "cap": DATED_CAP, "q": list(variants[0].embedding), **bounds}
            found.append(await _ranked_lists(session, _in_range_sql(len(time_ranges)), params, rows, "similarity", True))
        if named_speaker and "vector" in methods and "episode" in kinds and variants:
            # The speaker is indexed apart from the text: the named person's own
            # messages are one more ranked list.
            params = {"c": conversation_id, "n": top, "cap": DATED_CAP, "q": list(variants[0].embedding), "name": named_speaker}
            found.append(await _ranked_lists(session, _BY_SPEAKER_SQL, params, rows, "similarity", True))
        for variant in variants:
            for kinds_, exact in ((plan.exact, True), (plan.hnsw, False)):
                if kinds_ and "vector" in methods:
                    sql = _vector_sql(kinds_, exact, own_vectors=not exchange_vectors)
                    params = {"c": conversation_id, "n": top, "q": list(variant.embedding)}
                    found.append(await _ranked_lists(session, sql, params, rows, "similarity", True))
        return found

    async def text_lists(reader: AsyncSession, planned: asyncio.Task[VectorPlan]) -> list[dict[str, list[Key]]]:
        found: list[dict[str, list[Key]]] = []
        if "text" not in methods:
            return found
        for variant in variants:
            # The term statistics need no plan: on a second connection they are read
            # while the first one plans.
            shares, sampled = await _term_shares(reader, conversation_id, variant.text)
            plan = await planned
            searchable = [k for k in kinds if k in plan.exact or k in plan.hnsw]
            if not searchable:
                return found
            prune = not common_terms and plan.episode_rows >= PRUNE_FROM_MESSAGES
            # The match bound is about cost, which only a large conversation has.
            large = plan.episode_rows if plan.episode_rows >= EXACT_SCAN_ROWS else 0
            terms = rare_terms(shares, large) if prune else sorted(shares)
            if terms:
                # The plain baseline (common_terms) ranks by ts_rank_cd alone.
                term_weights = [0.0 if common_terms else term_weight(shares[t], sampled) for t in terms]
                params = {
                    "c": conversation_id, "n": top, "t": tsquery_text(terms), "terms": terms,
                    "weights": term_weights, "cap": TEXT_MATCH_ROWS if large else None,
                }
                found.append(await _ranked_lists(reader, _text_sql(searchable), params, rows, "text_rank", False))
        return found

    if text_session is None:
        planned = asyncio.create_task(make_plan())
        by_vector = await vector_lists(planned)
        by_text = await text_lists(session, planned)
    else:
        async with asyncio.TaskGroup() as group:
            planned = group.create_task(make_plan())
            vector_task = group.create_task(vector_lists(planned))
            text_task = group.create_task(text_lists(text_session, planned))
        by_vector, by_text = vector_task.result(), text_task.result()
    plan = planned.result()
    for lists in by_vector:
        add(lists, "vector")
    for lists in by_text:
        add(lists, "text")
    fused = reciprocal_rank_fusion(rankings, rrf_k, weights)
    about = await _about_speaker(session, conversation_id, named_speaker, rows) if named_speaker else set()

    def weight(key: Key) -> float:
        row = rows[key]
        in_range = row.message_time is not None and any(r.contains(row.message_time) for r in time_ranges)
        answers_when = asks_when and row.message_time is not None and states_time(row.text, row.message_time)
        by_speaker = key in about
        return preference_weight(
            is_current=row.is_current,
            in_time_range=in_range,
            prefer_current=prefer_current,
            answers_when=answers_when,
            by_named_speaker=by_speaker,
        )

    scores = weigh(fused, weight)
    if chain_share and "episode" in kinds:
        found = [ref_id for kind, ref_id in scores if kind == "episode"]
        scores = spread_to_neighbours(scores, await _chain_neighbours(session, conversation_id, found, rows), chain_share)
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
