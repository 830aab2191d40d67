"""Code outside the memory core (bot/, jobs/, connectors/) imports only its public names:
``from memory import <name in memory.__all__>``, never a module behind them."""

from __future__ import annotations

import ast
from pathlib import Path

import memory

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = ("bot", "jobs", "connectors")


def private_imports(source: str) -> list[str]:
    """The imports of ``source`` that reach past ``memory.__all__``. Pure."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("memory.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("memory."):
                found.append(node.module)
            elif node.module == "memory":
                found += [f"memory.{a.name}" for a in node.names if a.name not in memory.__all__]
    return found


def test_the_check_sees_private_imports() -> None:
    source = "import memory.core\nfrom memory.store import schema\nfrom memory import api, ask\nimport memoryless\n"
    assert private_imports(source) == ["memory.core", "memory.store", "memory.api"]


def test_nothing_outside_the_core_imports_its_private_modules() -> None:
    modules = sorted(p for package in OUTSIDE for p in (ROOT / package).rglob("*.py"))
    assert len(modules) > 20, "the packages were not found"
    offenders = {
        str(path.relative_to(ROOT)): names for path in modules if (names := private_imports(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_every_public_name_resolves_to_what_its_module_defines() -> None:
    """The names are imported lazily (memory/__init__.py): each one is found, and the
    command ``communities`` is not shadowed by the subpackage of the same name."""
    import memory.communities.run  # noqa: F401  (binds nothing over the command)
    from memory import api

    assert all(getattr(memory, name) is not None for name in memory.__all__)
    assert memory.communities is api.communities and callable(memory.communities)
    assert sorted(memory.__all__) == memory.__all__ and set(memory.__all__) <= set(dir(memory))
