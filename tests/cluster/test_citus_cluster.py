"""On a real Citus cluster (``pytest -m citus`` with STASHBIRD_TEST_DATABASE_URL naming the
coordinator; .ci/run starts one): ``citus-plan --apply`` on a fresh, a populated and a
half-done database and after a failure at each step, the lifecycle end to end through
the CLI on the distributed tables, locks held across nodes, and a migration written
after distribution."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
import pytest
from alembic.config import Config
from clirun import stashbird
from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError

from alembic import command
from bot.cli import build_parser
from bot.settings import DatabaseSettings, Settings
from lab.probes import OWN_INDEX_ROWS, grow_conversations, search_vector
from memory import (
    ConversationRef,
    Principal,
    ValidationError,
    citus_plan,
    consolidate,
    drop_conversation,
    index_conversation,
    ingest,
    store_audit,
)
from memory.core import Memory, open_memory
from memory.store.citus import REFERENCE_TABLES, apply_plan, read_plan
from memory.store.database import MIGRATIONS_DIR, create_engine, downgrade, head_revision, upgrade
from memory.store.locks import LockPurpose, lock_conversation, try_hold
from memory.store.vector_indexes import SHARED_INDEX
from tests.conftest import TEST_DATABASE_URL
from tests.database.test_consolidation import messages
from tests.servers import create_cluster_database, drop_cluster_database, make_coordinator, worker_url

pytestmark = pytest.mark.citus
OPERATOR = Principal.operator("test")

TABLES = """
SELECT CAST(logicalrelid AS text), CAST(partmethod AS text), CAST(repmodel AS text), colocationid
FROM pg_dist_partition ORDER BY 1
"""
FOREIGN_KEYS = "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND connamespace = 'public'::regnamespace"


@pytest.fixture(scope="module")
def coordinator() -> str:
    if TEST_DATABASE_URL is None:
        pytest.skip("the cluster suite needs STASHBIRD_TEST_DATABASE_URL naming a Citus coordinator")
    return TEST_DATABASE_URL


@pytest.fixture
def cluster_database(coordinator: str) -> Iterator[Callable[[], str]]:
    """Factory: a new database on every node of the cluster (dropped afterwards)."""
    made: list[str] = []

    def make(citus: bool = True) -> str:
        made.append(f"plan_{uuid.uuid4().hex[:8]}")
        return create_cluster_database(coordinator, made[-1], citus)

    yield make
    for name in made:
        drop_cluster_database(coordinator, name)


async def _state(memory: Memory) -> tuple[dict[str, tuple[str, str, int]], int]:
    async with memory._engine.connect() as connection:
        tables = {row[0]: tuple(row[1:]) for row in await connection.execute(text(TABLES))}
        keys = (await connection.execute(text(FOREIGN_KEYS))).scalar_one()
    return tables, int(keys)  # type: ignore[return-value]


async def _assert_distributed(memory: Memory, foreign_keys: int) -> None:
    tables, keys = await _state(memory)
    reference = {name for name, (method, model, _) in tables.items() if method == "n" and model == "t"}
    distributed = {name for name, (method, _, _) in tables.items() if method == "h"}
    assert reference == REFERENCE_TABLES
    assert distributed == set(tables) - reference and len(distributed) >= 20
    assert len({tables[name][2] for name in distributed}) == 1  # one colocation group
    assert keys == foreign_keys  # every foreign key kept


async def _apply_by_cli(url: str) -> str:
    done = await asyncio.to_thread(stashbird, url, "citus-plan", "--apply")
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_fresh_database_is_distributed_once_and_migrated_after(cluster_database, embedder, tmp_path: Path) -> None:
    """The plan on a database just migrated; a second run does nothing; then a migration
    written as docs/guides/citus.md says (a column, an index, a new per-conversation table) runs
    on the distributed database and distributes its table with the others."""
    url = cluster_database()
    memory = await open_memory(url, embedder)
    try:
        _, keys = await _state(memory)
        steps = len((await citus_plan(memory, principal=OPERATOR)).steps)
        first = await _apply_by_cli(url)
        assert first.splitlines()[0].endswith(f": {steps} tables distributed or made reference tables now.")
        await _assert_distributed(memory, keys)
        second = await _apply_by_cli(url)
        assert second.splitlines()[0].endswith(": 0 tables distributed or made reference tables now.")
        assert second.count("-- already done") == steps + 1  # and the shards' vector index
        await _migrate_after_distribution(memory, tmp_path)
    finally:
        await memory.close()


COUNTED = ("conversations", "episodes", "search_documents", "entities", "relations", "entity_provenance", "checkpoints")


async def _counts(memory: Memory) -> dict[str, int]:
    async with memory._engine.connect() as connection:
        return {t: (await connection.execute(text(f"SELECT count(*) FROM {t}"))).scalar_one() for t in COUNTED}


async def _populate(memory: Memory, conversations: int = 3) -> list[ConversationRef]:
    refs = [ConversationRef("test", "plan", f"populated-{n}") for n in range(conversations)]
    rows = [("m1", "ann", "I moved to Quito last spring."), ("m2", "bob", "Ann works at the Quito zoo with Bob.")]
    for ref in refs:
        report = await ingest(memory, ref, messages(rows), principal=OPERATOR)
        assert report.stored == len(rows), report
        await consolidate(memory, ref, principal=OPERATOR)
    return refs


async def test_the_plan_finishes_a_database_an_older_plan_left_with_citus_local_tables(cluster_database, embedder) -> None:
    """Citus' default turns every table pointing at a new reference table into a Citus
    local table (partmethod 'n' like a reference table): the plan must not take them as
    done, and distributes them."""
    url = cluster_database()
    memory = await open_memory(url, embedder)
    try:
        await _populate(memory, 1)
        _, keys = await _state(memory)
        async with memory._engine.begin() as connection:
            await connection.execute(text("SELECT create_reference_table('conversations')"))
        tables, _ = await _state(memory)
        assert tables["episodes"][:2] == ("n", "s")  # a Citus local table now
        plan = await citus_plan(memory, principal=OPERATOR)
        assert [s.table for s in plan.steps if s.done] == ["conversations"]
        assert {s.found for s in plan.steps if not s.done} == {"local", None}
        before = await _counts(memory)
        await _apply_by_cli(url)
        await _assert_distributed(memory, keys)
        assert await _counts(memory) == before
    finally:
        await memory.close()


# Every shard of search_documents with its HNSW index over all its rows (not partial).
SHARDS_INDEXED = """
SELECT count(*) FILTER (WHERE result = '1'), count(*) FROM run_command_on_shards('search_documents',
$$SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
WHERE i.indrelid = CAST('%s' AS regclass) AND a.amname = 'hnsw' AND i.indpred IS NULL$$)
"""


async def test_a_populated_database_moves_into_shards_resuming_after_a_failure_at_each_step(cluster_database, embedder) -> None:
    """Step by step, the next table is locked by another session while the plan runs
    (the plan's session gives up waiting after a quarter of a second): each run fails at that step
    with the steps before it done, and the next run resumes there. At the end every row
    is in the shards (none left in the coordinator's tables), every shard has the
    vector index that a store migrated on one server lacks, and answers come from them."""
    url = cluster_database()
    memory = await open_memory(url, embedder)
    blocker = create_engine(url)
    try:
        refs = await _populate(memory)
        before, (_, keys) = await _counts(memory), await _state(memory)
        assert before["relations"] > 0
        assert (await citus_plan(memory, principal=OPERATOR)).shared_index  # migrated with citus there: kept
        async with memory._engine.begin() as connection:  # as migration 0021 leaves one server's store
            await connection.execute(text(f"DROP INDEX {SHARED_INDEX}"))
        assert not (await citus_plan(memory, principal=OPERATOR)).shared_index
        async with memory._engine.begin() as connection:
            database = (await connection.execute(text("SELECT current_database()"))).scalar_one()
            await connection.execute(text(f"ALTER DATABASE \"{database}\" SET lock_timeout = '250ms'"))
        steps = (await citus_plan(memory, principal=OPERATOR)).steps
        fresh = await open_memory(url, embedder)  # sessions made after the setting have it
        try:
            for index, step in enumerate(steps):
                async with blocker.connect() as held:
                    await held.execute(text(f'LOCK TABLE "{step.table}" IN ACCESS EXCLUSIVE MODE'))
                    with pytest.raises(DBAPIError, match="lock timeout"):
                        await citus_plan(fresh, principal=OPERATOR, apply=True)
                    await held.rollback()
                done = [s.table for s in (await citus_plan(fresh, principal=OPERATOR)).steps if s.done]
                assert done == [s.table for s in steps[:index]], f"failed at step {index} ({step.table})"
            finished = await citus_plan(fresh, principal=OPERATOR, apply=True)
            assert finished.applied == [steps[-1].table] and finished.shared_index
        finally:
            await fresh.close()
        await _assert_distributed(memory, keys)
        assert await _counts(memory) == before
        async with memory._engine.connect() as connection:
            indexed, shards = (await connection.execute(text(SHARDS_INDEXED))).one()
            assert indexed == shards > 1
        async with memory._engine.connect() as connection:  # the coordinator's own copies are gone
            sizes = await connection.execute(text("SELECT pg_relation_size('episodes'), pg_relation_size('conversations')"))
            assert tuple(sizes.one()) == (0, 0)
        asked = await asyncio.to_thread(stashbird, url, "ask", "Where does Ann live?", "--conversation", str(refs[0]))
        assert asked.returncode == 0 and "Quito" in asked.stdout, asked.stderr
    finally:
        await blocker.dispose()
        await memory.close()


PARTITIONS = "SELECT count(*) FROM pg_inherits WHERE inhparent = CAST('search_documents' AS regclass)"


async def test_a_store_migrated_on_one_server_is_distributed_with_its_search_partitions(
    cluster_database, coordinator: str, embedder
) -> None:
    """The README's way onto Citus: a store migrated and used on one server (its search
    documents hash-partitioned by conversation, migration 0024), then made the
    coordinator. The plan distributes the table with its partitions, co-located with
    the rest, every row and key kept, and answers come from the shards."""
    url = cluster_database(citus=False)
    memory = await open_memory(url, embedder)
    try:
        refs = await _populate(memory)
        async with memory._engine.connect() as connection:
            assert (await connection.execute(text(PARTITIONS))).scalar_one() == 16
        before = await _counts(memory)
        await asyncio.to_thread(make_coordinator, url, coordinator)
        _, keys = await _state(memory)
        await _apply_by_cli(url)
        await _assert_distributed(memory, keys)
        tables, _ = await _state(memory)
        assert {f"search_documents_p{i}" for i in range(16)} <= set(tables)  # shards of their own, co-located
        assert await _counts(memory) == before
        async with memory._engine.connect() as connection:  # the coordinator's own copies are gone
            left = text(
                "SELECT sum(pg_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = CAST('search_documents' AS regclass)"
            )
            assert (await connection.execute(left)).scalar_one() == 0
        for ref in refs:
            asked = await asyncio.to_thread(stashbird, url, "ask", "Where does Ann live?", "--conversation", str(ref))
            assert asked.returncode == 0 and "Quito" in asked.stdout, asked.stderr
        # The maintenance names the partitioned table, which Citus vacuums and rewrites with its partitions.
        erased = await asyncio.to_thread(stashbird, url, "erase", "--conversation", str(refs[0]))
        assert erased.returncode == 0 and "search_documents " in erased.stdout, erased.stderr
        assert "search_documents_p" not in erased.stdout
        assert await _counts(memory) == before
    finally:
        await memory.close()


LINKS = """
SELECT (SELECT count(*) FROM episodes WHERE prev_id IS NOT NULL), (SELECT count(*) FROM episodes WHERE next_id IS NOT NULL),
       (SELECT count(*) FROM relations WHERE superseded_by IS NOT NULL)
"""


async def test_a_table_copied_into_its_shards_in_several_parts_keeps_its_keys_to_itself(cluster_database, embedder) -> None:
    """Past citus.copy_switchover_threshold (4 MB, a store of some 100K messages; 1 byte
    here) Citus copies a table's rows into a shard through several connections, each
    COPY checked alone: a chained episode or a superseded relation would fail its key
    to a row of its own table copied through another. The plan drops those keys around
    the copy and adds them again: every row, link and key survives."""
    url = cluster_database()
    memory = await open_memory(url, embedder)
    try:
        # Grown twice, the conversations' rows interleave on disk: copying them, a worker's
        # one connection switches between their shards, each shard's rows in several COPYs.
        refs = [ConversationRef("test", "plan", f"chained-{n}") for n in range(6)]
        for start in (0, 100):
            await grow_conversations(memory, [(ref, start, 100) for ref in refs], ("ka", "lo"))
        async with memory._engine.begin() as connection:
            superseded = await connection.execute(
                text(
                    "UPDATE relations r SET status = 'superseded', superseded_by = n.id FROM relations n "
                    "WHERE n.conversation_id = r.conversation_id AND n.id > r.id"
                )
            )
            assert superseded.rowcount > 0
            links = tuple((await connection.execute(text(LINKS))).one())
        assert min(links) > 0
        before, (_, keys) = await _counts(memory), await _state(memory)
        async with memory._engine.connect() as connection:
            await connection.execute(text("SET citus.copy_switchover_threshold = 1"))
            plan = await read_plan(connection)
            assert {s.table: s.self_keys for s in plan.steps if s.self_keys} == {
                "episodes": ("episodes_next_id_fkey", "episodes_prev_id_fkey"),
                "relations": ("relations_superseded_by_fkey",),
            }
            await apply_plan(connection, plan)
        await _assert_distributed(memory, keys)
        assert await _counts(memory) == before
        async with memory._engine.connect() as connection:
            assert tuple((await connection.execute(text(LINKS))).one()) == links
    finally:
        await memory.close()


@pytest.mark.usefixtures("declared_plugins")
async def test_bench_scale_distributes_the_store_it_loaded(cluster_database) -> None:
    """``bench scale --distribute-after``: loaded into plain tables, then moved into
    shards by the plan, every row counted, then measured on the shards."""
    argv = ["bench", "scale", "--conversations", "6", "--messages", "240", "--steps", "240", "--distribute-after"]
    argv += ["--queries", "6", "--deletes", "6", "--ingested", "4", "--index-memory-mb", "64"]
    args = build_parser(argv).parse_args(argv)
    url = cluster_database()
    (step,) = (await args.module.run(args, Settings(database=DatabaseSettings(url=url))))["steps"]
    moved = step["distribution"]
    assert moved["rows_by_table"]["episodes"] == 240 and moved["rows"] == sum(moved["rows_by_table"].values())
    assert moved["tables"] == len(moved["rows_by_table"]) and moved["seconds"] > 0
    assert step["shards"]["search_tasks"] == 1 and step["search"]["empty"] == 0 and step["delete"]["wrong"] == 0
    # The coordinator's folder and each worker's, all on this machine here.
    assert step["warmed"]["folders"] == step["warmed"]["read_here"] == 3 and step["warmed"]["mb"] > 0
    with pytest.raises(ValidationError, match="--distribute-after"):  # distributed now
        await args.module.run(args, Settings(database=DatabaseSettings(url=url)))


async def test_migration_0018_makes_the_store_wide_audit_log_a_reference_table(cluster_database, embedder) -> None:
    """A database distributed before the store-wide audit log existed: its migration
    makes it a reference table, which records a dropped conversation."""
    url = cluster_database()
    memory = await open_memory(url, embedder)
    try:
        await downgrade(memory._engine, "0018-1")
        async with memory._engine.connect() as connection:
            plan = await read_plan(connection)
            await apply_plan(connection, plan)
        assert "store_audit_log" not in plan.applied
        await upgrade(memory._engine, embedder.dim)
        tables, _ = await _state(memory)
        assert tables["store_audit_log"][:2] == ("n", "t")
        ref = (await _populate(memory, 1))[0]
        assert await drop_conversation(memory, ref, principal=Principal.job("cluster"))
        found = await store_audit(memory, principal=OPERATOR, conversation=ref)
        assert [(e.action, e.principal) for e in found.entries] == [("drop_conversation", "job:cluster")]
    finally:
        await memory.close()


# The type of the vector columns, on the coordinator and in every shard of each table.
VECTOR_TYPES = """
SELECT DISTINCT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relnamespace = 'public'::regnamespace AND a.attname = 'embedding'
"""
SHARD_TYPES = (
    "SELECT DISTINCT result FROM run_command_on_shards(:table, $$SELECT format_type(atttypid, atttypmod) "
    "FROM pg_attribute WHERE attrelid = '%s'::regclass AND attname = 'embedding'$$)"
)
# The operator class of the HNSW index of every shard of search_documents.
SHARD_OPCLASSES = (
    "SELECT DISTINCT result FROM run_command_on_shards('search_documents', $$SELECT string_agg(o.opcname, ',') "
    "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam "
    "JOIN pg_opclass o ON o.oid = i.indclass[0] WHERE i.indrelid = '%s'::regclass AND am.amname = 'hnsw'$$)"
)
VECTOR_TABLES = ("episodes", "entities", "relation_provenance", "search_documents")


async def _vector_state(memory: Memory) -> tuple[set[str], set[str], set[str]]:
    """The vector columns' types on the coordinator and in the shards, and the shards' index operator classes."""
    async with memory._engine.connect() as connection:
        types = set((await connection.execute(text(VECTOR_TYPES))).scalars())
        shards: set[str] = set()
        for table in VECTOR_TABLES:
            shards |= set((await connection.execute(text(SHARD_TYPES), {"table": table})).scalars())
        opclasses = set((await connection.execute(text(SHARD_OPCLASSES))).scalars())
    return types, shards, opclasses


async def test_migration_0023_makes_the_distributed_vectors_halfvec_and_rebuilds_the_shards_index(
    cluster_database, embedder
) -> None:
    """A store distributed at 0022, with messages and a graph: every shard's vector
    columns become halfvec and the shards' shared index is built again with
    halfvec_cosine_ops, in the migration; the store is searched after; the downgrade
    makes them vector again."""
    url = cluster_database()
    memory = await open_memory(url, embedder)
    try:
        await downgrade(memory._engine, "0022")
        async with memory._engine.connect() as connection:
            await apply_plan(connection, await read_plan(connection))
        (ref,) = await _populate(memory, 1)
        before = await _counts(memory)
        assert await _vector_state(memory) == ({"vector(384)"}, {"vector(384)"}, {"vector_cosine_ops"})
        await upgrade(memory._engine, embedder.dim)
        assert await _vector_state(memory) == ({"halfvec(384)"}, {"halfvec(384)"}, {"halfvec_cosine_ops"})
        assert await _counts(memory) == before
        (question,) = (await embedder.embed(["Where does Ann live?"])).vectors
        found = await search_vector(memory, ref, "Where does Ann live?", list(question))
        assert "Quito" in " ".join(c.text for c in found.candidates)
        await downgrade(memory._engine, "0022")
        assert await _vector_state(memory) == ({"vector(384)"}, {"vector(384)"}, {"vector_cosine_ops"})
    finally:
        await memory.close()


async def test_a_conversation_dropped_through_a_worker_is_recorded_for_every_node(
    coordinator: str, memory: Memory, database_url: str, embedder
) -> None:
    """The store-wide audit log is a reference table: a process connected to a worker
    drops a conversation, and its row is read through the coordinator."""
    through_worker = await open_memory(worker_url(database_url, 0), embedder, migrate=False)  # migrations: the coordinator's
    try:
        ref = ConversationRef("test", "worker", f"dropped-{uuid.uuid4().hex[:8]}")
        await ingest(through_worker, ref, messages([("m1", "ann", "I moved to Quito.")]), principal=OPERATOR)
        assert await drop_conversation(through_worker, ref, principal=Principal.job("cluster"))
    finally:
        await through_worker.close()
    found = await store_audit(memory, principal=OPERATOR, conversation=ref)
    assert [(e.action, e.principal) for e in found.entries] == [("drop_conversation", "job:cluster")]


async def test_no_conversation_gets_its_own_vector_index_on_the_cluster(memory: Memory) -> None:
    """Each shard's HNSW index serves the conversations hashed to it; an index of one
    conversation would be made on every shard (memory.store.vector_indexes)."""
    ref = ConversationRef("test", "own-index", f"large-{uuid.uuid4().hex[:8]}")
    await grow_conversations(memory, [(ref, 0, OWN_INDEX_ROWS)], ("ka", "lo"))
    report = await index_conversation(memory, ref, principal=Principal.job("cluster"))
    assert report.built == [] and report.present == []
    assert await drop_conversation(memory, ref, principal=Principal.job("cluster"))


def test_the_lifecycle_runs_on_the_distributed_tables(
    coordinator: str, memory: Memory, database_url: str, tmp_path: Path
) -> None:
    """The session's database is distributed (tests/conftest.py): every command of a
    conversation's life, through the CLI, as an operator runs them."""
    lines = [
        {"id": "1", "author": "ann", "text": "I moved to Quito last spring.", "ts": "2026-01-01T10:00:00Z"},
        {"id": "2", "author": "bob", "text": "Ann works at the Quito zoo with Bob.", "ts": "2026-01-01T10:01:00Z"},
        {"id": "3", "author": "bob", "text": "Ann and I feed the penguins at the zoo.", "ts": "2026-01-01T10:02:00Z"},
    ]
    path = tmp_path / "messages.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    name = f"cluster-{uuid.uuid4().hex[:8]}"

    def run(*args: str) -> str:
        done = stashbird(database_url, *args)
        assert done.returncode == 0, f"stashbird {' '.join(args)}: {done.stderr}"
        return done.stdout

    run("ingest", str(path), "--conversation", name)
    status = json.loads(run("jobs", "status", "--json"))
    assert any(item["conversation"].endswith(name) and item["unconsolidated_messages"] == 3 for item in status["conversations"])
    run("consolidate", "--conversation", name)
    assert "Quito" in run("ask", "Where does Ann live?", "--conversation", name)
    run("communities", "--conversation", name, "--rebuild")
    assert json.loads(run("forget", "--conversation", name, "--message", "1", "--json"))["status"] == "deleted"
    assert "edited" in run("edit", "--conversation", name, "--message", "2", "--text", "Ann works at the Lima zoo with Bob.")
    run("jobs", "run-once", "--conversation", name)
    assert name in run("audit", "conversations")
    assert "1" in run("audit", "forgotten", "--conversation", name)
    run("erase", "--conversation", name)
    after = json.loads(run("jobs", "status", "--conversation", name, "--json"))
    assert all(item["unconsolidated_messages"] == 0 and item["dirty_communities"] == 0 for item in after["conversations"])


HOLDER = """
import asyncio, sys
from memory.store.citus import REFERENCE_TABLES
from memory.store.database import MIGRATIONS_DIR, create_engine, head_revision
from memory.store.locks import LockPurpose, lock_conversation
from sqlalchemy.ext.asyncio import AsyncSession

async def main() -> None:
    engine = create_engine(sys.argv[1])
    async with AsyncSession(engine) as session:
        await lock_conversation(session, int(sys.argv[2]), LockPurpose.CHAIN)
        print("held", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        await session.commit()
    await engine.dispose()

asyncio.run(main())
"""


async def test_a_lock_taken_through_a_worker_holds_for_a_process_on_the_coordinator(
    coordinator: str, memory: Memory, database_url: str, conversation_id: int
) -> None:
    """Two processes, two nodes: the lock is a row lock on the conversation's shard,
    whichever node each statement came through (an advisory lock would be each node's own)."""
    worker = worker_url(database_url, 0)
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLDER), worker, str(conversation_id)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert (await asyncio.to_thread(holder.stdout.readline)).strip() == "held"

        async def take() -> None:
            async with memory._sessions.begin() as session:
                await lock_conversation(session, conversation_id, LockPurpose.CHAIN)

        waiting = asyncio.ensure_future(take())
        await asyncio.sleep(1.5)
        assert not waiting.done()  # the coordinator's session waits for the worker's
        async with try_hold(memory._engine, conversation_id, LockPurpose.INBOX) as held:
            assert held  # another purpose is not held
        holder.stdin.write("\n")
        holder.stdin.flush()
        await asyncio.wait_for(waiting, 10)
    finally:
        holder.kill() if holder.poll() is None else None
        holder.wait()


