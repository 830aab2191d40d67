"""The routing check: does a statement go to one shard when the tables are distributed
by conversation on Citus?

Citus sends a statement to one shard (a "router" query) only when every distributed
table in it is filtered on the distribution column to the same value: each occurrence,
in joins, FROM and WHERE subqueries, CTEs and UNION branches alike. Postgres derives a
table's filter from an equi-join with another filtered table of the same query level
(equivalence classes), and Citus prunes each table by the filters Postgres derived; a
correlated subquery sees only a parameter from the outer level, so it is not pinned by
the outer query's filter and must name the conversation itself. A single-row
``INSERT ... VALUES`` is routed by its ``conversation_id``; a modifying CTE never is.

The check parses with libpg_query (``pglast``), Postgres' own grammar. It is pure: a
statement, its parameters and the distributed tables in, the problems out
(``violations``). The suite runs it on every statement the tests execute
(``tests/conftest.py``). Utility statements (DDL, ANALYZE, VACUUM, SET, transaction
control) are not routed queries: the coordinator propagates DDL to the shards. Migrations
run multi-shard data changes from the coordinator by design, in one place
(``memory.store.database``), under the ``stashbird_migration`` execution option, which
the capture skips. Deliberate multi-shard reads carry a ``/* multi-shard: NAME */``
comment naming an entry of ``MULTI_SHARD``, where each one says why. Statements the
tests themselves execute to look at what was stored are not served queries and are
not checked (``Capture.report``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import FrameType
from typing import Any

import greenlet
import pglast
from pglast import ast
from pglast.enums import A_Expr_Kind, BoolExprType, SetOperation

COLUMN = "conversation_id"

# The one list of deliberate multi-shard reads, each with its reason.
MULTI_SHARD: dict[str, str] = {
    "due-backlog": (
        "the scheduler's discovery (memory.store.backlog.read_due): the conversations due by "
        "now, read through each shard's partial index on due_at (its cost follows what is due); "
        "every figure inside it is per conversation, joined on conversation_id, and the work it "
        "finds is then claimed and done per conversation (jobs.claims)"
    ),
    "waiting-backlog": (
        "backlog shedding and the service's health (memory.store.backlog.read_waiting): the "
        "messages waiting for consolidation in all conversations, one aggregate over the "
        "conversations with work marked (each shard's partial index on due_at); every figure "
        "inside it is per conversation, joined on conversation_id"
    ),
    "backlog-listing": (
        "`stashbird jobs status` without a conversation: every conversation's waiting work, one "
        "read for an operator, on demand, never on a tick or a message's path"
    ),
    "inbox-ready": (
        "the chat service's discovery of conversations with events ready (memory.store.inbox): "
        "each one found is then processed under its own conversation's inbox lock, statement "
        "by statement pinned to it"
    ),
    "inbox-health": (
        "the inbox's health figures for an operator (pending, failed, oldest) across all "
        "conversations: a read of one aggregate, run on demand, never on a message's path"
    ),
    "inbox-prune": (
        "maintenance: finished inbox rows older than the redelivery window, deleted in every "
        "conversation at once (Citus runs it on every shard in parallel); nothing a "
        "conversation's work waits on"
    ),
    "jobs-status": (
        "`stashbird jobs status`: the newest run of each job in the conversations the backlog "
        "listed, one read for an operator; the runs themselves are claimed per conversation"
    ),
    "retention-default": (
        "the store's default retention window changed (memory.privacy.commands): every "
        "conversation marked due once, so that discovery looks at each again under the new "
        "window; one statement at a process's start after the change, never on a tick"
    ),
    "audit-conversations": (
        "the audit's list of conversations with their message counts (memory.audit.overview), "
        "for the operator or a configured admin; each count is of one conversation's rows"
    ),
    "bench-seed": (
        "`stashbird bench jobs --idle`: quiet conversations bulk-inserted, each statement over all "
        "of them, once before a benchmark; never run by the service"
    ),
    "bench-scale": (
        "`stashbird bench scale`: conversations grown in bulk (each statement over all of them) "
        "and the store's size and message count read between steps; never run by the service"
    ),
    "residue-scan": (
        "the residue scan (memory.store.residue.find_tokens) looks for planted markers in every "
        "row of the store on purpose: a leak into another conversation's rows must be found too"
    ),
    "search-index-rows": (
        "EXPLAIN only, never run: the planner's estimate of the rows one vector index holds "
        "(under Citus, EXPLAIN of a multi-shard statement plans one shard), for the search plan"
    ),
}


@dataclass(frozen=True)
class Pin:
    """A value some table's ``conversation_id`` is compared with: parameter ``$param``
    (``many``: ``= ANY($param)``, which must hold one value) or a literal."""

    param: int | None = None
    literal: str | None = None
    many: bool = False


@dataclass
class _Level:
    """One query level (a SELECT, UPDATE or DELETE): its FROM names, its table
    occurrences, and which terms its equalities join (union-find)."""

    parent: _Level | None
    names: dict[str, str | None] = field(default_factory=dict)  # alias -> table (None: not a table)
    occurrences: list[tuple[str, str]] = field(default_factory=list)  # (alias, table)
    links: dict[object, object] = field(default_factory=dict)
    pins: dict[object, list[Pin]] = field(default_factory=dict)

    def find(self, term: object) -> object:
        while self.links.get(term, term) != term:
            term = self.links[term]
        return term

    def join(self, a: object, b: object) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.links[ra] = rb
            self.pins[rb] = self.pins.get(rb, []) + self.pins.pop(ra, [])


class _Walker:
    def __init__(self, distributed: frozenset[str]) -> None:
        self.distributed = distributed
        self.problems: list[str] = []
        self.pins: list[Pin] = []
        self.ctes: list[set[str]] = []

    # statements -----------------------------------------------------------------------

    def statement(self, node: ast.Node, parent: _Level | None = None) -> None:
        if isinstance(node, ast.SelectStmt):
            self.select(node, parent)
        elif isinstance(node, ast.InsertStmt):
            self.insert(node, parent)
        elif isinstance(node, (ast.UpdateStmt, ast.DeleteStmt)):
            self.modify(node, parent)
        elif isinstance(node, ast.ExplainStmt):
            self.statement(node.query, parent)
        elif isinstance(node, ast.DeclareCursorStmt):
            self.statement(node.query, parent)

    def with_clause(self, clause: ast.WithClause | None, parent: _Level | None) -> None:
        names: set[str] = set()
        self.ctes.append(names)
        for cte in (clause.ctes if clause else None) or ():
            query = cte.ctequery
            if isinstance(query, (ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt)):
                table = query.relation.relname
                if table in self.distributed:
                    self.problems.append(f"modifying CTE {cte.ctename} ({type(query).__name__} {table}): Citus never routes it")
            if clause is not None and clause.recursive:
                names.add(cte.ctename)
            self.statement(query, parent)
            names.add(cte.ctename)

    def select(self, node: ast.SelectStmt, parent: _Level | None) -> None:
        self.with_clause(node.withClause, parent)
        try:
            if node.op != SetOperation.SETOP_NONE:
                self.select(node.larg, parent)
                self.select(node.rarg, parent)
                return
            level = _Level(parent)
            for item in node.fromClause or ():
                self.from_item(item, level)
            self.quals(node.whereClause, level)
            for part in (
                node.targetList,
                node.whereClause,
                node.havingClause,
                node.groupClause,
                node.sortClause,
                node.valuesLists,
                node.limitCount,
                node.limitOffset,
                node.distinctClause,
            ):
                self.sublinks(part, level)
            self.close(level)
        finally:
            self.ctes.pop()

    def insert(self, node: ast.InsertStmt, parent: _Level | None) -> None:
        self.with_clause(node.withClause, parent)
        try:
            table = node.relation.relname
            source = node.selectStmt
            columns = [target.name for target in node.cols or ()]
            level = _Level(parent)
            if table in self.distributed and not self.is_cte(table):
                rows = _values_rows(source)
                if COLUMN not in columns:
                    self.problems.append(f"INSERT INTO {table} without {COLUMN}")
                elif rows is not None:
                    self.row_pins(table, [row[columns.index(COLUMN)] for row in rows], level)
                elif isinstance(source, ast.SelectStmt) and source.targetList:
                    pin = _pin(source.targetList[columns.index(COLUMN)].val)
                    self.pins.extend([pin] if pin else [])
            if isinstance(source, ast.SelectStmt) and _values_rows(source) is None:
                self.select(source, level)
            elif source is not None:
                self.sublinks(source, level)
            for part in (node.onConflictClause, node.returningClause):
                self.sublinks(part, level)
        finally:
            self.ctes.pop()

    def row_pins(self, table: str, values: Sequence[ast.Node], level: _Level) -> None:
        for value in values:
            pin = _pin(value)
            if pin is None:
                self.problems.append(f"INSERT INTO {table}: a row's {COLUMN} is not a bound value")
            else:
                self.pins.append(pin)
            self.sublinks(value, level)

    def modify(self, node: ast.UpdateStmt | ast.DeleteStmt, parent: _Level | None) -> None:
        self.with_clause(node.withClause, parent)
        try:
            level = _Level(parent)
            self.from_item(node.relation, level)
            others = node.fromClause if isinstance(node, ast.UpdateStmt) else node.usingClause
            for item in others or ():
                self.from_item(item, level)
            self.quals(node.whereClause, level)
            targets = node.targetList if isinstance(node, ast.UpdateStmt) else None
            for part in (targets, node.whereClause, node.returningClause):
                self.sublinks(part, level)
            self.close(level)
        finally:
            self.ctes.pop()

    # FROM items -----------------------------------------------------------------------

    def is_cte(self, name: str) -> bool:
        return any(name in names for names in self.ctes)

    def from_item(self, item: ast.Node, level: _Level) -> None:
        if isinstance(item, ast.RangeVar):
            alias = item.alias.aliasname if item.alias else item.relname
            distributed = item.relname in self.distributed and not (item.schemaname is None and self.is_cte(item.relname))
            level.names[alias] = item.relname if distributed else None
            if distributed:
                level.occurrences.append((alias, item.relname))
        elif isinstance(item, ast.JoinExpr):
            self.from_item(item.larg, level)
            self.from_item(item.rarg, level)
            if item.isNatural or COLUMN in [name.sval for name in item.usingClause or ()]:
                sides = [_aliases(item.larg), _aliases(item.rarg)]
                for alias in sides[0] + sides[1]:
                    if level.names.get(alias):
                        level.join((id(level), sides[0][0], COLUMN), (id(level), alias, COLUMN))
            self.quals(item.quals, level)
            self.sublinks(item.quals, level)
        elif isinstance(item, ast.RangeSubselect):
            self.select(item.subquery, level)
            if item.alias:
                level.names[item.alias.aliasname] = None
        elif isinstance(item, ast.RangeFunction):
            self.sublinks(item.functions, level)
            if item.alias:
                level.names[item.alias.aliasname] = None
        elif isinstance(item, ast.RangeTableSample):
            self.from_item(item.relation, level)

    # expressions ----------------------------------------------------------------------

    def quals(self, node: ast.Node | None, level: _Level) -> None:
        """The equalities that hold for every row (AND-ed at the top of a WHERE or ON)."""
        if isinstance(node, ast.BoolExpr) and node.boolop == BoolExprType.AND_EXPR:
            for arg in node.args:
                self.quals(arg, level)
        elif isinstance(node, ast.A_Expr) and _operator(node) == "=":
            self.equality(node, level)

    def equality(self, node: ast.A_Expr, level: _Level) -> None:
        left, right = self.term(node.lexpr, level), self.term(node.rexpr, level)
        if node.kind == A_Expr_Kind.AEXPR_OP:
            if left is not None and right is not None:
                level.join(left, right)
                return
            column, pin = (left, _pin(node.rexpr)) if left is not None else (right, _pin(node.lexpr))
        elif node.kind == A_Expr_Kind.AEXPR_OP_ANY:
            column, pin = left, _pin(node.rexpr, many=True)
        elif node.kind == A_Expr_Kind.AEXPR_IN and len(node.rexpr) == 1:
            column, pin = left, _pin(node.rexpr[0])
        else:
            return
        if column is not None and pin is not None:
            root = level.find(column)
            level.pins[root] = level.pins.get(root, []) + [pin]

    def term(self, node: ast.Node | None, level: _Level) -> object | None:
        """A column of this level's FROM items as a union-find term (None for anything
        else, a column of an outer level included: see the module docstring)."""
        if not isinstance(node, ast.ColumnRef) or not all(isinstance(f, ast.String) for f in node.fields):
            return None
        names = [f.sval for f in node.fields]
        if len(names) == 2 and names[0] in level.names:
            return (id(level), names[0], names[1])
        if len(names) == 1:
            owners = [alias for alias, _ in level.occurrences] if names[0] == COLUMN else list(level.names)
            if len(owners) == 1:
                return (id(level), owners[0], names[0])
        return None

    def sublinks(self, node: Any, level: _Level) -> None:
        """Check the subqueries inside an expression (not descending into them twice)."""
        if isinstance(node, (list, tuple)):
            for item in node:
                self.sublinks(item, level)
        elif isinstance(node, ast.SubLink):
            self.statement(node.subselect, level)
            self.sublinks(node.testexpr, level)
        elif isinstance(node, ast.Node):
            for name in node:
                self.sublinks(getattr(node, name), level)

    def close(self, level: _Level) -> None:
        for alias, table in level.occurrences:
            pins = level.pins.get(level.find((id(level), alias, COLUMN)), [])
            if not pins:
                shown = table if alias == table else f"{table} {alias}"
                self.problems.append(f"{shown} is not pinned to one conversation")
            self.pins.extend(pins)


def _operator(node: ast.A_Expr) -> str | None:
    names = node.name or ()
    return names[-1].sval if names and isinstance(names[-1], ast.String) else None


def _pin(node: ast.Node | None, many: bool = False) -> Pin | None:
    while isinstance(node, ast.TypeCast):
        node = node.arg
    if isinstance(node, ast.ParamRef):
        return Pin(param=node.number, many=many)
    if isinstance(node, ast.A_Const) and not node.isnull and not many:
        return Pin(literal=next(str(getattr(node.val, a)) for a in node.val if a != "location"))
    return None


def _values_rows(source: ast.Node | None) -> list[Sequence[ast.Node]] | None:
    """The rows of ``VALUES (...), (...)``, also as SQLAlchemy writes a multi-row insert
    that must return rows in order (``SELECT p0, p1 FROM (VALUES ...) AS imp_sen(p0, p1,
    sen_counter)``), each in the insert's column order; None for any other source."""
    if not isinstance(source, ast.SelectStmt):
        return None
    if source.valuesLists:
        return [list(row) for row in source.valuesLists]
    sources = source.fromClause or ()
    if len(sources) != 1 or not isinstance(sources[0], ast.RangeSubselect) or not sources[0].alias:
        return None
    inner, alias = sources[0].subquery, sources[0].alias
    if not isinstance(inner, ast.SelectStmt) or not inner.valuesLists or not alias.colnames:
        return None
    columns = [name.sval for name in alias.colnames]
    picked = [_column_name(target.val) for target in source.targetList or ()]
    if any(name not in columns for name in picked):
        return None
    return [[row[columns.index(str(name))] for name in picked] for row in inner.valuesLists]


