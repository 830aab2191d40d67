"""Sharding by conversation on Citus: which tables are which, the rules the schema must
keep, and the plan that distributes an existing database.

Every table is one of three kinds, listed here and nowhere else:

- *distributed* by ``conversation_id``, co-located (every table that has the column
  and is not listed below), so that all of a conversation's rows live on one shard;
- *reference*: replicated whole to every node (``REFERENCE_TABLES``): the
  conversations themselves (unique on platform, workspace and channel, which no
  conversation id can be part of), the per-database settings, the store-wide audit log
  (written through any node, rarely: it must outlive the conversations it names), the
  people who opted out of a workspace (read by every node that ingests) and the Slack
  app's installations and OAuth states (multi-workspace mode: a few rows read by every
  node);
- *local*: stays on the coordinator only (``LOCAL_TABLES``): alembic's version row.

The rules (Citus' own, as its foreign-key and constraint checks enforce them):
every PRIMARY KEY, UNIQUE and EXCLUDE constraint of a distributed table includes the
distribution column; a foreign key between distributed tables carries it at the same
position on both sides; a foreign key between distributed tables, or one whose columns
include the distribution column, has no ``ON DELETE SET NULL/SET DEFAULT`` and no
``ON UPDATE SET NULL/SET DEFAULT/CASCADE``; a distributed
table references only distributed or reference tables, and a reference table only
reference tables; the distribution column is NOT NULL, not generated, and of one type
everywhere (co-location needs it). ``catalogue_violations`` reads them off
``pg_catalog``; the test suite runs it on the migrated schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncConnection

from memory.store.vector_indexes import SHARED_INDEX, SHARED_INDEX_SQL

DISTRIBUTION_COLUMN = "conversation_id"
DISTRIBUTION_TYPE = "bigint"
REFERENCE_TABLES = frozenset(
    {
        "conversations",
        "store_settings",
        "store_audit_log",
        "participant_optouts",
        "slack_installations",
        "slack_bots",
        "slack_oauth_states",
    }
)
LOCAL_TABLES = frozenset({"alembic_version"})

# pg_constraint's action codes: a = no action, r = restrict, c = cascade, n = set null, d = set default
_REFUSED_ON_DELETE = {"n": "SET NULL", "d": "SET DEFAULT"}
_REFUSED_ON_UPDATE = {"n": "SET NULL", "d": "SET DEFAULT", "c": "CASCADE"}


@dataclass(frozen=True)
class Table:
    name: str
    key_column: int | None  # attnum of the distribution column, None when absent
    not_null: bool = True
    generated: bool = False
    type: str = DISTRIBUTION_TYPE


@dataclass(frozen=True)
class UniqueIndex:
    table: str
    name: str
    columns: tuple[int, ...]  # attnums; 0 for an expression


@dataclass(frozen=True)
class ForeignKey:
    name: str
    table: str
    parent: str
    columns: tuple[int, ...]
    parent_columns: tuple[int, ...]
    on_delete: str = "a"
    on_update: str = "a"


@dataclass(frozen=True)
class Catalogue:
    """What the rules need of one schema's catalogue."""

    tables: dict[str, Table]
    unique: list[UniqueIndex] = field(default_factory=list)
    foreign_keys: list[ForeignKey] = field(default_factory=list)
    reference: frozenset[str] = REFERENCE_TABLES
    local: frozenset[str] = LOCAL_TABLES

    def distributed(self, name: str) -> bool:
        table = self.tables.get(name)
        return table is not None and table.key_column is not None and name not in self.reference | self.local


