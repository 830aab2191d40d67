"""Physical erasure: what happens to a deleted message's bytes, and when.

A deletion makes the text unreachable by any query at once (its transaction commits).
Its bytes stay in the table files until Postgres reclaims them:

- ``vacuum``: ``VACUUM (ANALYZE)`` of the memory tables (a SHARE UPDATE EXCLUSIVE lock:
  reads and writes go on; only schema changes and other vacuums wait). It removes dead
  row versions and their index entries and marks the space free; ANALYZE replaces the
  planner's statistics, whose most common values and histogram bounds are copies of
  column values (a message's text among them). Run after each deletion batch (outside
  the deleting transaction: VACUUM cannot run inside one), until a scheduled job takes
  it over. It does not overwrite the freed bytes (measured: a dead row's text is still
  in the table file after it), and the full-text (GIN) index keeps its entry keys,
  stemmed words included, with no rows behind them.
- ``erase``: ANALYZE, then ``VACUUM FULL`` of the memory tables, which writes each table
  and its TOAST table anew with only the live rows and rebuilds every index (so the
  full-text index holds only live lexemes), then ``VACUUM FULL pg_statistic`` (the old
  statistics rows; superuser only, reported), then ``CHECKPOINT`` so the new files are
  on disk. It takes an ACCESS EXCLUSIVE lock on each table in turn: every read and
  write of that table, in every conversation, waits until it is rewritten. Row versions
  still visible to a transaction open since before the deletion are copied too, so it
  should run with no long transaction open.

"The memory tables" are every table with a text-like column (``TEXT_TABLES``). Neither
touches the write-ahead log or backups; docs/guarantees/deletion.md says what remains there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memory.store.residue import TEXT_TYPES

# Every table that can hold a message's words: those with a text-like column, found from
# the catalogue (as the residue scan finds them), so a table added later is covered too.
# A partitioned table (the search documents on one server, migration 0024) is named, not
# its partitions: VACUUM and ANALYZE of it take every partition, and its statistics too.
TEXT_TABLES = text(
    """
    SELECT DISTINCT c.relname FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND a.attnum > 0 AND NOT a.attisdropped
      AND format_type(a.atttypid, NULL) = ANY(:types)
    ORDER BY 1
    """
)
VACUUM_LOCK = "SHARE UPDATE EXCLUSIVE (reads and writes continue)"
ERASE_LOCK = "ACCESS EXCLUSIVE on each memory table in turn (its reads and writes wait, in every conversation)"


@dataclass
class MaintenanceReport:
    """What ran, under which lock, how long each table took and how big it was after."""

    operation: str
    lock: str
    seconds: float = 0.0
    tables: dict[str, float] = field(default_factory=dict)  # table -> seconds
    bytes_after: int = 0
    statistics_rewritten: bool = False  # pg_statistic rewritten (needs a superuser)


async def _run(engine: AsyncEngine, operation: str, lock: str, statements: tuple[str, ...], full: bool) -> MaintenanceReport:
    report = MaintenanceReport(operation, lock)
    began = time.perf_counter()
    async with engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        tables = list((await connection.execute(TEXT_TABLES, {"types": list(TEXT_TYPES)})).scalars())
        for table in tables:
            started = time.perf_counter()
            for statement in statements:
                await connection.execute(text(statement.format(table=f'"{table}"')))
            report.tables[table] = round(time.perf_counter() - started, 3)
        if full:
            superuser = (await connection.execute(text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"))).scalar()
            if superuser:
                await connection.execute(text("VACUUM FULL pg_statistic"))
                report.statistics_rewritten = True
            await connection.execute(text("CHECKPOINT"))
        report.bytes_after = (
            await connection.execute(
                text(
                    "SELECT sum(pg_total_relation_size(c.oid) + coalesce((SELECT sum(pg_total_relation_size(h.inhrelid)) "
                    "FROM pg_inherits h WHERE h.inhparent = c.oid), 0))::bigint FROM pg_class c WHERE c.relname = ANY(:tables)"
                ),
                {"tables": tables},
            )
        ).scalar_one()
    report.seconds = round(time.perf_counter() - began, 3)
    return report


async def vacuum(engine: AsyncEngine) -> MaintenanceReport:
    """VACUUM (ANALYZE) of the memory tables (dead row versions and index entries go)."""
    return await _run(engine, "VACUUM (ANALYZE)", VACUUM_LOCK, ("VACUUM (ANALYZE) {table}",), full=False)


async def erase(engine: AsyncEngine) -> MaintenanceReport:
    """ANALYZE and VACUUM FULL of the memory tables (rewritten, indexes rebuilt), of
    pg_statistic, then CHECKPOINT."""
    return await _run(
        engine, "ANALYZE, VACUUM FULL, CHECKPOINT", ERASE_LOCK, ("ANALYZE {table}", "VACUUM FULL {table}"), full=True
    )
