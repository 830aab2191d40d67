"""Code outside the memory core (bot/, jobs/, connectors/, lab/) imports only its public
names: ``from memory import <name in memory.__all__>``, never a module behind them, and
never reaches the core's database handle (``.engine``, ``.sessions``). The lab's door
(lab/probes.py, with the loaders of lab/synthetic.py behind it) is the one exception:
it reaches into the core so that the rest of the lab imports its names instead.

The product (memory/, bot/, connectors/, jobs/) imports nothing from the lab, not even
by name through importlib: ``stashbird bench`` is found through an entry point."""

from __future__ import annotations

import ast
from pathlib import Path

import memory
from lab import probes

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = ("bot", "jobs", "connectors", "lab")
PRODUCT = ("memory", "bot", "jobs", "connectors")
DOORS = ("lab/probes.py", "lab/synthetic.py")  # the lab's reach into the core
IMPORTERS = {"import_module", "__import__"}  # calls that import a module named by a string


def private_imports(source: str) -> list[str]:
    """The imports of ``source`` that reach past ``memory.__all__``, or past
    ``lab.probes.__all__``. Pure."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("memory.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("memory."):
                found.append(node.module)
            elif node.module == "memory":
                found += [f"memory.{a.name}" for a in node.names if a.name not in memory.__all__]
            elif node.module == "lab.probes":
                found += [f"lab.probes.{a.name}" for a in node.names if a.name not in probes.__all__]
    return found


def _in_lab(module: str) -> bool:
    return module == "lab" or module.startswith("lab.")


def _named(node: ast.expr) -> str | None:
    """The module name a string argument gives, or its fixed beginning (an f-string's)."""
    if isinstance(node, ast.JoinedStr) and node.values:
        node = node.values[0]
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def lab_imports(source: str) -> list[str]:
    """The lab's modules ``source`` imports: by ``import``/``from ... import``, or named
    to ``importlib.import_module``/``__import__``. Pure."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if _in_lab(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _in_lab(node.module):
            found.append(node.module)
        elif isinstance(node, ast.Call) and node.args and ast.unparse(node.func).rsplit(".", 1)[-1] in IMPORTERS:
            if (name := _named(node.args[0])) is not None and _in_lab(name.rstrip(".")):
                found.append(name)
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


def _sources(packages: tuple[str, ...]) -> dict[str, str]:
    sources = {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for package in packages for p in (ROOT / package).rglob("*.py")
    }
    assert {name.split("/")[0] for name in sources} == set(packages), "a package was not found"
    return sources


def test_the_check_sees_private_imports() -> None:
    source = "import memory.core\nfrom memory.store import schema\nfrom memory import api, ask\nimport memoryless\n"
    assert private_imports(source) == ["memory.core", "memory.store", "memory.api"]
    assert private_imports("from lab.probes import recall, door\nfrom lab.bench import common\n") == ["lab.probes.door"]


def test_the_check_sees_lab_imports() -> None:
    source = (
        "import lab.probes\nfrom lab import bench\nfrom lab.bench.cli import run\nimport laboratory\nfrom . import lab\n"
        "importlib.import_module(f'lab.bench.{name}')\n__import__('lab')\nimport_module('labels')\n"
        "importlib.import_module(f'bot.commands.{name}')\n"
    )
    assert sorted(lab_imports(source)) == ["lab", "lab", "lab.bench.", "lab.bench.cli", "lab.probes"]


def test_the_check_sees_side_doors() -> None:
    source = "async with memory.sessions() as s:\n    pass\nself.memory.engine.dispose()\nx = engine\nself.engine = own\n"
    assert side_doors(source) == ["line 1: .sessions", "line 3: .engine"]  # a part's own engine is its own


def test_nothing_outside_the_core_imports_its_private_modules() -> None:
    sources = _sources(OUTSIDE)
    assert set(DOORS) <= set(sources)
    offenders = {name: found for name, source in sources.items() if name not in DOORS and (found := private_imports(source))}
    assert offenders == {}


def test_nothing_outside_the_core_holds_its_database() -> None:
    offenders = {name: found for name, source in _sources(OUTSIDE).items() if name not in DOORS and (found := side_doors(source))}
    assert offenders == {}


def test_the_product_never_imports_the_lab() -> None:
    importers = {name: found for name, source in _sources(PRODUCT).items() if (found := lab_imports(source))}
    assert importers == {}


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
