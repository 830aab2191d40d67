"""The lab's door into the memory core: what benchmarks and tests need from it and the
product never does. Loaders that store a synthetic conversation as given, searches by a
named baseline or a given vector, residue scans, the forgetting benchmark's comparison
policies, and the names of the calibration and answer-selection internals the
benchmarks sweep.

Here alone (with lab/synthetic.py behind it) the lab reaches into the core's private
modules and tables; the rest of the lab imports the core's public names and these
(tests/architecture/test_public_imports.py). Lab commands take no principal and write no audit row:
they are the operator's by construction (a benchmark holds the database), and they run
as given.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from lab import synthetic
from lab.synthetic import SuppliedCommunity, SuppliedEntity, SuppliedGraph, SuppliedIds, SuppliedRelation
from memory.consolidation.extraction.offline import analyse as offline_findings
from memory.door import resolve
from memory.forgetting.policies import ForgettingPolicy
from memory.graph.reconcile import name_ratio, normalize_name, normalize_predicate
from memory.models.llm import OPERATION_HEADER
from memory.models.tokens import count_tokens
from memory.retrieval.answering import NOT_IN_MEMORY, baseline_reply
from memory.retrieval.calibration import Labelled, calibrate
from memory.retrieval.pipeline import named_speaker
from memory.retrieval.recall import Recall
from memory.retrieval.search import SearchResult
from memory.retrieval.search_plan import VectorPlan
from memory.retrieval.selection import AbstentionRule, SelectionWeights
from memory.retrieval.wording import first_person
from memory.store.embedded import drop_embedded_database
from memory.store.integrity import Integrity
from memory.store.residue import WordResidue
from memory.store.vector_indexes import FACT_INDEX_ROWS, OWN_INDEX_ROWS, TEXT, own_index

if TYPE_CHECKING:
    from memory.core import Memory
    from memory.episodes.append import Message
    from memory.forgetting.deletion import DeletionReport
    from memory.store.conversations import ConversationRef

__all__ = [
    "add_idle_conversations",
    "NOT_IN_MEMORY",
    "OPERATION_HEADER",
    "AbstentionRule",
    "ForgettingPolicy",
    "Integrity",
    "Labelled",
    "Recall",
    "SearchResult",
    "SelectionWeights",
    "VectorPlan",
    "SuppliedCommunity",
    "SuppliedEntity",
    "SuppliedGraph",
    "SuppliedIds",
    "SuppliedRelation",
    "WordResidue",
    "baseline_reply",
    "calibrate",
    "count_tokens",
    "first_person",
    "named_speaker",
    "backend_pid",
    "consolidated_messages",
    "consolidation_lags",
    "deletable_messages",
    "dirty_among",
    "drop_embedded_database",
    "drop_vector_index",
    "job_runs",
    "mark_consolidated",
    "server_pids",
    "waiting_ages",
    "forget_by_policy",
    "integrity",
    "load_bulk_graph",
    "load_bulk_messages",
    "load_supplied",
    "grow_conversations",
    "halfvec_recall",
    "kept_share",
    "plan_check",
    "recall_at",
    "vacuum_analyze",
    "build_vector_index",
    "OWN_INDEX_ROWS",
    "FACT_INDEX_ROWS",
    "store_size",
    "store_bytes",
    "byte_groups",
    "database_directories",
    "search_shards",
    "table_rows",
    "name_ratio",
    "normalize_name",
    "normalize_predicate",
    "offline_findings",
    "recall",
    "residue",
    "search_vector",
    "word_residue",
]


async def recall(
    memory: Memory,
    conversation: ConversationRef,
    question: str,
    *,
    date: datetime | None = None,
    k: int | None = None,
    search: str = "hybrid",
    kinds: Sequence[str] | None = None,
    thread: str | None = None,
) -> Recall:
    """The evidence ``question`` brings back, without an answer: by the service's hybrid
    retrieval (over ``kinds`` of documents, all by default; asked in ``thread`` if given),
    or by a named baseline search (``full_text``, ``vector``: messages only)."""
    from memory.retrieval.recall import recall as _recall

    conversation_id = await resolve(memory, conversation)
    when, size = date or datetime.now(UTC), k or memory.params.evidence_k
    return await _recall(memory, conversation_id, question, when, size, search, kinds, thread)


async def search_vector(memory: Memory, conversation: ConversationRef, question: str, vector: list[float]) -> SearchResult:
    """The hybrid search for a query whose vector is given (a benchmark's synthetic
    conversation carries random vectors)."""
    from memory.retrieval.recall import search_with_vector

    return await search_with_vector(memory, await resolve(memory, conversation), question, vector)


async def forget_by_policy(
    memory: Memory, conversation: ConversationRef, message_id: str, policy: ForgettingPolicy
) -> DeletionReport:
    """Delete a stored message by one of the forgetting benchmark's comparison rules
    (``episode-only``, ``cascade``) instead of the service's: no audit entry, and the
    report holds the chain and the documents removed only."""
    from memory.forgetting.policies import delete_by_policy
    from memory.validation import normalize_id

    conversation_id = await resolve(memory, conversation)
    return await delete_by_policy(memory, conversation_id, normalize_id(message_id, "message"), policy)


async def integrity(memory: Memory, conversation: ConversationRef) -> Integrity:
    """Relations without support and search documents of records that are gone."""
    from memory.store.integrity import check_integrity

    conversation_id = await resolve(memory, conversation)
    async with memory._sessions() as session:
        return await check_integrity(session, conversation_id)


async def residue(memory: Memory, pattern: str) -> dict[str, set[str]]:
    """Every distinct match of the POSIX regex ``pattern`` in any text-like column of the
    whole store (all conversations), with where it was found: proof that deleted text
    survives nowhere."""
    from memory.store.residue import find_tokens

    async with memory._sessions() as session:
        return await find_tokens(session, pattern)


async def word_residue(
    memory: Memory, conversation: ConversationRef, gone_texts: Iterable[str], *, ignore: Iterable[str] = ()
) -> WordResidue:
    """Words that only ``gone_texts`` (deleted or edited-away messages) said, less
    ``ignore``, and where in the conversation's rows any of them is still found."""
    from memory.store.residue import word_residue as _word_residue

    conversation_id = await resolve(memory, conversation)
    async with memory._sessions() as session:
        return await _word_residue(session, conversation_id, gone_texts, ignore)