MIGRATION = '''
"""A test migration after distribution: a column, an index, a per-conversation table."""
import sqlalchemy as sa
from alembic import op
from memory.store.citus import distribute_new_table

revision = "9001"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("episodes", sa.Column("mood", sa.Text))
    op.create_index("ix_episodes_mood", "episodes", ["conversation_id", "mood"])
    op.create_table(
        "reactions",
        sa.Column("conversation_id", sa.BigInteger, nullable=False),
        sa.Column("id", sa.BigInteger, autoincrement=True, nullable=False),
        sa.Column("episode_id", sa.BigInteger, nullable=False),
        sa.Column("emoji", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "id"),
    )
    distribute_new_table(op.get_bind(), "reactions")
    op.create_foreign_key(
        "fk_reactions_conversation", "reactions", "conversations", ["conversation_id"], ["id"], ondelete="CASCADE"
    )
    op.create_foreign_key(
        "fk_reactions_episode", "reactions", "episodes",
        ["conversation_id", "episode_id"], ["conversation_id", "id"], ondelete="CASCADE",
    )


def downgrade() -> None:
    op.drop_table("reactions")
    op.drop_index("ix_episodes_mood", "episodes")
    op.drop_column("episodes", "mood")
'''


async def _migrate_after_distribution(memory: Memory, tmp_path: Path) -> None:
    versions = tmp_path / "versions"
    versions.mkdir()
    for script in (MIGRATIONS_DIR / "versions").glob("*.py"):
        (versions / script.name).write_text(script.read_text())
    (versions / "9001_test.py").write_text(MIGRATION.format(head=head_revision()))

    def migrate(connection: Connection) -> None:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.set_main_option("version_locations", str(versions))
        config.attributes["connection"] = connection
        command.upgrade(config, "head")

    async with memory._engine.begin() as connection:
        await connection.run_sync(migrate)
    tables, _ = await _state(memory)
    assert tables["reactions"][0] == "h" and tables["reactions"][2] == tables["episodes"][2]  # co-located
    await _populate(memory, 1)
    async with memory._engine.begin() as connection:
        cid, eid = (await connection.execute(text("SELECT conversation_id, id FROM episodes LIMIT 1"))).one()
        insert = "INSERT INTO reactions (conversation_id, episode_id, emoji) VALUES (:c, :e, 'tada') RETURNING id"
        assert (await connection.execute(text(insert), {"c": cid, "e": eid})).scalar_one() >= 1
        await connection.execute(text("UPDATE episodes SET mood = 'glad' WHERE conversation_id = :c"), {"c": cid})
        with_mood = "SELECT count(*) FROM episodes WHERE conversation_id = :c AND mood = 'glad'"
        assert (await connection.execute(text(with_mood), {"c": cid})).scalar_one() >= 1