_TABLES = """
SELECT c.relname, a.attnum, a.attnotnull, a.attgenerated <> '', format_type(a.atttypid, a.atttypmod)
FROM pg_class c
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = :column AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = :schema) AND c.relkind IN ('r', 'p') AND NOT c.relispartition
"""
# A partition (the search documents on one server, migration 0024) is its table's: Citus
# distributes it with the table, and its keys and unique indexes are the table's copies,
# so the catalogue reads the tables alone.
_UNIQUE = """
SELECT t.relname, i.relname, CAST(x.indkey AS int2[])
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
WHERE t.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = :schema) AND (x.indisunique OR x.indisexclusion)
  AND NOT t.relispartition
"""
_FOREIGN_KEYS = """
SELECT k.conname, s.relname, p.relname, k.conkey, k.confkey, CAST(k.confdeltype AS text), CAST(k.confupdtype AS text)
FROM pg_constraint k JOIN pg_class s ON s.oid = k.conrelid JOIN pg_class p ON p.oid = k.confrelid
WHERE k.contype = 'f' AND s.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = :schema) AND k.conparentid = 0
"""


async def read_catalogue(
    connection: AsyncConnection,
    schema: str = "public",
    reference: frozenset[str] = REFERENCE_TABLES,
    local: frozenset[str] = LOCAL_TABLES,
) -> Catalogue:
    """The tables, unique indexes and foreign keys of ``schema`` as the rules see them."""
    bound = {"schema": schema, "column": DISTRIBUTION_COLUMN}
    tables = {
        name: Table(name, attnum, bool(not_null), bool(generated), type_ or "")
        for name, attnum, not_null, generated, type_ in await connection.execute(text(_TABLES), bound)
    }
    unique = [UniqueIndex(t, i, tuple(cols)) for t, i, cols in await connection.execute(text(_UNIQUE), bound)]
    foreign_keys = [
        ForeignKey(name, table, parent, tuple(cols), tuple(parent_cols), on_delete, on_update)
        for name, table, parent, cols, parent_cols, on_delete, on_update in await connection.execute(text(_FOREIGN_KEYS), bound)
    ]
    return Catalogue(tables, unique, foreign_keys, reference, local)


def _table_violations(catalogue: Catalogue) -> list[str]:
    found = []
    for name, table in sorted(catalogue.tables.items()):
        if name in catalogue.reference | catalogue.local:
            continue
        if table.key_column is None:
            found.append(f"{name}: no {DISTRIBUTION_COLUMN} and not listed as a reference or local table")
            continue
        if not table.not_null:
            found.append(f"{name}.{DISTRIBUTION_COLUMN} is nullable")
        if table.generated:
            found.append(f"{name}.{DISTRIBUTION_COLUMN} is a generated column")
        if table.type != DISTRIBUTION_TYPE:
            found.append(f"{name}.{DISTRIBUTION_COLUMN} is {table.type}, not {DISTRIBUTION_TYPE} (co-location needs one type)")
    return found


def _unique_violations(catalogue: Catalogue) -> list[str]:
    return [
        f"{index.table}: unique index {index.name} does not include {DISTRIBUTION_COLUMN}"
        for index in catalogue.unique
        if catalogue.distributed(index.table) and catalogue.tables[index.table].key_column not in index.columns
    ]


def _foreign_key_violations(catalogue: Catalogue, key: ForeignKey) -> list[str]:
    where = f"{key.table}: foreign key {key.name} to {key.parent}"
    if not catalogue.distributed(key.table):
        return [f"{where}: a reference or local table points at a distributed one"] if catalogue.distributed(key.parent) else []
    if not catalogue.distributed(key.parent) and key.parent not in catalogue.reference:
        return [f"{where}: a distributed table may point only at distributed or reference tables"]
    found = []
    column = catalogue.tables[key.table].key_column
    if catalogue.distributed(key.parent):
        parent_column = catalogue.tables[key.parent].key_column
        if (
            column not in key.columns
            or parent_column not in key.parent_columns
            or (key.columns.index(column) != key.parent_columns.index(parent_column))
        ):
            found.append(f"{where}: does not carry {DISTRIBUTION_COLUMN} at the same position on both sides")
    if column in key.columns or catalogue.distributed(key.parent):
        if key.on_delete in _REFUSED_ON_DELETE:
            found.append(f"{where}: ON DELETE {_REFUSED_ON_DELETE[key.on_delete]}")
        if key.on_update in _REFUSED_ON_UPDATE:
            found.append(f"{where}: ON UPDATE {_REFUSED_ON_UPDATE[key.on_update]}")
    return found


