"""The statements of the hybrid search (memory/retrieval/search_plan.py explains the plan,
memory/retrieval/search.py runs it).

Every value is bound, document kinds included (one parameter per kind of a ``UNION
ALL``); only the statement's shape varies, with the number of kinds and time ranges and
the exact-scan ``+ 0`` that keeps the planner off the HNSW index. Every statement
filters on ``conversation_id``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from pgvector.sqlalchemy import HALFVEC
from sqlalchemy import TextClause, bindparam, text
from sqlalchemy.ext.asyncio import AsyncSession

Key = tuple[str, int]  # (kind, ref_id)


@dataclass
class Row:
    """A document as the ranked lists found it, with the best scores any list gave it."""

    kind: str
    ref_id: int
    text: str
    message_time: datetime | None
    is_current: bool
    similarity: float = 0.0
    text_rank: float = 0.0


_COLUMNS = "kind, ref_id, text, message_time, is_current"
# Documents are ranked by ``embedding`` (for an episode, its exchange: see
# memory.episodes.exchange_vectors); the similarity reported is that of the message's own vector,
# which is what says whether this message itself bears on the question. It is looked up
# for the hits only, after the limit, in the episode's row.
_HITS = "hits.kind, hits.ref_id, hits.text, hits.message_time, hits.is_current"
_EPISODE = (
    "LEFT JOIN LATERAL (SELECT e.embedding, e.prev_id, e.next_id FROM episodes e WHERE hits.kind = 'episode' "
    "AND e.conversation_id = :c AND e.id = hits.ref_id) AS chain ON true"
)
_OWN_SIMILARITY = "1 - (coalesce(chain.embedding, hits.embedding) <=> :q)"
# With ``around``, each episode found also brings the documents of the messages just
# before and after it (memory.retrieval.fusion.spread_to_neighbours), read through that
# same row: no statement of its own after the fusion (it took 3-4 ms of a search of the
# largest conversation of 1M messages, one round trip and 200-odd lookups after the rest).
_NEIGHBOURS = (
    " LEFT JOIN search_documents pd ON pd.conversation_id = :c AND pd.kind = 'episode' AND pd.ref_id = chain.prev_id"
    " LEFT JOIN search_documents nd ON nd.conversation_id = :c AND nd.kind = 'episode' AND nd.ref_id = chain.next_id"
)
_AROUND = "pd.ref_id, pd.text, pd.message_time, pd.is_current, nd.ref_id, nd.text, nd.message_time, nd.is_current"
_NOT_AROUND = ", ".join(["CAST(NULL AS bigint), CAST(NULL AS text), CAST(NULL AS timestamptz), CAST(NULL AS boolean)"] * 2)


@dataclass
class Found:
    """What the ranked lists found: each document with its best scores, and with
    ``around``, each episode's neighbours in the chain and their documents."""

    rows: dict[Key, Row] = field(default_factory=dict)
    neighbours: dict[Key, list[Key]] = field(default_factory=dict)
    around: dict[Key, Row] = field(default_factory=dict)


def kind_params(kinds: Sequence[str]) -> dict[str, str]:
    """The bound kinds of a ``UNION ALL`` over kinds: ``kind0``, ``kind1``, ..."""
    return {f"kind{i}": kind for i, kind in enumerate(kinds)}


def depth_params(kinds: Sequence[str], depth: Callable[[str], int]) -> dict[str, int]:
    """The bound lengths of a ``vector_sql`` statement's lists: ``n0``, ``n1``, ..."""
    return {f"n{i}": depth(kind) for i, kind in enumerate(kinds)}


def _ranked(hits_sql: str, score: str, order: str, around: bool, episode_row: bool = True) -> str:
    """``hits_sql``'s rows (_COLUMNS and what ``score`` and ``order`` read) with
    ``score``, and the neighbours' columns (NULL without ``around``), in ``order``."""
    joins = (_EPISODE if episode_row or around else "") + (_NEIGHBOURS if around else "")
    chain = _AROUND if around else _NOT_AROUND
    return f"(SELECT {_HITS}, {score} AS score, {chain} FROM ({hits_sql}) AS hits {joins} ORDER BY {order})"


def _with_own_similarity(hits_sql: str, around: bool) -> str:
    """``hits_sql`` (rows of _COLUMNS, embedding and distance, nearest first) with the
    own similarity as score, in the same order."""
    return _ranked(hits_sql, _OWN_SIMILARITY, "hits.distance", around)


