"""Code outside the memory core (bot/, jobs/, connectors/) imports only its public names:
``from memory import <name in memory.__all__>``, never a module behind them, and never
reaches the core's database handle (``.engine``, ``.sessions``). The benchmarks and the
test tooling may also import the lab's probes (``lab.probes``); the product never does."""

from __future__ import annotations

import ast
from pathlib import Path

import memory
from lab import probes

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = ("bot", "jobs", "connectors")
LAB_USERS = ("bot/bench/", "bot/testing/")  # may import lab.probes


def private_imports(source: str, lab: bool = False) -> list[str]:
    """The imports of ``source`` that reach past ``memory.__all__``, and into the lab's
    probes (past ``lab.probes.__all__`` when ``lab``). Pure."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("memory.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "lab.probes":
                found += [f"lab.probes.{a.name}" for a in node.names if not lab or a.name not in probes.__all__]
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


def _modules() -> list[Path]:
    modules = sorted(p for package in OUTSIDE for p in (ROOT / package).rglob("*.py"))
    assert len(modules) > 20, "the packages were not found"
    return modules


def test_the_check_sees_private_imports() -> None:
    source = "import memory.core\nfrom memory.store import schema\nfrom memory import api, ask\nimport memoryless\n"
    assert private_imports(source) == ["memory.core", "memory.store", "memory.api"]
    assert private_imports("from lab.probes import recall\n") == ["lab.probes.recall"]
    assert private_imports("from lab.probes import recall, door\n", lab=True) == ["lab.probes.door"]


def test_the_check_sees_side_doors() -> None:
    source = "async with memory.sessions() as s:\n    pass\nself.memory.engine.dispose()\nx = engine\nself.engine = own\n"
    assert side_doors(source) == ["line 1: .sessions", "line 3: .engine"]  # a part's own engine is its own


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
    sources = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in product}
    importers = [name for name, source in sources.items() if any(n.startswith("lab.") for n in private_imports(source))]
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
    assert set(probes.__all__) & set(memory.__all__) == set()