def violations(catalogue: Catalogue) -> list[str]:
    """Every way the schema breaks a rule of the module docstring, one line each."""
    found = _table_violations(catalogue) + _unique_violations(catalogue)
    for key in sorted(catalogue.foreign_keys, key=lambda k: (k.table, k.name)):
        found += _foreign_key_violations(catalogue, key)
    return found


async def catalogue_violations(connection: AsyncConnection, schema: str = "public") -> list[str]:
    return violations(await read_catalogue(connection, schema))


# --- distributing a database ----------------------------------------------------------

_CITUS_VERSION = "SELECT extversion FROM pg_extension WHERE extname = 'citus'"
# Citus' own catalogue (pg_catalog.pg_dist_partition): one row per table it manages.
# partmethod 'h' is hash-distributed; 'n' with repmodel 't' a reference table, 'n' with
# any other a Citus local table (one Citus made by itself when a reference table was
# created with local tables pointing at it: not done, still to be distributed).
_DONE = """
SELECT c.relname,
       CASE WHEN p.partmethod = 'h' THEN 'distributed' WHEN p.repmodel = 't' THEN 'reference' ELSE 'local' END
FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = :schema)
"""
# Citus' default (on) turns every local table that points at a new reference table into
# a Citus local table; the plan distributes them itself, parents first.
_NO_LOCAL_TABLES = "SET LOCAL citus.enable_local_reference_table_foreign_keys = off"
_REFERENCE = "SELECT create_reference_table(CAST(quote_ident(:table) AS regclass))"
_DISTRIBUTED = "SELECT create_distributed_table(CAST(quote_ident(:table) AS regclass), :column, colocate_with => :colocate_with)"
# Citus local tables point at each other: none can be distributed while the others still
# point at it. Undistributing one with its foreign-key neighbours makes them all plain
# tables again (the conversations too); the plan then starts over.
_UNDO_LOCAL = "SELECT undistribute_table(CAST(quote_ident(:table) AS regclass), cascade_via_foreign_keys => true)"
# Distributing copies a table's rows into its shards and leaves them in the coordinator's
# table too, unseen by queries: dropped once every table is done (before, a local table
# may still point at them).
_TRUNCATE_LOCAL = "SELECT truncate_local_data_after_distributing_table(CAST(quote_ident(:table) AS regclass))"
# Distributing copies a table's rows through one connection per worker, which switches
# between that worker's shards past citus.copy_switchover_threshold (4 MB, some 100K
# messages' store): a shard then gets its rows in several COPYs, each checked on its
# own, and a row pointing at a row of its own table not copied yet (an episode's next
# one) fails its foreign key. The step drops those keys before the copy and adds them
# again, as they were, after it.
_SELF_KEYS = """
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
WHERE contype = 'f' AND conrelid = CAST(quote_ident(:table) AS regclass) AND confrelid = conrelid ORDER BY conname
"""


@dataclass(frozen=True)
class Step:
    """One call of the plan: make ``table`` a reference table or distribute it."""

    table: str
    kind: str  # reference | distributed
    colocate_with: str | None = None  # the first distributed table ('none' for itself)
    done: bool = False  # Citus has the table as ``kind`` already
    found: str | None = None  # how Citus has the table now (distributed, reference, local), None: not at all
    self_keys: tuple[str, ...] = ()  # its foreign keys to itself: dropped around the copy, then added again

    @property
    def sql(self) -> str:
        """The statement as it would be typed into psql (the plan runs it with bound values)."""
        if self.kind == "reference":
            return f"SELECT create_reference_table('{self.table}');"
        return (
            f"SELECT create_distributed_table('{self.table}', '{DISTRIBUTION_COLUMN}', colocate_with => '{self.colocate_with}');"
        )

    def bound(self) -> tuple[str, dict[str, str]]:
        if self.kind == "reference":
            return _REFERENCE, {"table": self.table}
        return _DISTRIBUTED, {"table": self.table, "column": DISTRIBUTION_COLUMN, "colocate_with": str(self.colocate_with)}


