"""The search documents' vector indexes: a large conversation's own, and on Citus the
shards' shared one.

pgvector filters an HNSW scan by conversation only after the index
returns its ``ef_search`` nearest rows, so an index over every conversation cannot serve
one that holds a small share of it: the search scans such a conversation exactly
(memory.retrieval.search_plan), which takes a few milliseconds below ``EXACT_SCAN_ROWS``.

Past ``own_index_rows(kind)`` documents of one kind (``OWN_INDEX_ROWS`` messages or
communities, ``FACT_INDEX_ROWS`` entities or relations) a conversation gets an index of
its own, a partial HNSW index (``WHERE conversation_id = N AND kind = 'k'``) on the
partition that holds the conversation (below): the planner uses it
for that conversation's statements (given the values, so the search plans them with
``plan_cache_mode = force_custom_plan``), the share is 1, and a search of 60 rows took
3 ms on a conversation of 13,700 messages that an exact scan served in 35-40 ms.
Inserts and deletions keep it up to date like any index.

It is built ``CONCURRENTLY`` (reads and writes go on; it waits for transactions open
before it) by the scheduler after a conversation's consolidation run
(``memory.index_conversation``), or by a benchmark after a bulk load. A build that
failed half-way leaves an invalid index, which the next build drops and makes again; so
is an index built with other settings than ``create_sql``'s (``FACT_EF_CONSTRUCTION``).
Every vector index is over ``halfvec`` (``OPCLASS``): migration 0023 changed the
columns' type and made each own index again with it.
Each index adds a little to the planning of every statement on the table, so they are
for the large conversations, not for all: at 1M messages over 1,000 conversations
(Zipf 1.0), 92 vector and 66 full-text indexes in 66 conversations (built in 393 s
and 77 s on two cores) at 2,000 documents of every kind. Entities and relations have
the lower threshold: every search reads both kinds, and the exact scan of a kind of
1,000-2,000 rows is what set the tail. On that store 26 more indexes (13 of each,
built in 45-61 s) took the random conversation's search p99 from a mean 90.6 ms to
75.2 ms over four alternated warm runs (``bench scale --reuse --queries 400``, medians
33-41 to 29-38 ms), with no consistent cost to deletions; all kinds at 1,000 would
have added 94 vector and 68 full-text indexes, each a little more planning.

That planning is what the partial indexes cost at scale: a custom plan opens every
index of the table it scans and checks each partial one's predicate. On one table the
largest conversation's search spent about 2 ms planning its statements on
search_documents at 100K messages (22 own indexes) and about 10 ms at 1M (184), a
quarter of its median there, and every other conversation's search paid the same. So on
one server the table is hash-partitioned by conversation (migration 0024) and a
conversation's own indexes are built on its partition: a statement given its
conversation plans against that partition's indexes only.

Past ``OWN_INDEX_ROWS`` messages it also gets a full-text index of its own (``TEXT``, a
partial GIN index on ``tsv``): the GIN index over every conversation finds the whole
store's matches of a term, which the planner ANDed with a scan of the conversation's
primary-key entries; at 1M messages, in the largest conversation (134K messages), a
full-text statement took 45-50 ms that way and 1-2 ms through its own index.

On one server there is no vector index over every conversation (migration 0021 dropped
``SHARED_INDEX``): no search could use it (a conversation large enough for its share to
serve has its own index), while every insert, edit and deletion paid for it. At 100K
messages it was 187 MB, larger than the embedded server's shared buffers, and the
exchange-vector refresh of a deletion's successor (an UPDATE, so an insert into every
index) took a median 5.7-7.6 ms with it and 1.4-2.0 ms without it in the largest
conversation (three runs of 60 deletions each).

On Citus the shards keep the shared index (``citus-plan`` makes it when it is missing)
and no conversation has one of its own: an own index is made on every shard (each would
hold the indexes of every large conversation, nearly all of them empty), while a shard
holds a small part of the store, so that a conversation's share of its shard's index is
large and the shard's index serves it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from memory.store.documents import KINDS, capped_counts

OWN_INDEX_ROWS = 2_000
FACT_INDEX_ROWS = 1_000  # entities and relations: see the module docstring
_FACT_KINDS = frozenset({"entity", "relation"})
# The graph of an entity or relation index is built wider than pgvector's default (64):
# their vectors crowd (a name, a short fact), and at ef_search 120 the default graph of
# the largest conversation of a million messages found 0.89 of the exact top 30 of its
# 27K entities (0.79 in one of 13K), 256 found 0.98 (0.99), at the same scan time and
# size. Over 60 questions of the conversation of 134K messages, 400 found 0.967 of the
# entities' top 30 and 0.986 of the relations' (256: 0.946 and 0.976), for 58 s of
# building the fact indexes of a million messages instead of 42 (bench scale's store).
# Messages gain nothing measurable from it (0.991 and 0.993) and their build takes twice as long.
FACT_EF_CONSTRUCTION = 400
# maintenance_work_mem of one build: pgvector builds the graph in memory while it fits
# (about 2 KB per 384-dimension row of float4, less of halfvec) and much slower on disk
# after; shared by the build's parallel workers, taken at once, so bounded for small servers.
BUILD_MEMORY_MB = 256
_PREFIX = "ix_search_documents_embedding_c"
_TEXT_PREFIX = "ix_search_documents_tsv_c"
TEXT = "text"  # a build's name for the conversation's own full-text index
SHARED_INDEX = "ix_search_documents_embedding"
# The columns are halfvec (migration 0023), hence the operator class.
OPCLASS = "halfvec_cosine_ops"
SHARED_INDEX_SQL = f"CREATE INDEX IF NOT EXISTS {SHARED_INDEX} ON search_documents USING hnsw (embedding {OPCLASS})"

# An index's reltuples: its entries when it was built, counted again by each VACUUM
# (pgvector's HNSW counts the ones it keeps); -1 before either.
_STATE = text(
    "SELECT c.relname, i.indisvalid, c.reltuples, coalesce(c.reloptions, '{}') FROM pg_class c "
    "JOIN pg_index i ON i.indexrelid = c.oid "
    "WHERE c.relname = ANY(:names) AND c.relnamespace = CAST(current_schema() AS regnamespace)"
)


_CITUS = text("SELECT count(*) FROM pg_extension WHERE extname = 'citus'")
_OWN = text(
    "SELECT c.relname FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
    "WHERE i.indrelid IN (SELECT CAST('search_documents' AS regclass) UNION ALL "
    "SELECT inhrelid FROM pg_inherits WHERE inhparent = CAST('search_documents' AS regclass)) "
    "AND starts_with(c.relname, :prefix)"
)
# The partition that holds the conversation's rows (migration 0024).
_PARTITION = text("SELECT CAST(CAST(tableoid AS regclass) AS text) FROM search_documents WHERE conversation_id = :c LIMIT 1")


def index_name(conversation_id: int, kind: str) -> str:
    """The name of the conversation's own index of ``kind`` (a document kind, or
    ``TEXT``; under Postgres's 63). Pure."""
    if kind == TEXT:
        return f"{_TEXT_PREFIX}{int(conversation_id)}"
    if kind not in KINDS:
        raise ValueError(f"not a document kind: {kind!r}")
    return f"{_PREFIX}{int(conversation_id)}_{kind}"