def _column_name(node: ast.Node) -> str | None:
    while isinstance(node, ast.TypeCast):
        node = node.arg
    if isinstance(node, ast.ColumnRef) and len(node.fields) == 1 and isinstance(node.fields[0], ast.String):
        return str(node.fields[0].sval)
    return None


def _aliases(node: ast.Node) -> list[str]:
    if isinstance(node, ast.RangeVar):
        return [node.alias.aliasname if node.alias else node.relname]
    if isinstance(node, ast.JoinExpr):
        return _aliases(node.larg) + _aliases(node.rarg)
    if isinstance(node, (ast.RangeSubselect, ast.RangeFunction)) and node.alias:
        return [node.alias.aliasname]
    return []


@dataclass(frozen=True)
class Analysis:
    """What the text of a statement says: its problems, the values its distributed
    tables are pinned to, and the listed multi-shard read it declares (if any)."""

    problems: tuple[str, ...]
    pins: tuple[Pin, ...]
    multi_shard: str | None


def _declared(sql: str) -> str | None:
    for token in pglast.parser.scan(sql):
        body = sql[token.start : token.end + 1]
        if token.name == "C_COMMENT" and body[2:-2].strip().startswith("multi-shard:"):
            return body[2:-2].strip().removeprefix("multi-shard:").strip()
    return None


