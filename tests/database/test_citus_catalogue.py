"""The schema keeps Citus' rules for sharding by conversation (memory.store.citus), read
from the migrated catalogue; the checker finds each kind of break; the ORM declares the
keys the migrations create; migration 0010 keeps a consolidated conversation's data
both ways."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from bot.locomo import load
from memory import Memory, OfflineExtractor, Principal, ask, consolidate, ingest, open_memory
from memory.models.embedder import LocalEmbedder
from memory.store.citus import (
    LOCAL_TABLES,
    REFERENCE_TABLES,
    catalogue_violations,
    read_catalogue,
    violations,
)
from memory.store.conversations import ConversationRef
from memory.store.database import downgrade, upgrade
from memory.store.schema import Base
from tests.shared_data import shared_file

OPERATOR = Principal.operator("test")
LOCOMO_30 = shared_file("locomo/30.json")


async def test_the_migrated_schema_keeps_the_rules(memory: Memory) -> None:
    async with memory._engine.connect() as connection:
        assert await catalogue_violations(connection) == []
        catalogue = await read_catalogue(connection)
    distributed = {name for name in catalogue.tables if catalogue.distributed(name)}
    assert distributed == set(catalogue.tables) - REFERENCE_TABLES - LOCAL_TABLES
    assert {"episodes", "usage_ledger", "inbox_events", "job_claims", "job_runs"} <= distributed
    assert REFERENCE_TABLES | LOCAL_TABLES <= set(catalogue.tables)  # the lists name real tables


# One table per rule broken (``good`` and ``fine`` break none), in a scratch schema.
BAD_SCHEMA = """
CREATE TABLE {s}.good (conversation_id bigint NOT NULL, id bigint, PRIMARY KEY (conversation_id, id));
CREATE TABLE {s}.ref (id bigint PRIMARY KEY);
CREATE TABLE {s}.loc (id bigint PRIMARY KEY);
CREATE TABLE {s}.fine (conversation_id bigint NOT NULL REFERENCES {s}.ref ON DELETE CASCADE, id bigint, g bigint,
    PRIMARY KEY (conversation_id, id), FOREIGN KEY (conversation_id, g) REFERENCES {s}.good ON DELETE CASCADE);
CREATE TABLE {s}.id_key (conversation_id bigint NOT NULL, id bigint PRIMARY KEY);
CREATE TABLE {s}.excluding (conversation_id bigint NOT NULL, span int4range, EXCLUDE USING gist (span WITH &&));
CREATE TABLE {s}.nullable (conversation_id bigint);
CREATE TABLE {s}.generated (x bigint, conversation_id bigint GENERATED ALWAYS AS (x) STORED NOT NULL);
CREATE TABLE {s}.narrow (conversation_id integer NOT NULL);
CREATE TABLE {s}.unlisted (id bigint PRIMARY KEY);
CREATE TABLE {s}.swapped (conversation_id bigint NOT NULL, g bigint,
    FOREIGN KEY (g, conversation_id) REFERENCES {s}.good (conversation_id, id));
CREATE TABLE {s}.by_id (conversation_id bigint NOT NULL, g bigint REFERENCES {s}.id_key);
CREATE TABLE {s}.set_null (conversation_id bigint NOT NULL, g bigint,
    FOREIGN KEY (conversation_id, g) REFERENCES {s}.good ON DELETE SET NULL (g));
CREATE TABLE {s}.set_default (conversation_id bigint NOT NULL REFERENCES {s}.ref ON DELETE SET DEFAULT);
CREATE TABLE {s}.update_cascade (conversation_id bigint NOT NULL, g bigint,
    FOREIGN KEY (conversation_id, g) REFERENCES {s}.good ON UPDATE CASCADE);
CREATE TABLE {s}.to_local (conversation_id bigint NOT NULL, l bigint REFERENCES {s}.loc);
ALTER TABLE {s}.ref ADD COLUMN cid bigint, ADD COLUMN g bigint,
    ADD CONSTRAINT ref_to_good FOREIGN KEY (cid, g) REFERENCES {s}.good (conversation_id, id);
