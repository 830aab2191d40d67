"""Real migrations: up to head, down to base, up again; the dimension check; a database
at head is the ORM schema."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text

from memory.errors import ConfigurationError
from memory.store.database import (
    MIGRATIONS_DIR,
    check_embedding_dim,
    create_engine,
    current_revision,
    downgrade,
    halfvec_refusal,
    head_revision,
    pgvector_advice,
    upgrade,
)
from memory.store.schema import Base
from memory.store.vector_indexes import SHARED_INDEX_SQL, TEXT, create_sql, index_name

TABLES = {
    "conversations",
    "speakers",
    "episodes",
    "tombstones",
    "entities",
    "entity_provenance",
    "relations",
    "relation_provenance",
    "communities",
    "community_members",
    "search_documents",
    "checkpoints",
    "usage_ledger",
    "audit_log",
    "store_audit_log",
    "answer_traces",
    "answer_evidence",
    "store_settings",
    "inbox_events",
    "connector_cursors",
    "rolling_context_entries",
    "job_claims",
    "job_runs",
    "community_state",
    "conversation_locks",
    "slack_installations",
    "slack_bots",
    "slack_oauth_states",
    "participant_optouts",
    "conversation_retention",
}


async def _tables(engine) -> set[str]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT relname FROM pg_class WHERE relnamespace = CAST('public' AS regnamespace) "
                "AND relkind IN ('r', 'p') AND NOT relispartition"
            )
        )
        return {r[0] for r in rows} - {"alembic_version"}


_DOCUMENT = text(
    "INSERT INTO search_documents (conversation_id, kind, ref_id, text, embedding) "
    "VALUES (7, 'episode', :ref, :text, CAST(:v AS halfvec))"
)
# The table each index of conversation 7's own is on.
_OWN_ON = text(
    "SELECT c.relname, CAST(i.indrelid AS regclass)::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "WHERE c.relname LIKE 'ix_search_documents_%c7%'"
)


async def _partitions(engine) -> list[str]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT CAST(inhrelid AS regclass) FROM pg_inherits WHERE inhparent = CAST('search_documents' AS regclass)")
        )
        return sorted(str(r[0]) for r in rows)


async def test_upgrade_downgrade_upgrade(new_database) -> None:
    engine = create_engine(new_database())
    try:
        await upgrade(engine, 384)
        assert await _tables(engine) == TABLES
        async with engine.connect() as connection:
            indexes = {
                r[0]
                for r in await connection.execute(text("SELECT indexdef FROM pg_indexes WHERE tablename = 'search_documents'"))
            }
        # One server has no vector index over every conversation (migration 0021): only
        # conversations' own, built when they grow (memory.store.vector_indexes).
        assert not any("USING hnsw" in i for i in indexes)
        assert any("USING gin" in i for i in indexes)
        # One server partitions the search documents by conversation (migration 0024),
        # and a downgrade makes them one table again, rows and all.
        assert await _partitions(engine) == sorted(f"search_documents_p{i}" for i in range(16))
        async with engine.begin() as connection:
            await connection.execute(
                text("INSERT INTO conversations (id, platform, workspace_id, channel_id) VALUES (7, 'p', 'w', 'c')")
            )
            await connection.execute(_DOCUMENT, {"ref": 1, "text": "the budget is mine", "v": str([0.1] * 384)})
        await downgrade(engine, "0023")
        assert await _partitions(engine) == []
        async with engine.begin() as connection:
            kept = (await connection.execute(text("SELECT text FROM search_documents WHERE tsv @@ to_tsquery('budget')"))).all()
            # The conversation's own indexes, as the scheduler builds them on one table before 0024.
            for kind in ("episode", TEXT):
                await connection.execute(text(create_sql(7, kind).replace(" CONCURRENTLY", "")))
        assert kept == [("the budget is mine",)]
        own = {index_name(7, "episode"), index_name(7, TEXT)}
        await upgrade(engine, 384)
        async with engine.connect() as connection:
            moved = (await connection.execute(text("SELECT CAST(tableoid AS regclass)::text, id FROM search_documents"))).all()
            assert len(moved) == 1 and moved[0][0].startswith("search_documents_p")
            # Made again by the migration, on the partition that holds the conversation.
            assert dict((await connection.execute(_OWN_ON)).all()) == dict.fromkeys(own, moved[0][0])
            await connection.execute(_DOCUMENT, {"ref": 2, "text": "x", "v": str([0.1] * 384)})  # its id from the sequence
            assert (await connection.execute(text("SELECT max(id) FROM search_documents"))).scalar() > moved[0][1]
            await connection.rollback()
        await downgrade(engine, "0023")  # one table again, the own indexes on it
        async with engine.connect() as connection:
            assert dict((await connection.execute(_OWN_ON)).all()) == dict.fromkeys(own, "search_documents")
        await downgrade(engine, "base")
        assert await _tables(engine) == set()
        await upgrade(engine, 384)
        assert await _tables(engine) == TABLES
    finally:
        await engine.dispose()


def _scripts() -> ScriptDirectory:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(config)


def test_the_head_is_read_from_the_scripts_as_alembic_reads_it() -> None:
    assert head_revision() == _scripts().get_current_head() is not None


# Released migrations merged after a higher-numbered one: child -> parent. Every store
# past them records their ids, so they stay (alembic/versions/README); none is added.
RELEASED_OUT_OF_ORDER = {
    "0003": "0008",  # witness wording, after the answer traces' retrieval
    "0004": "0009",  # episode text without the speaker, after the audit indexes
    "0017": "0018",  # participants, after the store-wide audit log
}


def test_one_head_and_each_migration_numbered_after_its_parent() -> None:
    """How alembic/versions/README says to number a migration: its file number is its id,
    greater than its parent's (the released exceptions aside), the head's the largest."""
    scripts = _scripts()
    revisions = list(scripts.walk_revisions())
    numbers = {r.revision: Path(r.path).name.split("_", 1)[0] for r in revisions}
    assert all(number == revision and len(number) == 4 for revision, number in numbers.items())
    assert len(scripts.get_heads()) == 1 and len(scripts.get_bases()) == 1
    below = {r.revision: r.down_revision for r in revisions if r.down_revision is not None}
    assert all(isinstance(parent, str) for parent in below.values())  # no merge revisions
    assert {child: parent for child, parent in below.items() if int(child) < int(str(parent))} == RELEASED_OUT_OF_ORDER
    assert scripts.get_current_head() == max(numbers)


async def test_a_database_behind_is_migrated_and_one_at_head_never_reaches_alembic(
    new_database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from alembic import command

    engine = create_engine(new_database())
    try:
        assert await current_revision(engine) is None
        await upgrade(engine, 384, "0001")
        assert await current_revision(engine) == "0001"
        await upgrade(engine, 384)
        assert await current_revision(engine) == head_revision()

        def refuse(*args: object) -> None:
            raise AssertionError("alembic was asked to migrate a database at head")

        monkeypatch.setattr(command, "upgrade", refuse)
        await upgrade(engine, 384)
    finally:
        await engine.dispose()


async def test_dimension_is_fixed_per_database(new_database) -> None:
    engine = create_engine(new_database())
    try:
        await upgrade(engine, 8)
        await check_embedding_dim(engine, 8)
        with pytest.raises(ConfigurationError, match="stores 8-dimensional vectors"):
            await check_embedding_dim(engine, 384)
    finally:
        await engine.dispose()


SEED = """
INSERT INTO conversations (id, platform, channel_id) VALUES (1, 'local', 'c');
INSERT INTO speakers (id, conversation_id, platform_user_id, display_name, role) VALUES (1, 1, 'u', 'Ann', 'user');
INSERT INTO episodes (id, conversation_id, speaker_id, role, text, message_time, platform_message_id)
VALUES (1, 1, 1, 'user', 'one', now(), 'm1'), (2, 1, 1, 'user', 'two', now(), 'm2');
INSERT INTO entities (id, conversation_id, name, type, summary, attributes)
VALUES (1, 1, 'Ann', 'person', 'Ann said one', '{"summary_episode_ids": [1]}'), (2, 1, 'Oslo', 'place', 'a city', '{}');
INSERT INTO entity_provenance (entity_id, episode_id, conversation_id) VALUES (1, 1, 1), (1, 2, 1), (2, 1, 1), (2, 2, 1);
INSERT INTO relations (id, conversation_id, subject_id, object_id, predicate, fact)
VALUES (1, 1, 1, 2, 'visits', 'Ann visits Oslo');
INSERT INTO relation_provenance (relation_id, episode_id, conversation_id) VALUES (1, 1, 1), (1, 2, 1);
INSERT INTO search_documents (conversation_id, kind, ref_id, text, embedding)
VALUES (1, 'relation', 1, 'Ann visits Oslo', '[1,0,0,0,0,0,0,0]');
INSERT INTO checkpoints (conversation_id, rolling_context) VALUES (1, '[
  {"entity_id": 2, "name": "Oslo", "text": "Oslo (place)", "episode_ids": [1]},
  {"entity_id": 1, "name": "Ann", "text": "Ann (person)", "episode_ids": [1, 2]}]');
