"""Alembic environment: runs on a connection handed over by memory.store.database, or, from
the ``alembic`` command line, on DATABASE_URL (a plain ``postgresql://`` URL is rewritten to
asyncpg as the application does: memory.store.database.async_url).

The target metadata is the ORM schema (memory/store/schema.py), so that ``alembic check``
and ``alembic revision --autogenerate`` compare a database with it; a database at head
matches it (tests/database/test_migrations.py). Left out of the comparison: the vector indexes that
memory.store.vector_indexes makes at run time, which no migration makes, and the partitions
of the search documents on one server (migration 0024; the schema declares the table). Server defaults
are not compared: the ORM gives most columns a Python default instead.

Numbering a new migration: alembic/versions/README.
"""

import asyncio
import os

from sqlalchemy import text

from alembic import context
from memory.store.database import create_engine
from memory.store.schema import Base
from memory.store.vector_indexes import is_partition, made_at_run_time

# Migrations run in one transaction. On a distributed database Citus runs DDL on the
# shards in parallel, after which the transaction may not touch reference tables (a
# foreign key to ``conversations``): one connection per worker, in sequence, allows
# both. A plain Postgres keeps the setting as an unused placeholder.
_SEQUENTIAL = "SET LOCAL citus.multi_shard_modify_mode = 'sequential'"


def _include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Whether autogenerate compares this object of the database with the schema."""
    if name is None:
        return True
    return not ((type_ == "index" and made_at_run_time(name)) or (type_ == "table" and is_partition(name)))


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=Base.metadata, include_name=_include_name)
    with context.begin_transaction():
        connection.execute(text(_SEQUENTIAL))
        context.run_migrations()


async def _run_from_url(url: str) -> None:
    engine = create_engine(url, pool_size=None)
    async with engine.connect() as connection:
        await connection.run_sync(_run)
    await engine.dispose()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    asyncio.run(_run_from_url(os.environ["DATABASE_URL"]))