"""

EXPECTED = {
    "excluding: unique index excluding_span_excl does not include conversation_id",
    "id_key: unique index id_key_pkey does not include conversation_id",
    "nullable.conversation_id is nullable",
    "generated.conversation_id is a generated column",
    "narrow.conversation_id is integer, not bigint (co-location needs one type)",
    "unlisted: no conversation_id and not listed as a reference or local table",
    *(
        f"{table}: foreign key {key} to {parent}: does not carry conversation_id at the same position on both sides"
        for table, key, parent in (("swapped", "swapped_g_conversation_id_fkey", "good"), ("by_id", "by_id_g_fkey", "id_key"))
    ),
    "set_null: foreign key set_null_conversation_id_g_fkey to good: ON DELETE SET NULL",
    "set_default: foreign key set_default_conversation_id_fkey to ref: ON DELETE SET DEFAULT",
    "update_cascade: foreign key update_cascade_conversation_id_g_fkey to good: ON UPDATE CASCADE",
    "to_local: foreign key to_local_l_fkey to loc: a distributed table may point only at distributed or reference tables",
    "ref: foreign key ref_to_good to good: a reference or local table points at a distributed one",
}


async def test_the_checker_reports_every_kind_of_break(memory: Memory) -> None:
    schema = f"citus_check_{uuid.uuid4().hex[:8]}"
    async with memory._engine.connect() as connection:
        await connection.execute(text(f"CREATE SCHEMA {schema}"))
        try:
            for statement in BAD_SCHEMA.format(s=schema).split(";\n"):
                if statement.strip():
                    await connection.execute(text(statement))
            catalogue = await read_catalogue(connection, schema, reference=frozenset({"ref"}), local=frozenset({"loc"}))
        finally:
            await connection.rollback()
    assert set(violations(catalogue)) == EXPECTED
    assert len(violations(catalogue)) == len(EXPECTED)  # each break reported once


KEYS = """
SELECT p.contype::text, c.relname, f.relname, array_agg(a.attname ORDER BY k.n), p.confdeltype::text
FROM pg_constraint p JOIN pg_class c ON c.oid = p.conrelid LEFT JOIN pg_class f ON f.oid = p.confrelid
CROSS JOIN unnest(p.conkey) WITH ORDINALITY k(attnum, n)
JOIN pg_attribute a ON a.attrelid = p.conrelid AND a.attnum = k.attnum
WHERE p.contype IN ('p', 'f') AND c.relnamespace = 'public'::regnamespace
GROUP BY p.oid, p.contype, c.relname, f.relname, p.confdeltype
"""
ON_DELETE = {"a": None, "c": "CASCADE"}


async def test_the_orm_declares_the_keys_the_migrations_create(memory: Memory) -> None:
    async with memory._engine.connect() as connection:
        rows = (await connection.execute(text(KEYS))).all()
    tables = Base.metadata.tables
    in_database = {(kind, table, parent, tuple(columns), ON_DELETE.get(action)) for kind, table, parent, columns, action in rows}
    in_orm = {("p", t.name, None, tuple(c.name for c in t.primary_key.columns), None) for t in tables.values()} | {
        ("f", t.name, fk.referred_table.name, tuple(fk.column_keys), fk.ondelete)
        for t in tables.values()
        for fk in t.foreign_key_constraints
    }
    assert in_orm == {row for row in in_database if row[1] in tables}


async def _snapshot(memory: Memory) -> dict[str, int]:
    async with memory._engine.connect() as connection:
        return {
            table: (await connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()
            for table in (
                "episodes",
                "entities",
                "relations",
                "entity_provenance",
                "relation_provenance",
                "search_documents",
                "usage_ledger",
                "answer_evidence",
            )
        }


@pytest.mark.skipif(not LOCOMO_30.exists(), reason="LoCoMo data is not beside the repository")
async def test_a_consolidated_conversation_survives_downgrade_and_upgrade(new_database, embedder: LocalEmbedder) -> None:
    handle = await open_memory(new_database(), embedder)
    try:
        conversation = load(LOCOMO_30)
        ref = ConversationRef("test", "locomo", "30")
        await ingest(handle, ref, [t.message for t in conversation.turns if t.session <= 2], principal=OPERATOR)
        await consolidate(handle, ref, principal=OPERATOR, extractor=OfflineExtractor())
        question = conversation.questions[0].question
        before = await ask(handle, ref, question, principal=OPERATOR)
        counts = await _snapshot(handle)
        assert min(counts.values()) > 0
        await downgrade(handle._engine, "0004")
        async with handle._engine.connect() as connection:
            old = await catalogue_violations(connection)
        # what 0010 fixes: 15 unique keys and 14 foreign keys without the column, 3 SET NULL, the nullable ledger
        assert len(old) == 33 and "usage_ledger.conversation_id is nullable" in old
        assert await _snapshot(handle) == counts
        async with handle._engine.begin() as connection:  # usage without a conversation: 0010 deletes it
            await connection.execute(
                text(
                    "INSERT INTO usage_ledger (conversation_id, phase, operation, model)"
                    " VALUES (NULL, 'ingestion', 'orphan', 'm')"
                )
            )
        await upgrade(handle._engine, embedder.dim)
        assert await _snapshot(handle) == counts
        after = await ask(handle, ref, question, principal=OPERATOR)
        assert after.answer == before.answer
        assert [c.episode_id for c in after.citations] == [c.episode_id for c in before.citations]
    finally:
        await handle.close()