@lru_cache(maxsize=4096)
def analyse(sql: str, distributed: frozenset[str]) -> Analysis:
    """Parse once per statement text (the parameters vary, the text does not)."""
    walker = _Walker(distributed)
    for raw in pglast.parse_sql(sql):
        walker.statement(raw.stmt)
    return Analysis(tuple(walker.problems), tuple(walker.pins), _declared(sql))


def _values(pins: Iterable[Pin], parameters: Sequence[Any]) -> tuple[set[str], list[str]]:
    values: set[str] = set()
    problems: list[str] = []
    for pin in pins:
        if pin.param is None:
            values.add(str(pin.literal))
            continue
        value = parameters[pin.param - 1] if pin.param <= len(parameters) else None
        if pin.many:
            items = list(value) if isinstance(value, (list, tuple)) else []
            if len(items) != 1:
                problems.append(f"{COLUMN} = ANY(${pin.param}) holds {len(items)} values, not one")
            values.update(str(item) for item in items)
        else:
            values.add(str(value))
    return values, problems


def violations(sql: str, parameters: Sequence[Any], distributed: frozenset[str]) -> list[str]:
    """Why ``sql`` with ``parameters`` ($1 is ``parameters[0]``) would not be routed to one
    shard (empty: it would, it touches no distributed table, or it is a listed multi-shard
    read). Pure."""
    analysis = analyse(sql, distributed)
    if analysis.multi_shard is not None:
        return [] if analysis.multi_shard in MULTI_SHARD else [f"unlisted multi-shard read {analysis.multi_shard!r}"]
    values, problems = _values(analysis.pins, parameters)
    if len(values) > 1:
        problems.append(f"pinned to {len(values)} different conversations")
    return list(analysis.problems) + problems