def _in_dependency_order(tables: set[str], foreign_keys: list[ForeignKey]) -> list[str]:
    """``tables`` with every table after the tables its foreign keys point at (Citus
    refuses a foreign key to a table it does not manage yet); ties by name."""
    parents = {t: {k.parent for k in foreign_keys if k.table == t and k.parent in tables and k.parent != t} for t in tables}
    ordered: list[str] = []
    while len(ordered) < len(tables):
        ready = sorted(t for t in tables if t not in ordered and parents[t] <= set(ordered))
        if not ready:
            raise ValueError(f"foreign keys form a cycle among {sorted(set(tables) - set(ordered))}")
        ordered.append(ready[0])
    return ordered


def plan_steps(catalogue: Catalogue, found: dict[str, str]) -> list[Step]:
    """Reference tables first, then the distributed tables, parents before children,
    all co-located with the first one. ``found`` maps a table Citus already manages to
    how (distributed, reference, local: from pg_dist_partition): a step whose table
    Citus has as the step makes it is marked done, not run again. Pure."""
    reference = {t for t in catalogue.tables if t in catalogue.reference}
    distributed = {t for t in catalogue.tables if catalogue.distributed(t)}

    def self_keys(table: str) -> tuple[str, ...]:
        return tuple(sorted(k.name for k in catalogue.foreign_keys if k.table == table == k.parent))

    steps = [
        Step(t, "reference", done=found.get(t) == "reference", found=found.get(t), self_keys=self_keys(t))
        for t in _in_dependency_order(reference, catalogue.foreign_keys)
    ]
    order = _in_dependency_order(distributed, catalogue.foreign_keys)
    for table in order:
        colocate_with = "none" if table == order[0] else order[0]
        steps.append(
            Step(table, "distributed", colocate_with, found.get(table) == "distributed", found.get(table), self_keys(table))
        )
    return steps


@dataclass
class CitusPlan:
    citus: str | None  # the extension's version, None when it is not installed
    steps: list[Step]
    violations: list[str]
    applied: list[str] = field(default_factory=list)
    shared_index: bool = True  # the search documents' vector index over all (the shards') is there

    @property
    def shared_index_sql(self) -> str:
        """Run last when the shared index is missing (one server's schema has none)."""
        return f"{SHARED_INDEX_SQL};"

    def to_dict(self) -> dict[str, object]:
        return {
            "citus": self.citus,
            "shared_index": self.shared_index,
            "shared_index_sql": self.shared_index_sql,
            "steps": [
                {"table": s.table, "kind": s.kind, "sql": s.sql, "done": s.done, "found": s.found, "self_keys": list(s.self_keys)}
                for s in self.steps
            ],
            "violations": self.violations,
            "applied": self.applied,
        }


async def read_plan(connection: AsyncConnection, schema: str = "public") -> CitusPlan:
    """The plan for ``schema`` and what of it Citus already did (read from
    ``pg_dist_partition`` whenever that name resolves on the search path)."""
    citus = (await connection.execute(text(_CITUS_VERSION))).scalar()
    done: dict[str, str] = {}
    if (await connection.execute(text("SELECT to_regclass('pg_dist_partition')"))).scalar() is not None:
        done = {table: method for table, method in await connection.execute(text(_DONE), {"schema": schema})}
    catalogue = await read_catalogue(connection, schema)
    shared = (await connection.execute(text("SELECT to_regclass(:name)"), {"name": f"{schema}.{SHARED_INDEX}"})).scalar()
    return CitusPlan(citus, plan_steps(catalogue, done), violations(catalogue), shared_index=shared is not None)


