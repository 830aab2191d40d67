"""Each table has one writer: only the module named for it below inserts, updates or
deletes its rows. The lifecycle modules (consolidation, forgetting, communities, the
fast path, retrieval) plan and call the writers and contain no write themselves.

The check parses every module under memory/ and finds its writes: SQL strings (INSERT
INTO, UPDATE ... SET, DELETE FROM; docstrings aside) and SQLAlchemy ``insert()``,
``update()``, ``delete()`` of the schema's models, and ``session.add/add_all/merge/
delete``. A write whose target is a variable, not a model, counts as a write of an
unknown table: only a writer may do that. An assignment to a mapped attribute of an ORM
row (``checkpoint.summary = ""``, flushed with the transaction) is a write of the row's
table; the row's model is known from where it came: a parameter or a dataclass field
annotated with the model, ``Model(...)``, ``session.get(Model, ...)``, a row of a
``select(Model)`` (``scalar_one()``, ``scalars()``, ...), or a call of a function of
memory/ annotated to return the model.

The lab's bulk loaders and probes write any table, in statements of their own; they live
outside memory/ (lab/synthetic.py, lab/probes.py), and the product never calls them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from memory.store.schema import Base

ROOT = Path(__file__).resolve().parents[2]
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
    "slack_installations": "memory/store/installations.py",
    "slack_bots": "memory/store/installations.py",
    "slack_oauth_states": "memory/store/installations.py",
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


COLUMNS = {mapper.class_.__name__: {a.key for a in mapper.column_attrs} for mapper in Base.registry.mappers}
ROW_METHODS = {"scalar_one", "scalar_one_or_none", "scalar", "first", "one", "one_or_none", "scalars", "all"}


def _models_named(annotation: ast.expr | None) -> set[str]:
    """The models an annotation names (``Checkpoint | None``, ``"Checkpoint"``, ...)."""
    if annotation is None:
        return set()
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    return {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name) and n.id in MODELS}


def _one_model(annotation: ast.expr | None) -> str | None:
    named = _models_named(annotation)
    return next(iter(named)) if len(named) == 1 else None


def returned_models(sources: list[str]) -> dict[str, str]:
    """Function name -> the one model its return annotation names, over ``sources``. Pure."""
    return {
        node.name: model
        for source in sources
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (model := _one_model(node.returns))
    }


class _Rows:
    """Which names and expressions of one function (or module body) hold ORM rows."""

    def __init__(self, scope: ast.AST, fields: dict[str, str], returns: dict[str, str]) -> None:
        self.fields, self.returns = fields, returns
        self.names: dict[str, str] = {}
        self.queries: dict[str, str] = {}  # names bound to a select(Model)
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in [*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs]:
                if model := _one_model(arg.annotation):
                    self.names[arg.arg] = model
        nodes = list(ast.walk(scope))
        for node in nodes:  # queries first: rows are read from them
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if model := self._selected(node.value):
                    self.queries[node.targets[0].id] = model
        for node in nodes:
            if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(target := _single(node), ast.Name):
                if (model := self.model(node.value) if node.value else None) or (
                    isinstance(node, ast.AnnAssign) and (model := _one_model(node.annotation))
                ):
                    self.names[target.id] = model
            elif isinstance(node, ast.For | ast.AsyncFor) and isinstance(node.target, ast.Name):
                if (model := self._selected(node.iter)) and _calls(node.iter, {"scalars"}):
                    self.names[node.target.id] = model

    def _selected(self, node: ast.expr) -> str | None:
        """The model of a ``select(Model)`` in ``node``, or of a query name it uses."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "select" and sub.args:
                first = sub.args[0]
                if isinstance(first, ast.Name) and first.id in MODELS:
                    return first.id
            if isinstance(sub, ast.Name) and sub.id in self.queries:
                return self.queries[sub.id]
        return None

    def model(self, node: ast.expr) -> str | None:
        """The model of the row ``node`` evaluates to, when it is one."""
        if isinstance(node, ast.Await):
            return self.model(node.value)
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Attribute):
            return self.fields.get(node.attr) if node.attr in self.fields else None
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        if isinstance(func, ast.Name):
            return func.id if func.id in MODELS else self.returns.get(func.id)
        if not isinstance(func, ast.Attribute):
            return None
        if func.attr == "get" and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in MODELS:
            return node.args[0].id
        if func.attr in ROW_METHODS and func.attr != "scalars":
            return self._selected(func.value)
        return self.returns.get(func.attr)