def vector_sql(kinds: Sequence[str], exact: bool, own_vectors: bool = False, around: bool = True) -> str:
    """Nearest documents of each kind (``:kind0``...), ``:n0``... of each."""
    parts = []
    for i in range(len(kinds)):
        if own_vectors:
            hits = (
                "SELECT d.kind, d.ref_id, d.text, d.message_time, d.is_current, d.embedding, "
                "coalesce(ep.embedding, d.embedding) <=> :q AS distance FROM search_documents d "
                "LEFT JOIN episodes ep ON ep.conversation_id = :c AND d.kind = 'episode' AND ep.id = d.ref_id "
                f"WHERE d.conversation_id = :c AND d.kind = :kind{i} ORDER BY distance LIMIT :n{i}"
            )
        else:
            order = "(embedding <=> :q) + 0" if exact else "embedding <=> :q"
            hits = (
                f"SELECT {_COLUMNS}, embedding, embedding <=> :q AS distance FROM search_documents "
                f"WHERE conversation_id = :c AND kind = :kind{i} ORDER BY {order} LIMIT :n{i}"
            )
        parts.append(_with_own_similarity(hits, around))
    return " UNION ALL ".join(parts)


def _in_ranges(ranges: int, column: str = "message_time") -> str:
    """Sent in one of the asked-about time ranges (``:start0``, ``:end0``...)."""
    return " OR ".join(f"({column} >= :start{i} AND {column} < :end{i})" for i in range(ranges))


def in_range_sql(ranges: int, around: bool = True) -> str:
    """Nearest messages among those sent in the asked-about time ranges (``:start0``,
    ``:end0``...; at most ``:cap`` of them compared, so a wide range stays cheap)."""
    inside = _in_ranges(ranges)
    return _with_own_similarity(
        f"SELECT {_COLUMNS}, embedding, embedding <=> :q AS distance FROM (SELECT {_COLUMNS}, embedding "
        f"FROM search_documents WHERE conversation_id = :c AND kind = 'episode' AND ({inside}) LIMIT :cap) AS dated "
        "ORDER BY distance LIMIT :n",
        around,
    )


_IN_THREAD = "(e.thread_id = :thread OR e.platform_message_id = :thread)"  # a thread's root is stored without its id


def by_speaker_sql(around: bool = True, in_thread: bool = False, ranges: int = 0) -> str:
    """Nearest messages among the named speaker's (``:name``) most recent ``:cap``, or
    with ``in_thread`` among those in the thread ``:thread``, and with ``ranges`` among
    those sent in the asked-about time ranges (``:start0``, ``:end0``...)."""
    inside = f" AND {_IN_THREAD}" if in_thread else ""
    inside += f" AND ({_in_ranges(ranges, 'd.message_time')})" if ranges else ""
    return _with_own_similarity(
        f"SELECT {_COLUMNS}, embedding, embedding <=> :q AS distance FROM (SELECT d.kind, d.ref_id, d.text, "
        "d.message_time, d.is_current, d.embedding FROM search_documents d JOIN episodes e ON e.id = d.ref_id "
        "AND e.conversation_id = :c JOIN speakers s ON s.conversation_id = :c AND s.id = e.speaker_id "
        "AND s.display_name = :name "
        f"WHERE d.conversation_id = :c AND d.kind = 'episode'{inside} ORDER BY d.message_time DESC LIMIT :cap) AS theirs "
        "ORDER BY distance LIMIT :n",
        around,
    )


def in_thread_sql(around: bool = True) -> str:
    """Nearest messages among the most recent ``:cap`` of the thread ``:thread`` (its
    root, which a platform stores before any reply, and its replies)."""
    return _with_own_similarity(
        f"SELECT {_COLUMNS}, embedding, embedding <=> :q AS distance FROM (SELECT d.kind, d.ref_id, d.text, "
        "d.message_time, d.is_current, d.embedding FROM episodes e JOIN search_documents d ON d.conversation_id = :c "
        f"AND d.kind = 'episode' AND d.ref_id = e.id WHERE e.conversation_id = :c AND {_IN_THREAD} "
        "ORDER BY e.message_time DESC LIMIT :cap) AS thread "
        "ORDER BY distance LIMIT :n",
        around,
    )


def anchored_sql(exact: bool, around: bool = True) -> str:
    """The messages behind the ``:anchors`` entities nearest the question: of each
    entity's ``:scan`` most recent mentions (a person named everywhere stays cheap), the
    ``:supports`` nearest the question, ranked by their entity's distance first
    (``position``). The entities are found exactly or by HNSW, as the plan searches them."""
    order = "(embedding <=> :q) + 0" if exact else "embedding <=> :q"
    return _ranked(
        "SELECT m.kind, m.ref_id, m.text, m.message_time, m.is_current, m.embedding, "
        "row_number() OVER (ORDER BY a.anchor, m.distance) AS position FROM "
        f"(SELECT ref_id, embedding <=> :q AS anchor FROM search_documents WHERE conversation_id = :c AND kind = 'entity' "
        f"ORDER BY {order} LIMIT :anchors) AS a "
        "CROSS JOIN LATERAL (SELECT d.kind, d.ref_id, d.text, d.message_time, d.is_current, d.embedding, "
        "d.embedding <=> :q AS distance FROM (SELECT p.episode_id FROM entity_provenance p WHERE p.conversation_id = :c "
        "AND p.entity_id = a.ref_id ORDER BY p.episode_id DESC LIMIT :scan) AS mention JOIN search_documents d "
        "ON d.conversation_id = :c AND d.kind = 'episode' AND d.ref_id = mention.episode_id "
        "ORDER BY distance LIMIT :supports) AS m",
        _OWN_SIMILARITY,
        "hits.position",
        around,
    )


