"""memory/store/schema.py declares every table and column the migrations create (the
migrations are the schema's source; the ORM must not lag behind them, or code reaches
for undeclared tables with raw SQL). The Slack app's installation tables are declared
there too, and are the shapes slack_sdk's stores read and write: its own declarations
of them have the same columns."""

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
  AND NOT (SELECT relispartition FROM pg_class WHERE oid = CAST(quote_ident(c.table_name) AS regclass))
"""


async def test_the_schema_declares_every_table_and_column_the_migrations_create(
    new_database: Callable[[], str], embedder: LocalEmbedder
) -> None:
    memory = await open_memory(new_database(), embedder)  # a fresh database, migrated to head: nothing else made tables
    try:
        async with memory._sessions() as session:
            migrated = {(table, column) for table, column in await session.execute(text(COLUMNS))}
    finally:
        await memory.close_database()
    declared = {(table.name, column.name) for table in Base.metadata.tables.values() for column in table.columns}
    assert {t for t, _ in migrated} == {t for t, _ in declared}
    assert migrated == declared


def test_the_slack_tables_have_the_columns_slack_sdk_uses() -> None:
    metadata = sa.MetaData()
    theirs = [
        SQLAlchemyInstallationStore.build_installations_table(metadata, "slack_installations"),
        SQLAlchemyInstallationStore.build_bots_table(metadata, "slack_bots"),
        SQLAlchemyOAuthStateStore.build_oauth_states_table(metadata, "slack_oauth_states"),
    ]
    for table in theirs:
        assert {c.name for c in table.columns} == {c.name for c in Base.metadata.tables[table.name].columns}, table.name