_ROOT = Path(__file__).resolve().parents[1]
# Statements the tests execute themselves (checking what was stored) are not served
# queries: only those executed from the product's code (memory, bot, jobs, connectors) count.
TESTS = "tests/"


def _caller() -> str:
    """The innermost frame of our own code (not this module) that executed a statement."""
    frame: FrameType | None = sys._getframe(2)
    runner = greenlet.getcurrent()  # SQLAlchemy's asyncio runs the driver in a child greenlet
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if path.is_relative_to(_ROOT) and ".venv" not in path.parts and path.name != "routing.py":
            return f"{path.relative_to(_ROOT)}:{frame.f_code.co_name}"
        frame = frame.f_back
        if frame is None and runner.parent is not None:
            runner = runner.parent
            frame = runner.gr_frame
    return "?"


def _summary(value: Any) -> Any:
    """What the check needs of a parameter (conversation ids are integers): an integer
    itself, a list's length and its only item (a vector or a long id list is not kept)."""
    if isinstance(value, (list, tuple)):
        return ("list", len(value), value[0] if len(value) == 1 else None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _expand(summary: Any) -> Any:
    if isinstance(summary, tuple) and summary[:1] == ("list",):
        return [summary[2]] if summary[1] == 1 else [None] * summary[1]
    return summary


@dataclass
class Capture:
    """Every statement executed in this process (SQLAlchemy's ``before_cursor_execute``
    on all engines), kept as distinct texts with the distinct summaries of their
    parameters, and checked at the end against the distributed tables."""

    executed: dict[str, set[tuple[Any, ...]]] = field(default_factory=dict)
    origins: dict[str, set[str]] = field(default_factory=dict)  # where each text was executed from
    urls: set[str] = field(default_factory=set)

    def record(self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if conn.get_execution_options().get("stashbird_migration"):
            return
        self.urls.add(conn.engine.url.render_as_string(hide_password=False))
        # a real executemany passes a list of rows; SQLAlchemy's multi-row INSERT one row
        rows = parameters if executemany and isinstance(parameters, list) else [parameters]
        self.origins.setdefault(statement, set()).add(_caller())
        seen = self.executed.setdefault(statement, set())
        for row in rows:
            values = row.values() if isinstance(row, dict) else (row or ())
            seen.add(tuple(_summary(v) for v in values))

    def report(self, distributed: frozenset[str]) -> list[str]:
        """One line per statement text that would not route, with its problems."""
        lines = []
        for statement, summaries in self.executed.items():
            if all(origin.startswith(TESTS) for origin in self.origins[statement]):
                continue
            found: set[str] = set()
            for summary in summaries:
                found.update(violations(statement, [_expand(s) for s in summary], distributed))
            if found:
                shown = " ".join(statement.split())[:600]
                origins = ", ".join(sorted(self.origins[statement]))
                lines.append(f"{'; '.join(sorted(found))} (from {origins})\n    {shown}")
        return lines


def task_count(plan: Any) -> int | None:
    """The tasks a Citus plan (``EXPLAIN (FORMAT JSON)``) sends to the workers: the
    largest "Task Count" anywhere in it (None: no Citus node, a plain Postgres plan). Pure."""
    counts: list[int] = []
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("Task Count"), int):
                counts.append(node["Task Count"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return max(counts) if counts else None


def explainable(sql: str, distributed: frozenset[str]) -> bool:
    """A served statement the cluster can be asked to plan: it touches a distributed
    table pinned to a conversation and is not a listed multi-shard read (nor already an
    EXPLAIN, a cursor or a utility statement)."""
    analysis = analyse(sql, distributed)
    first = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    return bool(analysis.pins) and analysis.multi_shard is None and first in {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH"}


def replayed(summary: tuple[Any, ...]) -> list[Any]:
    """Parameters for EXPLAIN from what the capture kept: integers as they were, a
    one-item list as it was, anything else NULL (the plan's routing depends only on the
    conversation ids, which are integers)."""
    values = [_expand(s) for s in summary]
    return [v if not isinstance(v, list) or (v and v[0] is not None) else None for v in values]