def text_sql(kinds: Sequence[str], around: bool = True) -> str:
    """Matches ranked by the summed weight of the query terms they hold, ties by
    ts_rank_cd (terms close together), which is the score returned. Ranks at most
    ``:cap`` matches per kind (NULL: all of them). A large conversation passes
    ``TEXT_MATCH_ROWS``, the number its terms were chosen to match: the sampled shares
    can underestimate a term, and ranking four times as many matches made the slowest
    searches of 100K messages twice as slow (the vector side still sees everything).
    Each kind's ranking is numbered as it comes (``position``) and kept in that order
    when the neighbours are joined to it."""
    parts = [
        _ranked(
            "SELECT ranked.*, row_number() OVER () AS position FROM ("
            f"SELECT {_COLUMNS}, ts_rank_cd(tsv, CAST(:t AS tsquery)) AS score FROM "
            f"(SELECT {_COLUMNS}, tsv FROM search_documents WHERE conversation_id = :c AND kind = :kind{i} "
            "AND tsv @@ CAST(:t AS tsquery) LIMIT :cap) AS matches "
            "ORDER BY (SELECT sum(q.w) FROM unnest(CAST(:terms AS text[]), CAST(:weights AS float8[])) AS q(term, w) "
            "WHERE q.term = ANY(tsvector_to_array(matches.tsv))) DESC, score DESC LIMIT :n) AS ranked",
            "hits.score",
            "hits.position",
            around,
            episode_row=False,
        )
        for i in range(len(kinds))
    ]
    return " UNION ALL ".join(parts)


_TERM_SHARES = text(
    "WITH sample AS MATERIALIZED (SELECT tsvector_to_array(tsv) AS lexemes FROM search_documents "
    "WHERE conversation_id = :c AND kind = 'episode' LIMIT :n), "
    "terms AS (SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', :q))) "
    "SELECT terms.lexeme, (SELECT count(*) FROM sample WHERE terms.lexeme = ANY(sample.lexemes)), "
    "(SELECT count(*) FROM sample) FROM terms"
)
# The planner's own row estimates, read from EXPLAIN (planned, never run) rather than from
# pg_stats: under Citus the coordinator holds no statistics of a distributed table, while
# EXPLAIN of a statement routed to the conversation's shard is planned by the worker that
# holds it, with that shard's statistics, and names that shard (``search_documents_102008``).
# The rows the vector index holds are those of the table, or under Citus those of the
# conversation's shard (each shard has its own index): read from the EXPLAIN of a
# statement over all shards with every task shown (``citus.explain_all_tasks``; a custom
# setting plain Postgres keeps and ignores), by the name of the conversation's shard.
# Without it Citus plans one shard of its choosing, often another conversation's.
_CONVERSATION_ROWS = text("EXPLAIN (FORMAT JSON) SELECT 1 FROM search_documents WHERE conversation_id = :c AND kind = :kind")
_ALL_TASKS = text("SELECT set_config('citus.explain_all_tasks', 'on', true)")
_INDEX_ROWS = text("/* multi-shard: search-index-rows */ EXPLAIN (FORMAT JSON) SELECT 1 FROM search_documents")
_BY_SPEAKER = text(
    "SELECT e.id FROM episodes e JOIN speakers s ON s.conversation_id = :c AND s.id = e.speaker_id "
    "WHERE e.conversation_id = :c AND e.id = ANY(:ids) AND s.display_name = :name"
)
# Custom plans: a prepared statement's generic plan, chosen after five runs, knows no
# conversation, so it neither uses a conversation's own (partial) index nor sees how few
# rows the conversation holds; measured, it fell back to a sort of all 13,700 of the
# conversation's messages (37-47 ms) where its own index answers in 3 ms.
_SET_HNSW_SCAN = text("SELECT set_config('hnsw.ef_search', :ef, true), set_config('plan_cache_mode', 'force_custom_plan', true)")


async def term_shares(session: AsyncSession, conversation_id: int, question: str, sample: int) -> tuple[dict[str, float], int]:
    """Each English lexeme of ``question`` and the share of the conversation's messages
    (a sample of at most ``sample``) that contain it, and the sample's size. Lexemes
    are compared whole (a hyphenated lexeme is not split again)."""
    rows = (await session.execute(_TERM_SHARES, {"c": conversation_id, "n": sample, "q": question})).all()
    sampled = rows[0][2] if rows else 0
    return {lexeme: (found / total if total else 0.0) for lexeme, found, total in rows}, sampled