def _single(node: ast.Assign | ast.AnnAssign) -> ast.expr | None:
    if isinstance(node, ast.AnnAssign):
        return node.target
    return node.targets[0] if len(node.targets) == 1 else None


def _calls(node: ast.expr, methods: set[str]) -> bool:
    return any(isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute) and s.func.attr in methods for s in ast.walk(node))


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        found = [node.target]
    else:
        return []
    flat: list[ast.expr] = []
    while found:
        target = found.pop()
        found.extend(target.elts) if isinstance(target, ast.Tuple | ast.List) else flat.append(target)
    return flat


def assigned_rows(tree: ast.AST, returns: dict[str, str]) -> set[str]:
    """The tables whose loaded rows ``tree`` changes by attribute assignment."""
    fields = {
        node.target.id: model
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef)
        for node in cls.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and (model := _one_model(node.annotation))
    }
    found: set[str] = set()
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]:
        rows = _Rows(scope, fields, returns)
        for node in ast.walk(scope):
            for target in _targets(node):
                if isinstance(target, ast.Attribute) and (model := rows.model(target.value)) and target.attr in COLUMNS[model]:
                    found.add(MODELS[model])
    return found


def writes(source: str, returns: dict[str, str] | None = None) -> set[str]:
    """The tables ``source`` writes (``UNKNOWN`` for a write of a variable); ``returns``:
    the functions known to return rows (``returned_models``). Pure."""
    tree = ast.parse(source)
    prose, statements = _docstrings(tree), _sqlalchemy_names(tree)
    found: set[str] = assigned_rows(tree, returns or {})
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
    sources = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in paths}
    returns = returned_models(list(sources.values()))
    return {module: writes(source, returns) for module, source in sources.items()}


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


def test_the_scan_sees_attributes_assigned_on_loaded_rows() -> None:
    source = """
from dataclasses import dataclass
from memory.store.schema import Checkpoint, Community, CommunityState, Entity, Relation, Episode

@dataclass
class Plan:
    checkpoint: Checkpoint | None
    label: str

async def f(session, cid, plan: Plan, given: "Relation", notes):
    state = await session.get(CommunityState, cid)
    state.seen_entity_id, other = 1, 2
    plan.checkpoint.summary = ""
    given.fact += "!"
    query = select(Episode).where(Episode.conversation_id == cid)
    row = (await session.execute(query)).scalar_one()
    row.text = "x"
    for community in (await session.execute(select(Community))).scalars():
        community.dirty = True
    made = Entity(name="n")
    made.summary = "s"
    locked = await lock_entity(session, cid)
    locked.name = "m"
    plan.label = "not a row"
    notes.summary = "not a row either"
    counted = (await session.execute(select(Entity.id))).scalar_one()
    counted.real = 1
"""
    rows = {"community_state", "checkpoints", "relations", "episodes", "communities"}
    assert writes(source, {"lock_entity": "Entity"}) == rows | {"entities"}
    unmade = source.replace("made.summary", "made.unmapped")
    assert writes(unmade, {"lock_entity": "Entity"}) == rows | {"entities"}  # the locked row's
    assert writes(unmade) == rows  # lock_entity not known to return a row


def test_each_table_is_written_by_its_writer_alone() -> None:
    offences = {
        module: sorted(t for t in tables if WRITERS.get(t) != module and not (t == UNKNOWN and module in WRITERS.values()))
        for module, tables in _modules().items()
    }
    assert {m: t for m, t in offences.items() if t} == {}


def test_every_table_has_a_writer_that_writes_it() -> None:
    """The map is complete and true: every table of the schema is in it, and each
    writer writes each of its tables (one table seen through a variable counts)."""
    assert set(MODELS.values()) <= set(WRITERS)
    found = _modules()
    silent = {table: module for table, module in WRITERS.items() if table not in found[module] and UNKNOWN not in found[module]}
    assert silent == {}