async def load_supplied(
    memory: Memory,
    conversation: ConversationRef,
    messages: Sequence[Message],
    message_vectors: Sequence[Sequence[float]],
    graph: SuppliedGraph,
    vectors: Iterator[Sequence[float]],
) -> SuppliedIds:
    """Store messages and a graph as given (see ``lab.synthetic``)."""
    conversation_id = await resolve(memory, conversation, create=True)
    return await synthetic.supply_graph(memory, conversation_id, messages, message_vectors, graph, vectors)


async def load_bulk_messages(
    memory: Memory,
    conversation: ConversationRef,
    speaker: str,
    batches: Iterable[tuple[Sequence[str], Iterable[Iterable[float]]]],
) -> None:
    """Many messages with given vectors, bulk-inserted and chained."""
    await synthetic.bulk_messages(memory, await resolve(memory, conversation, create=True), speaker, batches)


async def load_bulk_graph(memory: Memory, conversation: ConversationRef, size: int, person: int = 0) -> None:
    """``size`` messages and a proportional graph with random vectors; ``person`` of the
    messages a third speaker's (``u2``)."""
    await synthetic.bulk_graph(memory, await resolve(memory, conversation, create=True), size, person)


async def grow_conversations(
    memory: Memory,
    growth: Sequence[tuple[ConversationRef, int, int]],
    syllables: Sequence[str],
    word_vectors: Sequence[Sequence[float]] | None = None,
) -> None:
    """For each (conversation, start, count): messages ``b<start>``... and their share of
    a graph, with vectors of their words or random ones (see
    ``lab.synthetic.grow_conversations``)."""
    resolved = [(await resolve(memory, ref, create=True), start, count) for ref, start, count in growth]
    await synthetic.grow_conversations(memory, resolved, syllables, word_vectors)


async def vacuum_analyze(memory: Memory) -> None:
    """VACUUM ANALYZE what the bulk loaders write."""
    await synthetic.vacuum_analyze(memory)