async def test_the_routing_check_reads_the_task_count_of_the_clusters_own_plans(memory: Memory, coordinator: str) -> None:
    """What tests/conftest.py asks the cluster at the end of the session, on a statement
    pinned to one conversation and on one that is not."""
    from tests.routing import task_count

    async with memory._engine.connect() as connection:
        explain = "EXPLAIN (FORMAT JSON) SELECT count(*) FROM episodes"
        pinned = (await connection.execute(text(f"{explain} WHERE conversation_id = 1"))).scalar()
        spread = (await connection.execute(text(explain))).scalar()
    assert task_count(pinned) == 1
    assert (task_count(spread) or 0) > 1


VISIBILITY = "SELECT current_setting('citus.override_table_visibility', true)"


async def test_a_type_lookup_reads_the_catalogue_unfiltered_and_the_session_keeps_its_shards_hidden(
    coordinator: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """asyncpg looks up the types it has no codec for (here bigint[] and name[]) in the
    catalogue, once per connection: on a Citus node that lookup runs without the filter
    that hides shards from pg_class (row by row, it made each lookup take 0.4 s), and the
    session's own catalogue reads keep the filter afterwards."""
    during: list[str | None] = []
    lookup = asyncpg.Connection._introspect_types

    async def spy(self: asyncpg.Connection, typeoids: object, timeout: object) -> object:
        during.append(await self.fetchval(VISIBILITY))
        return await lookup(self, typeoids, timeout)

    monkeypatch.setattr(asyncpg.Connection, "_introspect_types", spy)
    engine = create_engine(coordinator, pool_size=None)
    try:
        async with engine.connect() as connection:
            before = (await connection.execute(text(VISIBILITY))).scalar()
            found = await connection.execute(
                text("SELECT CAST(:ids AS bigint[]), c.relname FROM pg_class c WHERE c.relname = ANY(:names)"),
                {"ids": [1, 2], "names": ["pg_class"]},
            )
            assert found.all() == [([1, 2], "pg_class")]
            after = (await connection.execute(text(VISIBILITY))).scalar()
    finally:
        await engine.dispose()
    assert before == after == "on"
    assert during and set(during) == {"off"}
