"""Code outside the memory core (bot/, jobs/, connectors/) imports only its public names:
``from memory import <name in memory.__all__>``, never a module behind them, and never
reaches the core's database handle (``.engine``, ``.sessions``). The benchmarks and the
test tooling may also import the lab (``memory.lab``); the product never does. The public
names themselves are found lazily, through a table that must agree with the imports type
checkers read."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import memory
import memory.lab

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = ("bot", "jobs", "connectors")
LAB_USERS = ("bot/bench/", "bot/testing/")  # may import memory.lab


def private_imports(source: str, lab: bool = False) -> list[str]:
    """The imports of ``source`` that reach past ``memory.__all__`` (and, when ``lab``,
    past ``memory.lab.__all__`` too). Pure."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("memory.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if lab and node.module == "memory.lab":
                found += [f"memory.lab.{a.name}" for a in node.names if a.name not in memory.lab.__all__]
            elif node.module.startswith("memory."):
                found.append(node.module)
            elif node.module == "memory":
                found += [f"memory.{a.name}" for a in node.names if a.name not in memory.__all__]
    return found


def side_doors(source: str) -> list[str]:
    """Reads of a Memory's database handle (``memory.engine``, ``self.memory.sessions``):
    the core's tables are reached through its commands only (a part's own engine, on
    tables of its own, is not the core's). Pure."""
    return [
        f"line {node.lineno}: .{node.attr}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and node.attr in {"engine", "sessions", "_engine", "_sessions"}
        and "memory" in ast.unparse(node.value).rsplit(".", 1)[-1]
    ]


def type_checking_imports(source: str) -> dict[str, str]:
    """Name -> module of the imports under ``if TYPE_CHECKING:`` in ``source``. Pure."""
    block = next(n for n in ast.parse(source).body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    return {
        alias.asname or alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def _modules() -> list[Path]:
    modules = sorted(p for package in OUTSIDE for p in (ROOT / package).rglob("*.py"))
    assert len(modules) > 20, "the packages were not found"
    return modules


def test_the_check_sees_private_imports() -> None:
    source = "import memory.core\nfrom memory.store import schema\nfrom memory import api, ask\nimport memoryless\n"
    assert private_imports(source) == ["memory.core", "memory.store", "memory.api"]
    assert private_imports("from memory.lab import recall\n") == ["memory.lab"]
    assert private_imports("from memory.lab import recall, door\n", lab=True) == ["memory.lab.door"]


def test_the_check_sees_side_doors() -> None:
    source = "async with memory.sessions() as s:\n    pass\nself.memory.engine.dispose()\nx = engine\nself.engine = own\n"
    assert side_doors(source) == ["line 1: .sessions", "line 3: .engine"]  # a part's own engine is its own


def test_the_check_reads_the_type_checkers_imports() -> None:
    source = "import x\nif TYPE_CHECKING:\n    from a.b import c, d\n    from e import f\n"
    assert type_checking_imports(source) == {"c": "a.b", "d": "a.b", "f": "e"}


def test_nothing_outside_the_core_imports_its_private_modules() -> None:
    offenders = {}
    for path in _modules():
        name = str(path.relative_to(ROOT))
        if names := private_imports(path.read_text(encoding="utf-8"), lab=name.startswith(LAB_USERS)):
            offenders[name] = names
    assert offenders == {}


def test_nothing_outside_the_core_holds_its_database() -> None:
    offenders = {
        str(path.relative_to(ROOT)): found for path in _modules() if (found := side_doors(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_the_product_never_imports_the_lab() -> None:
    product = [p for p in _modules() if not str(p.relative_to(ROOT)).startswith(LAB_USERS)]
    importers = [str(p.relative_to(ROOT)) for p in product if "memory.lab" in private_imports(p.read_text(encoding="utf-8"))]
    assert len(product) > 20 and importers == []


def test_every_public_name_resolves_to_what_its_module_defines() -> None:
    """The names are imported lazily (memory/__init__.py): each one is found, and no
    public name is also a subpackage's (importing one binds its name on ``memory``)."""
    import memory.communities.run  # noqa: F401

    assert all(getattr(memory, name) is not None for name in memory.__all__)
    assert callable(memory.list_communities)
    assert sorted(memory.__all__) == memory.__all__ and set(memory.__all__) <= set(dir(memory))
    packages = {p.stem if p.is_file() else p.name for p in (ROOT / "memory").iterdir() if p.suffix == ".py" or p.is_dir()}
    assert packages & set(memory.__all__) == set()
    assert set(memory.lab.__all__) & set(memory.__all__) == set()


def test_the_lazy_table_the_type_checkers_imports_and_all_agree() -> None:
    """``memory._WHERE`` (what ``__getattr__`` reads), the ``TYPE_CHECKING`` imports (what
    type checkers read) and ``__all__`` name the same names, each in the same module."""
    source = (ROOT / "memory" / "__init__.py").read_text(encoding="utf-8")
    assert type_checking_imports(source) == memory._WHERE
    assert list(memory._WHERE) == memory.__all__


def test_a_public_name_loads_only_its_own_module() -> None:
    """In a fresh interpreter, ``import memory`` loads none of the core's modules, and one
    name loads its module (with what that imports) and nothing else."""
    probe = (
        "import json, sys, memory\n"
        "def loaded():\n"
        "    return sorted(m for m in sys.modules if m.split('.')[0] == 'memory')\n"
        "before = loaded()\n"
        "memory.parse_days\n"
        "print(json.dumps([before, loaded()]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60, check=True)
    before, after = json.loads(done.stdout)
    assert before == ["memory"]
    assert after == ["memory", "memory.errors", "memory.privacy", "memory.privacy.retention"]