# --- the benchmarks' switches and probes: named statements over the core's tables ----

_CONSOLIDATED = text(
    "SELECT e.id, extract(epoch FROM clock_timestamp() - e.ingested_at) FROM episodes e "
    "JOIN checkpoints k ON k.conversation_id = e.conversation_id "
    "WHERE e.conversation_id = :c AND e.id > :w AND e.id <= k.last_episode_id"
)
_DELETABLE = text(
    "SELECT ep.platform_message_id FROM entity_provenance p JOIN episodes ep ON ep.conversation_id = :c AND ep.id = p.episode_id "
    "JOIN community_members m ON m.entity_id = p.entity_id AND m.conversation_id = :c "
    "JOIN communities c ON c.conversation_id = :c AND c.id = m.community_id AND NOT c.dirty "
    "JOIN checkpoints k ON k.conversation_id = :c "
    "WHERE p.conversation_id = :c AND ep.id <= k.last_episode_id ORDER BY ep.id LIMIT :n"
)
_WAITING = text(
    "SELECT extract(epoch FROM clock_timestamp() - e.ingested_at) FROM episodes e "
    "JOIN checkpoints k ON k.conversation_id = e.conversation_id WHERE e.conversation_id = :c AND e.id > k.last_episode_id "
    "UNION ALL SELECT extract(epoch FROM clock_timestamp() - e.ingested_at) FROM episodes e WHERE e.conversation_id = :c "
    "AND NOT EXISTS (SELECT 1 FROM checkpoints k WHERE k.conversation_id = :c)"
)
_DIRTY = text("SELECT id FROM communities WHERE conversation_id = :c AND id = ANY(:ids) AND dirty")
_RUNS = text("SELECT conversation_id, job, owner, status, result, started_at, finished_at FROM job_runs ORDER BY started_at")
_COVERED = text("SELECT count(*) FROM episodes e JOIN checkpoints k USING (conversation_id) WHERE e.id <= k.last_episode_id")
# Read, then written: Citus cannot EXPLAIN an INSERT ... SELECT with bound values (the
# cluster suite's routing check EXPLAINs every statement).
_LAST = text("SELECT max(id) FROM episodes WHERE conversation_id = :c")
_MARK = text("INSERT INTO checkpoints (conversation_id, last_episode_id) VALUES (:c, :last)")


async def drop_vector_index(memory: Memory) -> None:
    """Drop the search documents' vector indexes (the shared one, where there is one,
    and the conversations' own): exact search, so that a latency figure does not depend
    on the approximate index's build, and a bulk load that does not insert into them."""
    from memory.store.vector_indexes import SHARED_INDEX, drop_all

    async with memory._engine.begin() as connection:
        await connection.execute(text(f"DROP INDEX IF EXISTS {SHARED_INDEX}"))
    await drop_all(memory._engine)


_CITUS = "SELECT count(*) FROM pg_extension WHERE extname = 'citus'"
_SHARDS = "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = CAST('search_documents' AS regclass)"
# Every node's database (the coordinator's and each worker's), or the one server's.
_SIZES = (
    "SELECT pg_database_size(current_database()) + coalesce((SELECT sum(result::bigint) FROM "
    "run_command_on_workers('SELECT pg_database_size(current_database())') WHERE success), 0)"
)


