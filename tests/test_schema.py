"""memory/store/schema.py declares every table and column the migrations create (the
migrations are the schema's source; the ORM must not lag behind them, or code reaches
for undeclared tables with raw SQL)."""

from __future__ import annotations

from sqlalchemy import text

from memory import Memory
from memory.store.schema import Base

COLUMNS = """
SELECT c.table_name, c.column_name FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' AND c.table_name <> 'alembic_version'
"""


async def test_the_schema_declares_every_table_and_column_the_migrations_create(memory: Memory) -> None:
    async with memory.sessions() as session:
        migrated = {(table, column) for table, column in await session.execute(text(COLUMNS))}
    declared = {(table.name, column.name) for table in Base.metadata.tables.values() for column in table.columns}
    assert {t for t, _ in migrated} == {t for t, _ in declared}
    assert migrated == declared
