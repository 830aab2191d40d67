"""Code outside the memory core (bot/, jobs/, connectors/, lab/) imports only its public
names: ``from memory import <name in memory.__all__>``, never a module behind them, and
never reaches the core's database handle (``.engine``, ``.sessions``). The lab's door
(lab/probes.py, with the loaders of lab/synthetic.py behind it) is the one exception:
it reaches into the core so that the rest of the lab imports its names instead.

The product (memory/, bot/, connectors/, jobs/) imports nothing from the lab, not even
by name through importlib: ``stashbird bench`` is found through an entry point. The public
names themselves are found lazily, through a table that must agree with the imports type
checkers read."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import memory
from lab import probes

ROOT = Path(__file__).resolve().parents[2]
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


def _sources(packages: tuple[str, ...]) -> dict[str, str]:
    sources = {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for package in packages for p in (ROOT / package).rglob("*.py")
    }
    assert {name.split("/")[0] for name in sources} == set(packages), "a package was not found"
    return sources


def test_the_check_reads_the_type_checkers_imports() -> None:
    source = "import x\nif TYPE_CHECKING:\n    from a.b import c, d\n    from e import f\n"
    assert type_checking_imports(source) == {"c": "a.b", "d": "a.b", "f": "e"}


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