async def _run_step(connection: AsyncConnection, step: Step) -> None:
    """One step in the caller's transaction, the table's foreign keys to itself dropped
    before Citus copies its rows and added again after (their definitions read from the
    catalogue in this transaction): a failure anywhere undoes all of it."""
    keys = list(await connection.execute(text(_SELF_KEYS), {"table": step.table})) if step.self_keys else []
    quote = connection.dialect.identifier_preparer.quote
    table = quote(step.table)
    for name, _ in keys:
        await connection.exec_driver_sql(f"ALTER TABLE {table} DROP CONSTRAINT {quote(name)}")
    statement, values = step.bound()
    await connection.execute(text(_NO_LOCAL_TABLES))
    await connection.execute(text(statement), values)
    for name, definition in keys:
        await connection.exec_driver_sql(f"ALTER TABLE {table} ADD CONSTRAINT {quote(name)} {definition}")


async def apply_plan(connection: AsyncConnection, plan: CitusPlan) -> None:
    """Run the steps Citus has not done yet, in order, each in a transaction of its own
    (a failure leaves the steps before it done, and a second run resumes after them);
    when all are done, drop the rows distributing left in the coordinator's tables and
    build the shards' shared vector index if the database has none (a store migrated on
    one server: memory.store.vector_indexes). Citus local tables (an older plan's) are
    made plain tables again first."""
    local = [step.table for step in plan.steps if step.found == "local"]
    if local:
        await connection.execute(text(_UNDO_LOCAL), {"table": local[0]})
        await connection.commit()
        plan.steps = (await read_plan(connection)).steps
    for step in plan.steps:
        if not step.done:
            await _run_step(connection, step)
            await connection.commit()
            plan.applied.append(step.table)
    for step in reversed(plan.steps):  # children first: a table may not be emptied while pointed at
        await connection.execute(text(_TRUNCATE_LOCAL), {"table": step.table})
        await connection.commit()
    if not plan.shared_index:
        await connection.execute(text(SHARED_INDEX_SQL))
        await connection.commit()
        plan.shared_index = True


# --- migrations after distribution ----------------------------------------------------

_SHARDED = """
SELECT (SELECT CAST(logicalrelid AS text) FROM pg_dist_partition WHERE partmethod = 'h'
        ORDER BY colocationid, logicalrelid LIMIT 1)
FROM pg_dist_partition WHERE logicalrelid = CAST('conversations' AS regclass) AND repmodel = 't'
"""


def _first_distributed(connection: Connection) -> str | None:
    """The table the others are co-located with, on a database ``citus-plan``
    distributed (the conversations a reference table); None on any other."""
    if connection.execute(text("SELECT to_regclass('pg_dist_partition')")).scalar() is None:
        return None
    found = connection.execute(text(_SHARDED)).scalar()
    return None if found is None else str(found)


def distribute_new_table(connection: Connection, table: str) -> str | None:
    """For a migration that adds a per-conversation table: on a database ``citus-plan``
    distributed already, distribute ``table`` by ``conversation_id`` co-located with the
    others (on any other database nothing: the plan does it when it runs). Call it
    after creating the table and before adding its foreign keys (Citus refuses to
    distribute a table whose keys point at distributed tables). Returns the table it was
    co-located with, or None."""
    colocate_with = _first_distributed(connection)
    if colocate_with is None:
        return None
    connection.execute(text(_NO_LOCAL_TABLES))
    connection.execute(text(_DISTRIBUTED), {"table": table, "column": DISTRIBUTION_COLUMN, "colocate_with": colocate_with})
    return colocate_with


def reference_new_table(connection: Connection, table: str) -> bool:
    """For a migration that adds a table of the whole store (listed in
    ``REFERENCE_TABLES``): on a database ``citus-plan`` distributed already, make it a
    reference table (on any other nothing: the plan does it when it runs). Call it after
    creating the table; it may point only at reference tables. True when it did."""
    if _first_distributed(connection) is None:
        return False
    connection.execute(text(_NO_LOCAL_TABLES))
    connection.execute(text(_REFERENCE), {"table": table})
    return True