"""


async def test_existing_links_inherit_their_records_text_and_the_context_moves_to_rows(new_database) -> None:
    engine = create_engine(new_database())
    try:
        await upgrade(engine, 8, "0008")
        async with engine.begin() as connection:
            for statement in SEED.split(";\n"):
                if statement.strip():
                    await connection.execute(text(statement))
        await upgrade(engine, 8)
        async with engine.connect() as connection:
            relation_links = (
                await connection.execute(
                    text("SELECT episode_id, fact, sources, embedding IS NOT NULL FROM relation_provenance ORDER BY episode_id")
                )
            ).all()
            entity_links = (
                await connection.execute(
                    text(
                        "SELECT entity_id, episode_id, name, type, summary, summary_sources FROM entity_provenance ORDER BY 1, 2"
                    )
                )
            ).all()
            context = (
                await connection.execute(
                    text("SELECT entity_id, position, name, episode_ids FROM rolling_context_entries ORDER BY position")
                )
            ).all()
        # which witness worded the relation is unknown: every witness is a source
        assert [tuple(r) for r in relation_links] == [(1, "Ann visits Oslo", [1, 2], True), (2, "Ann visits Oslo", [1, 2], True)]
        assert [tuple(r) for r in entity_links] == [
            (1, 1, "Ann", "person", "Ann said one", [1]),
            (1, 2, "Ann", "person", "", []),  # written from m1
            (2, 1, "Oslo", "place", "", []),
            (2, 2, "Oslo", "place", "", []),  # unknown sources: on no link
        ]
        assert [tuple(r) for r in context] == [(2, 1, "Oslo", [1]), (1, 2, "Ann", [1, 2])]
        await downgrade(engine, "0008")
        async with engine.connect() as connection:
            restored = (await connection.execute(text("SELECT rolling_context FROM checkpoints"))).scalar_one()
        assert [item["entity_id"] for item in restored] == [2, 1] and restored[1]["episode_ids"] == [1, 2]
    finally:
        await engine.dispose()


async def test_the_alembic_command_line_takes_a_plain_postgresql_url(new_database) -> None:
    """DATABASE_URL as users write it (``postgresql://``) is rewritten to asyncpg as the
    application rewrites it; it was handed to the async engine as is (no psycopg here)."""
    url = new_database()
    plain = "postgresql://" + url.split("://", 1)[1]
    done = subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        cwd=MIGRATIONS_DIR.parent,
        env={**os.environ, "DATABASE_URL": plain},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    engine = create_engine(url)
    try:
        assert await current_revision(engine) == head_revision()
    finally:
        await engine.dispose()


IDENTITY_COLUMNS = (
    "SELECT count(*) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
    "WHERE a.attidentity <> '' AND c.relnamespace = 'public'::regnamespace"
)


async def test_ids_come_from_sequences_that_continue_after_the_identity_ids(new_database) -> None:
    """Migration 0015: no identity column is left (Citus refuses to convert tables with
    one), and new ids follow the ones the identity columns gave, down and up again."""
    engine = create_engine(new_database())
    insert = text("INSERT INTO conversations (platform, channel_id) VALUES ('local', :c) RETURNING id")
    try:
        await upgrade(engine, 384, "0014")
        async with engine.begin() as connection:
            before = [(await connection.execute(insert, {"c": f"c{i}"})).scalar_one() for i in range(3)]
            assert (await connection.execute(text(IDENTITY_COLUMNS))).scalar_one() > 0
        await upgrade(engine, 384)
        async with engine.begin() as connection:
            assert (await connection.execute(text(IDENTITY_COLUMNS))).scalar_one() == 0
            after = (await connection.execute(insert, {"c": "c3"})).scalar_one()
        assert after == max(before) + 1
        await downgrade(engine, "0014")
        async with engine.begin() as connection:
            assert (await connection.execute(insert, {"c": "c4"})).scalar_one() == after + 1
    finally:
        await engine.dispose()


def test_pgvector_before_0_8_is_advised_once_in_one_line() -> None:
    """Pure: the start-up warning names the version found and what to do."""
    for old in ("0.6.2", "0.7.4", None):
        advice = pgvector_advice(old)
        assert advice is not None and f"pgvector {old} " in advice and "ALTER EXTENSION vector UPDATE" in advice
        assert "\n" not in advice
    for recent in ("0.8.0", "0.8.5", "0.10.1", "1.0"):
        assert pgvector_advice(recent) is None


def test_halfvec_is_refused_before_pgvector_0_7_in_one_line_that_says_what_to_do() -> None:
    """Pure: migration 0023's check of the ``vector`` extension's version."""
    for old in ("0.5.1", "0.6.2", "0.6", None):
        refusal = halfvec_refusal(old)
        assert refusal is not None and f"pgvector {old} " in refusal and "\n" not in refusal
        assert "halfvec" in refusal and "0.7 or later" in refusal and "ALTER EXTENSION vector UPDATE" in refusal
    for recent in ("0.7.0", "0.7.4", "0.8.5", "0.10.1", "1.0"):
        assert halfvec_refusal(recent) is None


# Every vector column of the store (relation_provenance: each link's fact vector).
VECTOR_COLUMNS = """
SELECT c.relname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' AND NOT a.attisdropped
  AND a.atttypid IN (CAST('vector' AS regtype), CAST('halfvec' AS regtype)) ORDER BY 1
"""
VECTOR_TABLES = ["entities", "episodes", "relation_provenance", "search_documents"]
# A conversation's own indexes as the code before 0023 made them.
OWN_BEFORE_0023 = (
    f"CREATE INDEX {index_name(1, 'entity')} ON search_documents USING hnsw (embedding vector_cosine_ops) "
    "WHERE conversation_id = 1 AND kind = 'entity'"
)
INDEXES = "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'search_documents'"
DOCUMENT = "INSERT INTO search_documents (conversation_id, kind, ref_id, text, embedding) VALUES (1, 'entity', 1, 'Oslo', :v)"


async def _vector_columns(engine) -> list[tuple[str, str]]:
    async with engine.connect() as connection:
        return [tuple(row) for row in await connection.execute(text(VECTOR_COLUMNS))]


async def test_the_vectors_are_halfvec_from_0023_and_vector_again_below(new_database) -> None:
    """Migration 0023 on a store with vectors and a conversation's own vector index: the
    columns become halfvec (each value rounded to half precision), the own index is made
    again as it was but with ``halfvec_cosine_ops``, the full-text one stays; the
    downgrade makes them ``vector`` again, and the index of ``vector_cosine_ops``."""
    engine = create_engine(new_database())
    try:
        await upgrade(engine, 8, "0022")
        assert await _vector_columns(engine) == [(table, "vector(8)") for table in VECTOR_TABLES]
        async with engine.begin() as connection:
            await connection.execute(text("INSERT INTO conversations (id, platform, channel_id) VALUES (1, 'local', 'c')"))
            await connection.execute(text(DOCUMENT), {"v": "[0.1,0.2,0.3,0.4,0.5,0.6,0.7,1000.5]"})
            for statement in (OWN_BEFORE_0023, create_sql(1, TEXT).replace(" CONCURRENTLY", "")):
                await connection.execute(text(statement))
            before = dict((await connection.execute(text(INDEXES))).all())
        await upgrade(engine, 8, "0023")
        assert await _vector_columns(engine) == [(table, "halfvec(8)") for table in VECTOR_TABLES]
        async with engine.connect() as connection:
            stored = (await connection.execute(text("SELECT embedding::text FROM search_documents"))).scalar_one()
            made = dict((await connection.execute(text(INDEXES))).all())
        assert stored == "[0.099975586,0.19995117,0.30004883,0.39990234,0.5,0.60009766,0.7001953,1000.5]"
        assert "vector_cosine_ops" in before[index_name(1, "entity")] and index_name(1, TEXT) in before
        assert made == {
            name: definition.replace("vector_cosine_ops", "halfvec_cosine_ops") for name, definition in before.items()
        }
        await downgrade(engine, "0022")
        assert await _vector_columns(engine) == [(table, "vector(8)") for table in VECTOR_TABLES]
        async with engine.connect() as connection:
            assert dict((await connection.execute(text(INDEXES))).all()) == before
    finally:
        await engine.dispose()


async def test_an_index_over_a_vector_that_stashbird_did_not_make_stops_0023_by_name(new_database) -> None:
    engine = create_engine(new_database())
    try:
        await upgrade(engine, 8, "0022")
        async with engine.begin() as connection:
            await connection.execute(text("CREATE INDEX by_hand ON entities USING hnsw (embedding vector_l2_ops)"))
        with pytest.raises(ConfigurationError, match="drop by_hand on entities, which Stashbird did not make") as raised:
            await upgrade(engine, 8)
        assert "\n" not in str(raised.value)
        assert await current_revision(engine) == "0022"
    finally:
        await engine.dispose()


async def test_the_migrated_store_runs_the_servers_pgvector(memory: object, database_url: str) -> None:
    """Migration 0022: the extension is at the version the server offers, which on the
    embedded server (and the Citus cluster of CI) is 0.8 or later. (``memory``: the
    database migrated to head.)"""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            installed, offered = (
                await connection.execute(
                    text("SELECT installed_version, default_version FROM pg_available_extensions WHERE name = 'vector'")
                )
            ).one()
    finally:
        await engine.dispose()
    assert installed == offered and pgvector_advice(installed) is None


async def test_alembic_finds_no_difference_between_a_database_at_head_and_the_orm_schema(new_database) -> None:
    """``alembic check`` (autogenerate through alembic/env.py, as a developer runs it)
    on a database at head, with a conversation's own indexes and the shared one, which
    memory.store.vector_indexes makes at run time and the schema does not declare."""
    url = new_database()
    engine = create_engine(url)
    try:
        await upgrade(engine, 384)
        async with engine.connect() as connection:
            autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
            # On one server a conversation's own indexes are on its partition (migration 0024).
            own = [create_sql(1, kind, "search_documents_p0") for kind in ("episode", TEXT)]
            for statement in (*own, SHARED_INDEX_SQL):
                await autocommit.execute(text(statement))
    finally:
        await engine.dispose()
    done = subprocess.run(
        [sys.executable, "-m", "alembic", "check"],
        cwd=MIGRATIONS_DIR.parent,
        env={**os.environ, "DATABASE_URL": url},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr  # the differences are on stdout


# Every index but the primary keys (whose names the ORM leaves to Postgres), unique
# constraints' included, as Postgres states it: columns, method, INCLUDE and predicate.
# A partitioned table's index is stated ``ON ONLY`` it, and its partitions' copies are
# left out (the search documents on one server, migration 0024).
INDEXES = """
SELECT c.relname, replace(pg_get_indexdef(i.indexrelid), ' ON ONLY ', ' ON ') FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relnamespace = 'public'::regnamespace AND NOT i.indisprimary AND NOT c.relispartition
"""


async def test_the_orm_schema_declares_each_index_as_the_migrations_made_it(new_database) -> None:
    """What alembic's comparison leaves out (an index's predicate, method and included
    columns): the ORM schema created in an empty database has the indexes of a database
    migrated to head, each with the same definition."""
    migrated, declared = create_engine(new_database()), create_engine(new_database())
    try:
        await upgrade(migrated, 384)
        async with declared.begin() as connection:
            await connection.execute(text("CREATE EXTENSION vector"))
            await connection.run_sync(Base.metadata.create_all)
        found = []
        for engine in (migrated, declared):
            async with engine.connect() as connection:
                found.append({name: definition for name, definition in await connection.execute(text(INDEXES))})
        assert found[1] == found[0]
        assert len(found[0]) > 20
    finally:
        await migrated.dispose()
        await declared.dispose()