async def build_vector_index(memory: Memory, memory_mb: int, workers: int) -> float | None:
    """Build the shards' shared HNSW index on Citus (one server has none:
    memory.store.vector_indexes), with ``memory_mb`` of maintenance_work_mem in all
    (pgvector builds in memory while the graph fits, and a parallel build takes all of
    it as shared memory at once) and ``workers`` parallel maintenance workers; the
    seconds it took, None on one server. The shards' builds run one per worker at a
    time, each with its share of ``memory_mb`` and never above 256 MB
    (``propagate_set_commands`` carries the settings to them)."""
    import time

    from memory.store.vector_indexes import SHARED_INDEX_SQL

    async with memory._engine.begin() as connection:
        if not (await connection.execute(text(_CITUS))).scalar_one():
            return None
        await connection.execute(text("SET LOCAL citus.propagate_set_commands TO 'local'"))
        # One shard's build at a time per worker, each within 256 MB.
        await connection.execute(text("SET LOCAL citus.max_adaptive_executor_pool_size TO 1"))
        shards = max(1, int((await connection.execute(text(_SHARDS))).scalar_one()), int(memory_mb) // 256)
        await connection.execute(text(f"SET LOCAL maintenance_work_mem TO '{max(64, int(memory_mb) // shards)}MB'"))
        await connection.execute(text(f"SET LOCAL max_parallel_maintenance_workers TO {int(workers)}"))
        began = time.perf_counter()
        await connection.execute(text(SHARED_INDEX_SQL))
        return time.perf_counter() - began


async def store_size(memory: Memory) -> tuple[int, int]:
    """(bytes on disk of the database, over every node under Citus; messages stored)."""
    async with memory._engine.connect() as connection:
        citus = (await connection.execute(text(_CITUS))).scalar_one()
        size = (await connection.execute(text(_SIZES if citus else "SELECT pg_database_size(current_database())"))).scalar_one()
        statement = "/* multi-shard: bench-scale */ SELECT count(*) FROM episodes"
        return int(size), int((await connection.execute(text(statement))).scalar_one())


# Each table's bytes (heap, TOAST, maps) and each index's, on one server, a partition's
# (the search documents', migration 0024) under its table's name and a partition's copy
# of an index under that index's; under Citus each distributed or reference table's over
# its shards, its indexes together.
_PARENT = "LEFT JOIN pg_inherits h ON h.inhrelid = c.oid LEFT JOIN pg_class p ON p.oid = h.inhparent"
_TABLE_BYTES = text(
    f"SELECT coalesce(p.relname, c.relname), pg_table_size(c.oid) FROM pg_class c {_PARENT} "
    "WHERE c.relnamespace = CAST('public' AS regnamespace) AND c.relkind = 'r'"
)
_INDEX_BYTES = text(
    f"SELECT coalesce(p.relname, c.relname), pg_relation_size(c.oid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    f"{_PARENT} WHERE c.relnamespace = CAST('public' AS regnamespace)"
)
_SHARDED_BYTES = text(
    "SELECT CAST(CAST(logicalrelid AS regclass) AS text), citus_table_size(logicalrelid), "
    "citus_total_relation_size(logicalrelid) - citus_table_size(logicalrelid) FROM pg_dist_partition"
)


def byte_groups(tables: Iterable[tuple[str, int]], indexes: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Bytes by ``table NAME`` and ``index NAME``, the conversations' own indexes added up
    by kind (``index own vector``, ``index own text``: one line each, not hundreds),
    largest first. Pure."""
    groups: dict[str, int] = {}
    for name, size in tables:
        groups[f"table {name}"] = groups.get(f"table {name}", 0) + int(size)
    for name, size in indexes:
        own = own_index(name)
        key = f"index {name}" if own is None else f"index own {'text' if own[1] == TEXT else 'vector'}"
        groups[key] = groups.get(key, 0) + int(size)
    return dict(sorted(groups.items(), key=lambda item: (-item[1], item[0])))


async def store_bytes(memory: Memory) -> dict[str, int]:
    """Where the store's bytes are (``byte_groups``); under Citus, each table's shards and
    their indexes (``indexes of NAME``)."""
    async with memory._engine.connect() as connection:
        if (await connection.execute(text(_CITUS))).scalar_one():
            rows = (await connection.execute(_SHARDED_BYTES)).all()
            return byte_groups([(name, size) for name, size, _ in rows], [(f"of {name}", size) for name, _, size in rows])
        tables = [(str(name), int(size)) for name, size in (await connection.execute(_TABLE_BYTES)).all()]
        indexes = [(str(name), int(size)) for name, size in (await connection.execute(_INDEX_BYTES)).all()]
    return byte_groups(tables, indexes)


_PROBE_TABLE = text(
    "CREATE TEMPORARY TABLE halfvec_probe (id integer PRIMARY KEY, full_vector vector, half_vector halfvec) ON COMMIT DROP"
)
_PROBE_ROWS = text(
    "INSERT INTO halfvec_probe SELECT n, CAST(t AS vector), CAST(t AS halfvec) "
    "FROM unnest(CAST(:vectors AS text[])) WITH ORDINALITY AS x(t, n)"
)
_PROBE_TOP = text(
    "SELECT ARRAY(SELECT id FROM halfvec_probe ORDER BY full_vector <=> CAST(:q AS vector), id LIMIT :k), "
    "ARRAY(SELECT id FROM halfvec_probe ORDER BY half_vector <=> CAST(:q AS halfvec), id LIMIT :k)"
)


def _vector_text(vector: Sequence[float]) -> str:
    return "[" + ",".join(str(float(x)) for x in vector) + "]"


def kept_share(full: Sequence[int], half: Sequence[int], k: int) -> float:
    """The share of the first ``k`` of ``full`` that the first ``k`` of ``half`` holds
    (1.0 when ``full`` is empty). Pure."""
    wanted = set(full[:k])
    return len(wanted & set(half[:k])) / len(wanted) if wanted else 1.0


async def halfvec_recall(
    memory: Memory, documents: Sequence[Sequence[float]], queries: Sequence[Sequence[float]], ks: Sequence[int] = (30,)
) -> dict[int, list[float]]:
    """For each query and each k of ``ks``: the share of its exact top k among
    ``documents`` by float4 cosine distance (``vector``) that its exact top k by half
    precision (``halfvec``, documents and query rounded, as the store holds and searches
    them since migration 0023) keeps. Computed by the server, on a temporary table of
    both forms of the same vectors (ties in id order)."""
    shares: dict[int, list[float]] = {k: [] for k in ks}
    async with memory._engine.begin() as connection:
        await connection.execute(_PROBE_TABLE)
        await connection.execute(_PROBE_ROWS, {"vectors": [_vector_text(v) for v in documents]})
        await connection.execute(text("ANALYZE halfvec_probe"))
        for query in queries:
            full, half = (await connection.execute(_PROBE_TOP, {"q": _vector_text(query), "k": max(ks)})).one()
            for k in ks:
                shares[k].append(kept_share(full, half, k))
    return shares


_NEAREST = (
    "SELECT ref_id, embedding <=> :q FROM search_documents WHERE conversation_id = :c AND kind = :kind ORDER BY {order} LIMIT :k"
)


def recall_at(exact: Sequence[tuple[int, float]], found: Sequence[tuple[int, float]], k: int) -> float:
    """The share of the exact top ``k`` (id, distance) that ``found`` holds, a found row
    at no more than the exact k-th distance counting as held (as ann-benchmarks counts):
    among rows tied at that distance any is as near as another (1.0 when ``exact`` is
    empty). Pure."""
    if not exact:
        return 1.0
    wanted = exact[:k]
    return min(len(wanted), sum(1 for _, distance in found[:k] if distance <= wanted[-1][1])) / len(wanted)


async def plan_check(
    memory: Memory, conversation: ConversationRef, vector: Sequence[float], plan: VectorPlan, k: int = 30
) -> tuple[dict[str, float], float]:
    """What a search's vector plan costs in recall and in planning, for one query:
    for each kind the plan reads through an HNSW index (with its ``ef_search``), the
    share of the exact top ``k`` (the same statement scanned exactly) that the index scan
    returns (``recall_at``); and the server's planning time of the search's vector statements (ms, from
    ``EXPLAIN (SUMMARY)``, planned with the query's values as the search plans them)."""
    from pgvector.sqlalchemy import HALFVEC
    from sqlalchemy import bindparam

    from memory.retrieval.search_plan import vector_statements
    from memory.retrieval.search_sql import depth_params, kind_params, set_hnsw_scan, vector_sql

    conversation_id = await resolve(memory, conversation)
    query = bindparam("q", type_=HALFVEC())
    kept: dict[str, float] = {}
    planning = 0.0
    async with memory._sessions.begin() as session:
        if plan.hnsw:
            await set_hnsw_scan(session, plan.ef_search)
        for kind in plan.hnsw:
            values = {"c": conversation_id, "kind": kind, "k": k, "q": list(vector)}
            found = {}
            for exact, order in ((True, "(embedding <=> :q) + 0"), (False, "embedding <=> :q")):
                rows = await session.execute(text(_NEAREST.format(order=order)).bindparams(query), values)
                found[exact] = [(int(ref_id), float(distance)) for ref_id, distance in rows]
            kept[kind] = recall_at(found[True], found[False], k)
        first, second = vector_statements(plan, two_connections=False)
        for kinds, exact in [*first, *second]:
            explain = text(f"EXPLAIN (SUMMARY, FORMAT JSON) {vector_sql(kinds, exact)}").bindparams(query)
            values = {"c": conversation_id, "q": list(vector), **kind_params(kinds), **depth_params(kinds, lambda _: k)}
            summary = (await session.execute(explain, values)).scalar_one()
            planning += float((json.loads(summary) if isinstance(summary, str) else summary)[0]["Planning Time"])
    return kept, planning


# This database's folder of files on a node (its OID under base/; superuser only).
_DIRECTORY = (
    "SELECT current_setting('data_directory') || '/base/' || (SELECT oid FROM pg_database WHERE datname = current_database())"
)


async def database_directories(memory: Memory) -> list[str]:
    """The folder of this database's files on every node (the coordinator's, then each
    worker's under Citus), as each server names it, where the role may read it: a
    benchmark reads the ones on its own machine into the page cache before timing."""
    async with memory._engine.connect() as connection:
        folders = list((await connection.execute(text(_DIRECTORY))).scalars())
        if (await connection.execute(text(_CITUS))).scalar_one():
            workers = f"SELECT result FROM run_command_on_workers($${_DIRECTORY}$$) WHERE success"
            folders += (await connection.execute(text(workers))).scalars()
        return [str(f) for f in folders if f]


_SHARD_ROWS = "SELECT result::bigint FROM run_command_on_shards('search_documents', 'SELECT count(*) FROM %s') WHERE success"
_TASKS = "EXPLAIN (FORMAT JSON) SELECT ref_id FROM search_documents WHERE conversation_id = :c ORDER BY embedding <=> :q LIMIT 60"


async def search_shards(memory: Memory, conversation: ConversationRef) -> dict[str, Any] | None:
    """Under Citus, the search documents' shards (how many, rows min/median/max) and the
    tasks of a vector search in ``conversation`` (one: routed to its shard); None on
    plain Postgres."""
    conversation_id = await resolve(memory, conversation)
    async with memory._engine.connect() as connection:
        if not (await connection.execute(text(_CITUS))).scalar_one():
            return None
        rows = sorted(int(r) for r in (await connection.execute(text(_SHARD_ROWS))).scalars())
        vector = "[" + ",".join(["0.1"] * memory.embedder.dim) + "]"
        plan = (await connection.execute(text(_TASKS), {"c": conversation_id, "q": vector})).scalar_one()
    job = plan[0]["Plan"].get("Distributed Query", {}).get("Job", {}) if isinstance(plan, list) else {}
    return {
        "shards": len(rows),
        "rows_min": rows[0] if rows else 0,
        "rows_median": rows[len(rows) // 2] if rows else 0,
        "rows_max": rows[-1] if rows else 0,
        "search_tasks": job.get("Task Count"),
    }


async def table_rows(memory: Memory, tables: Sequence[str]) -> dict[str, int]:
    """Rows of each of ``tables`` now (exact counts: what a distribution has to move)."""
    async with memory._engine.connect() as connection:
        quote = connection.dialect.identifier_preparer.quote
        counts = {}
        for table in tables:
            statement = f"/* multi-shard: bench-scale */ SELECT count(*) FROM {quote(table)}"
            counts[table] = int((await connection.execute(text(statement))).scalar_one())
        return counts


async def mark_consolidated(memory: Memory, conversation: ConversationRef) -> None:
    """Checkpoint the conversation at its last message, as a served one would be."""
    conversation_id = await resolve(memory, conversation)
    async with memory._engine.begin() as connection:
        last = (await connection.execute(_LAST, {"c": conversation_id})).scalar()
        await connection.execute(_MARK, {"c": conversation_id, "last": last})


async def server_pids(memory: Memory) -> list[int]:
    """The server processes serving this database (for their CPU time)."""
    async with memory._engine.connect() as connection:
        rows = await connection.execute(text("SELECT pid FROM pg_stat_activity WHERE datname = current_database()"))
        return [int(pid) for pid in rows.scalars()]


async def backend_pid(memory: Memory) -> int:
    """The server process of one connection (its parent is the postmaster)."""
    async with memory._engine.connect() as connection:
        return int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def consolidation_lags(memory: Memory, conversation_id: int, after: int) -> list[tuple[int, float]]:
    """(message id, seconds since it was ingested) of the consolidated messages past ``after``."""
    async with memory._engine.connect() as connection:
        rows = await connection.execute(_CONSOLIDATED, {"c": conversation_id, "w": after})
        return [(int(episode), float(lag)) for episode, lag in rows]


async def dirty_among(memory: Memory, conversation_id: int, community_ids: list[int]) -> set[int]:
    """Which of these communities are still dirty."""
    async with memory._engine.connect() as connection:
        return set((await connection.execute(_DIRTY, {"c": conversation_id, "ids": community_ids})).scalars())


async def deletable_messages(memory: Memory, conversation_id: int, limit: int = 20) -> list[str]:
    """Consolidated messages that support an entity of a clean community."""
    async with memory._engine.connect() as connection:
        return list((await connection.execute(_DELETABLE, {"c": conversation_id, "n": limit})).scalars())


async def waiting_ages(memory: Memory, conversation_id: int) -> list[float]:
    """Seconds since each message still waiting for consolidation was ingested."""
    async with memory._engine.connect() as connection:
        return [float(age) for age in (await connection.execute(_WAITING, {"c": conversation_id})).scalars()]


async def job_runs(memory: Memory) -> list[dict[str, Any]]:
    """Every run in the scheduler's run log, oldest first."""
    async with memory._engine.connect() as connection:
        return [dict(row._mapping) for row in await connection.execute(_RUNS)]


async def consolidated_messages(memory: Memory) -> int:
    """How many messages the checkpoints cover, over the whole store."""
    async with memory._engine.connect() as connection:
        return int((await connection.execute(_COVERED)).scalar_one())


# Quiet conversations in bulk (one statement per table, each over all of them); the
# lock rows are those a write leaves behind, with nothing marked due.
_IDLE = [
    "INSERT INTO conversations (platform, workspace_id, channel_id) "
    "SELECT 'bench', :w, 'i' || n FROM generate_series(1, :m) AS n",
    "INSERT INTO speakers (conversation_id, platform_user_id, display_name, role) "
    "SELECT id, 'u', 'Ann', 'user' FROM conversations WHERE platform = 'bench' AND workspace_id = :w",
    "INSERT INTO episodes (conversation_id, speaker_id, role, text, message_time, platform_message_id) "
    "SELECT s.conversation_id, s.id, 'user', 'an old message ' || k, now() - interval '30 days', 'o' || k "
    "FROM speakers s JOIN conversations c ON c.id = s.conversation_id CROSS JOIN generate_series(1, 2) AS k "
    "WHERE c.platform = 'bench' AND c.workspace_id = :w",
    "INSERT INTO checkpoints (conversation_id, last_episode_id) SELECT e.conversation_id, max(e.id) FROM episodes e "
    "JOIN conversations c ON c.id = e.conversation_id WHERE c.platform = 'bench' AND c.workspace_id = :w "
    "GROUP BY e.conversation_id",
    "INSERT INTO conversation_locks (conversation_id, purpose) SELECT c.id, p FROM conversations c "
    "CROSS JOIN unnest(CAST('{1,2}' AS smallint[])) AS p WHERE c.platform = 'bench' AND c.workspace_id = :w",
    "ANALYZE",
]


async def add_idle_conversations(memory: Memory, count: int) -> None:
    """``count`` quiet conversations (two old consolidated messages each, written once,
    nothing waiting or marked due): the many channels of a hosted deployment where
    nothing happens (``bench jobs --idle``)."""
    workspace = f"idle-{uuid.uuid4().hex[:6]}"
    async with memory._engine.begin() as connection:
        for statement in _IDLE if count else ():
            await connection.execute(text(f"/* multi-shard: bench-seed */ {statement}"), {"w": workspace, "m": count})
