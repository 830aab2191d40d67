"""Each table has one writer: only the module named for it below inserts, updates or
deletes its rows. The lifecycle modules (consolidation, forgetting, communities, the
fast path, retrieval) plan and call the writers and contain no write themselves.

The check parses every module under memory/ and finds its writes: SQL strings (INSERT
INTO, UPDATE ... SET, DELETE FROM; docstrings aside) and SQLAlchemy ``insert()``,
``update()``, ``delete()`` of the schema's models, and ``session.add/add_all/merge/
delete``. A write whose target is a variable, not a model, counts as a write of an
unknown table: only a writer may do that. Changing attributes of a loaded ORM row is
not seen; the writers' docstrings say the rows of their kind change only there.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from memory.store.schema import Base

ROOT = Path(__file__).resolve().parents[1]
UNKNOWN = "<a variable>"

WRITERS = {
    "conversations": "memory/store/conversations.py",
    "speakers": "memory/store/conversations.py",
    "episodes": "memory/store/episodes.py",
    "tombstones": "memory/store/episodes.py",
    "entities": "memory/store/entities.py",
    "relations": "memory/store/relations.py",
    "entity_provenance": "memory/store/provenance.py",
    "relation_provenance": "memory/store/provenance.py",
    "communities": "memory/store/communities.py",
    "community_members": "memory/store/communities.py",
    "community_state": "memory/store/communities.py",
    "search_documents": "memory/store/documents.py",
    "checkpoints": "memory/store/checkpoints.py",
    "rolling_context_entries": "memory/store/rolling_context.py",
    "answer_traces": "memory/store/answers.py",
    "answer_evidence": "memory/store/answers.py",
    "usage_ledger": "memory/store/ledger.py",
    "audit_log": "memory/store/audit.py",
    "store_audit_log": "memory/store/audit.py",
    "store_settings": "memory/store/settings.py",
    "participant_optouts": "memory/store/participants.py",
    "conversation_retention": "memory/store/participants.py",
    "inbox_events": "memory/store/inbox.py",
    "connector_cursors": "memory/store/inbox.py",
    "conversation_locks": "memory/store/locks.py",
    "job_claims": "memory/store/claims.py",
    "job_runs": "memory/store/claims.py",
}

# Modules that may write any table, each with its reason.
EXCEPTIONS = {
    "memory/synthetic.py": (
        "the benchmarks' lab loader: synthetic conversations of 100K messages and their graph in bulk "
        "INSERT ... SELECT statements (the writers' shapes would take minutes); no product path calls it"
    ),
    "memory/lab.py": (
        "the lab entry point the product never imports: it checkpoints a bulk-loaded conversation at its "
        "last message in one INSERT ... SELECT, as a served one would be"
    ),
}

MODELS = {mapper.class_.__name__: mapper.local_table.name for mapper in Base.registry.mappers}
SQL_WRITES = (
    re.compile(r"\bINSERT\s+INTO\s+\"?(\w+)"),
    re.compile(r"\bDELETE\s+FROM\s+\"?(\w+)"),
    re.compile(r"\bUPDATE\s+\"?(?!SET\b)(\w+)\"?(?:\s+(?:AS\s+)?\w+)?\s+SET\b"),
)
SESSION_WRITES = {"add", "add_all", "merge", "delete"}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes (prose, not SQL)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _target(node: ast.expr) -> str:
    """The table a write call names: a model (``Entity``, ``Entity(...)``), else unknown."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute) and node.attr == "__table__":
        node = node.value
    return MODELS.get(node.id, UNKNOWN) if isinstance(node, ast.Name) else UNKNOWN


def _sqlalchemy_names(tree: ast.AST) -> set[str]:
    """``insert``/``update``/``delete`` as this module imports them from SQLAlchemy."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy")
        for alias in node.names
        if alias.name in ("insert", "update", "delete")
    }


def writes(source: str) -> set[str]:
    """The tables ``source`` writes (``UNKNOWN`` for a write of a variable). Pure."""
    tree = ast.parse(source)
    prose, statements = _docstrings(tree), _sqlalchemy_names(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            found |= {match.group(1) for pattern in SQL_WRITES for match in pattern.finditer(node.value)}
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Name) and func.id in statements:
                found.add(_target(node.args[0]))
            elif (
                isinstance(func, ast.Attribute)
                and func.attr in SESSION_WRITES
                and isinstance(func.value, ast.Name)
                and "session" in func.value.id
            ):
                targets = node.args[0].elts if isinstance(node.args[0], ast.List) else [node.args[0]]
                found |= {_target(t) for t in targets}
    return found


def _modules() -> dict[str, set[str]]:
    paths = sorted((ROOT / "memory").rglob("*.py"))
    assert len(paths) > 50, "memory/ was not found"
    return {str(p.relative_to(ROOT)): writes(p.read_text(encoding="utf-8")) for p in paths}


def test_the_scan_sees_every_kind_of_write() -> None:
    source = '''
"""Module prose: INSERT INTO episodes is not a write."""
from sqlalchemy import delete, text, update as change
from sqlalchemy.dialects.postgresql import insert
from memory.store.schema import Entity, Relation, Community

A = text("INSERT INTO tombstones (conversation_id) VALUES (:c)")
B = "UPDATE episodes e SET prev_id = 1 WHERE e.id = 2"
C = "DELETE FROM search_documents WHERE id = 1"
D = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; VACUUM; SHARE UPDATE EXCLUSIVE"
E = "INSERT INTO x VALUES (1) ON CONFLICT DO UPDATE SET value = 2"

async def f(session, link, names):
    """UPDATE relations SET fact = '' in a docstring is prose."""
    await session.execute(insert(Entity).values(name="x"))
    await session.execute(change(Relation).values(fact=""))
    await session.execute(delete(link))
    session.add(Community(conversation_id=1))
    session.add_all([Community(), link])
    names.update({1: 2})
    [].insert(0, 1)
'''
    assert writes(source) == {"tombstones", "episodes", "search_documents", "x", "entities", "relations", "communities", UNKNOWN}


def test_each_table_is_written_by_its_writer_alone() -> None:
    offences = {
        module: sorted(t for t in tables if WRITERS.get(t) != module and not (t == UNKNOWN and module in WRITERS.values()))
        for module, tables in _modules().items()
        if module not in EXCEPTIONS
    }
    assert {m: t for m, t in offences.items() if t} == {}


def test_every_table_has_a_writer_that_writes_it() -> None:
    """The map is complete and true: every table of the schema is in it, and each
    writer writes each of its tables (one table seen through a variable counts)."""
    assert set(MODELS.values()) <= set(WRITERS)
    found = _modules()
    silent = {table: module for table, module in WRITERS.items() if table not in found[module] and UNKNOWN not in found[module]}
    assert silent == {}


def test_each_exception_still_writes_tables_that_are_not_its_own() -> None:
    found = _modules()
    assert all(found[module] - {UNKNOWN} for module in EXCEPTIONS), "an exception no longer needed: remove it"