def made_at_run_time(name: str) -> bool:
    """Whether ``name`` is an index made here rather than by a migration (a conversation's
    own, or the shared one that Citus keeps): the ORM schema does not declare them, so
    alembic/env.py leaves them out of its comparison with the database. Pure."""
    return name == SHARED_INDEX or name.startswith((_PREFIX, _TEXT_PREFIX))


def own_index(name: str) -> tuple[int, str] | None:
    """(conversation, kind) of a conversation's own index ``name`` (kind ``TEXT`` for the
    full-text one), None for any other index. Pure."""
    if name.startswith(_TEXT_PREFIX):
        number, kind = name.removeprefix(_TEXT_PREFIX), TEXT
    elif name.startswith(_PREFIX):
        number, _, kind = name.removeprefix(_PREFIX).partition("_")
    else:
        return None
    return (int(number), kind) if number.isdigit() else None


def is_partition(name: str) -> bool:
    """Whether ``name`` is one of the partitions of the search documents on one server
    (migration 0024): the ORM schema declares the table alone, so alembic/env.py leaves
    them out of its comparison. Pure."""
    return re.fullmatch(r"search_documents_p\d+", name) is not None


def create_sql(conversation_id: int, kind: str, table: str = "search_documents") -> str:
    """The statement that builds it on ``table`` (the conversation's partition, which
    the caller read from the catalogue): the values are in the predicate itself, as a
    partial index's must be (an int and one of the fixed kinds, never user text). Pure."""
    name = index_name(conversation_id, kind)
    if kind == TEXT:
        return (
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} USING gin (tsv) "
            f"WHERE conversation_id = {int(conversation_id)}"
        )
    options = f" WITH ({option})" if (option := _build_option(kind)) else ""
    return (
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} USING hnsw (embedding {OPCLASS}){options} "
        f"WHERE conversation_id = {int(conversation_id)} AND kind = '{kind}'"
    )


def _build_option(kind: str) -> str:
    return f"ef_construction={FACT_EF_CONSTRUCTION}" if kind in _FACT_KINDS else ""