def planned_scans(plan: Any, table: str = "search_documents") -> dict[str, float]:
    """The estimated rows of each scan of ``table`` in an ``EXPLAIN (FORMAT JSON)``
    result, by the relation scanned, at any depth: on one server the scan names the
    conversation's partition (``search_documents_p3``); Citus nests a worker's plan,
    whose scan names a shard such as ``search_documents_102008``, in the coordinator's
    under "Remote Plan" (with every task shown, one per shard). The first scan of a
    relation counts. Pure."""
    found: dict[str, float] = {}
    if isinstance(plan, dict):
        name = str(plan.get("Relation Name", ""))
        if re.fullmatch(rf"{re.escape(table)}(_p\d+)?(_\d+)?", name) and "Plan Rows" in plan:
            found[name] = float(plan["Plan Rows"])
        plan = list(plan.values())
    for part in plan if isinstance(plan, list) else ():
        for name, rows in planned_scans(part, table).items():
            found.setdefault(name, rows)
    return found


async def _planned(session: AsyncSession, statement: TextClause, params: dict[str, Any]) -> dict[str, float]:
    plan = (await session.execute(statement, params)).scalar_one()
    return planned_scans(json.loads(plan) if isinstance(plan, str) else plan)


async def planned_sizes(
    session: AsyncSession, conversation_id: int, kinds: Sequence[str], shared_index: bool = True
) -> tuple[float, dict[str, float]]:
    """The planner's estimates of the rows the shared vector index holds (the part of
    it on the conversation's partition or, under Citus, its shard; 0 without
    ``shared_index``) and of the
    conversation's documents of each of ``kinds`` (missing without an estimate)."""
    estimates = {kind: await _planned(session, _CONVERSATION_ROWS, {"c": conversation_id, "kind": kind}) for kind in kinds}
    sizes = {kind: next(iter(found.values())) for kind, found in estimates.items() if found}
    if not shared_index:
        return 0.0, sizes
    await session.execute(_ALL_TASKS)
    scans = await _planned(session, _INDEX_ROWS, {})
    shards = {name for found in estimates.values() for name in found}
    return max((rows for name, rows in scans.items() if name in shards), default=max(scans.values(), default=0.0)), sizes


async def set_hnsw_scan(session: AsyncSession, ef_search: int) -> None:
    """``hnsw.ef_search`` and custom plans for the rest of this transaction."""
    await session.execute(_SET_HNSW_SCAN, {"ef": str(ef_search)})


@lru_cache(maxsize=256)
def _ranking(sql: str, vector: bool) -> TextClause:
    """A ranking statement, built once per text (building one parses its text for
    parameters: 0.1 ms, several times a search)."""
    statement = text(sql)
    return statement.bindparams(bindparam("q", type_=HALFVEC())) if vector else statement


async def ranked_lists(
    session: AsyncSession, sql: str, params: dict[str, Any], found: Found, field_name: str, vector: bool, label: str = ""
) -> dict[str, list[Key]]:
    """Run one ranking statement: its keys per kind in rank order (all under ``label``
    when given: a list weighed apart from its kind's); each document's best score so far
    is kept in ``found.rows[key].<field_name>``, and each episode's neighbours the
    statement brings in ``found.neighbours`` and ``found.around``."""
    statement = _ranking(sql, vector)
    lists: dict[str, list[Key]] = {}
    listed: set[Key] = set()  # a message the anchored list reaches through two entities counts at its first place
    for kind, ref_id, doc_text, message_time, is_current, score, *chain in await session.execute(statement, params):
        key = (kind, ref_id)
        row = found.rows.setdefault(key, Row(kind, ref_id, doc_text, message_time, is_current))
        setattr(row, field_name, max(getattr(row, field_name), float(score)))
        if key not in listed:
            listed.add(key)
            lists.setdefault(label or kind, []).append(key)
        for neighbour_id, *document in (chain[:4], chain[4:]):
            if neighbour_id is None:
                continue
            neighbour = ("episode", neighbour_id)
            known = found.neighbours.setdefault(key, [])
            if neighbour not in known:
                known.append(neighbour)
            found.around.setdefault(neighbour, Row("episode", neighbour_id, *document))
    return lists


async def written_by(session: AsyncSession, conversation_id: int, episode_ids: Sequence[int], name: str) -> list[int]:
    """Which of ``episode_ids`` the speaker called ``name`` wrote."""
    result = await session.execute(_BY_SPEAKER, {"c": conversation_id, "ids": list(episode_ids), "name": name})
    return list(result.scalars())
