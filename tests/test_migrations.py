"""Real migrations: up to head, down to base, up again; the dimension check."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from memory.errors import ConfigurationError
from memory.store.database import check_embedding_dim, create_engine, downgrade, upgrade

TABLES = {
    "conversations", "speakers", "episodes", "tombstones", "entities", "entity_provenance",
    "relations", "relation_provenance", "communities", "community_members", "search_documents",
    "checkpoints", "usage_ledger", "audit_log", "answer_traces", "answer_evidence", "store_settings",
    "inbox_events", "connector_cursors",
    "job_claims", "job_runs", "community_state",
}


async def _tables(engine) -> set[str]:
    async with engine.connect() as connection:
        rows = await connection.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))
        return {r[0] for r in rows} - {"alembic_version"}


async def test_upgrade_downgrade_upgrade(new_database) -> None:
    engine = create_engine(new_database())
    try:
        await upgrade(engine, 384)
        assert await _tables(engine) == TABLES
        async with engine.connect() as connection:
            indexes = {r[0] for r in await connection.execute(text("SELECT indexdef FROM pg_indexes WHERE tablename = 'search_documents'"))}
        assert any("USING hnsw" in i for i in indexes)
        assert any("USING gin" in i for i in indexes)
        await downgrade(engine, "base")
        assert await _tables(engine) == set()
        await upgrade(engine, 384)
        assert await _tables(engine) == TABLES
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