def outdated(kind: str, options: Sequence[str]) -> bool:
    """Whether a valid own index of ``kind`` with storage ``options`` (its reloptions)
    was built otherwise than ``create_sql`` builds it now, and is to be built again. Pure."""
    return bool(option := _build_option(kind)) and option not in options


def own_index_rows(kind: str) -> int:
    """How many documents of ``kind`` a conversation holds before it gets its own index
    of that kind (``TEXT`` goes with the messages). Pure."""
    return FACT_INDEX_ROWS if kind in _FACT_KINDS else OWN_INDEX_ROWS


def wanted(counts: dict[str, int]) -> list[str]:
    """The kinds that should have their own vector index, ``own_index_rows(kind)``
    documents or more, then ``TEXT`` when the messages are that many. Pure."""
    kinds = [kind for kind in KINDS if counts.get(kind, 0) >= own_index_rows(kind)]
    return kinds + [TEXT] if "episode" in kinds else kinds


@dataclass(frozen=True)
class Present:
    """The valid vector indexes a conversation's search can use: the kinds with their
    own, and whether the table has the shared one."""

    own: frozenset[str]
    shared: bool
    rows: dict[str, float] = field(default_factory=dict)  # each own index's entries, where the catalogue has them


async def present(session: AsyncSession, conversation_id: int, kinds: Sequence[str]) -> Present:
    """Which of ``kinds`` have a valid own index in the conversation, and whether the
    shared index is there (one catalogue read), with the rows each own index holds."""
    names = {index_name(conversation_id, kind): kind for kind in kinds}
    rows = await session.execute(_STATE, {"names": [*names, SHARED_INDEX]})
    valid = {name: entries for name, ok, entries, _ in rows.all() if ok}
    own = {kind: valid[name] for name, kind in names.items() if name in valid}
    return Present(frozenset(own), SHARED_INDEX in valid, {kind: entries for kind, entries in own.items() if entries >= 0})


@dataclass
class IndexReport:
    """What one conversation's index build did: the kinds built now, those that already
    had their index, and the seconds it took."""

    conversation_id: int
    built: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return {"built": self.built, "present": self.present, "seconds": round(self.seconds, 2)}


async def build(engine: AsyncEngine, conversation_id: int) -> IndexReport:
    """Build the own indexes the conversation should have and lacks (see the module
    docstring); an invalid one, left by a build that failed, or one built otherwise
    than ``create_sql`` builds it now (``outdated``) is dropped and built again."""
    import time

    began = time.perf_counter()
    report = IndexReport(conversation_id)
    async with engine.connect() as connection:
        if await connection.scalar(_CITUS):
            return report
        counted = await capped_counts(connection, conversation_id, KINDS, max(map(own_index_rows, KINDS)))
        kinds = wanted(counted)
        names = {index_name(conversation_id, kind): kind for kind in kinds}
        found = (await connection.execute(_STATE, {"names": list(names)})).all() if kinds else []
        state = {name: bool(valid) and not outdated(names[name], options) for name, valid, _, options in found}
        table = await connection.scalar(_PARTITION, {"c": conversation_id}) if kinds else None
        await connection.rollback()
        report.present = [names[name] for name, usable in state.items() if usable]
        todo = [kind for kind in kinds if kind not in report.present]
        if todo and table is not None:
            autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
            await autocommit.execute(text(f"SET maintenance_work_mem TO '{BUILD_MEMORY_MB}MB'"))
            try:
                for kind in todo:
                    name = index_name(conversation_id, kind)
                    if name in state:  # invalid (a failed build's) or outdated
                        await autocommit.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
                    await autocommit.execute(text(create_sql(conversation_id, kind, table)))
                    report.built.append(kind)
            finally:
                await autocommit.execute(text("RESET maintenance_work_mem"))
    report.seconds = time.perf_counter() - began
    return report


async def drop(engine: AsyncEngine, conversation_id: int) -> None:
    """Drop the conversation's own indexes (concurrently: other conversations' reads and
    writes go on), when the conversation itself is gone."""
    async with engine.connect() as connection:
        autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
        for kind in (*KINDS, TEXT):
            await autocommit.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(conversation_id, kind)}"))


async def drop_all(engine: AsyncEngine) -> int:
    """Drop every conversation's own index (a bulk load inserts much faster without them;
    ``build`` makes them again); how many there were."""
    async with engine.begin() as connection:
        names = [
            name for prefix in (_PREFIX, _TEXT_PREFIX) for name in (await connection.execute(_OWN, {"prefix": prefix})).scalars()
        ]
        for name in names:
            await connection.execute(text(f'DROP INDEX IF EXISTS "{name}"'))
    return len(names)
