"""memory/store/schema.py declares every table and column the migrations create, but
slack_sdk's own store tables (the migrations are the schema's source; the ORM must not
lag behind them, or code reaches for undeclared tables with raw SQL)."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from sqlalchemy import text

from memory import LocalEmbedder, open_memory
from memory.store.schema import Base

COLUMNS = """
SELECT c.table_name, c.column_name FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' AND c.table_name <> 'alembic_version'
"""


def _slack_store_tables() -> list[sa.Table]:
    """Migration 0014's tables are slack_sdk's installation and OAuth state stores'
    (connectors/slack/installations.py uses the stores as they are), so slack_sdk
    declares them; the rest are schema.py's."""
    metadata = sa.MetaData()
    return [
        SQLAlchemyInstallationStore.build_installations_table(metadata, "slack_installations"),
        SQLAlchemyInstallationStore.build_bots_table(metadata, "slack_bots"),
        SQLAlchemyOAuthStateStore.build_oauth_states_table(metadata, "slack_oauth_states"),
    ]


async def test_the_schema_declares_every_table_and_column_the_migrations_create(
    new_database: Callable[[], str], embedder: LocalEmbedder
) -> None:
    memory = await open_memory(new_database(), embedder)  # a fresh database, migrated to head: nothing else made tables
    try:
        async with memory._sessions() as session:
            migrated = {(table, column) for table, column in await session.execute(text(COLUMNS))}
    finally:
        await memory.close_database()
    tables = [*Base.metadata.tables.values(), *_slack_store_tables()]
    declared = {(table.name, column.name) for table in tables for column in table.columns}
    assert {t for t, _ in migrated} == {t for t, _ in declared}
    assert migrated == declared
