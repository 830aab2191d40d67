"""Docstrings, the README and the docs pages name repository paths
(``memory/store/schema.py``, ``lab/standins/``, ``docs/reference/settings.md``) that must
exist: a path left behind by a move fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("memory", "bot", "connectors", "jobs", "lab", "tests", "alembic")
PATH = re.compile(r"(?<![\w./-])((?:memory|bot|connectors|jobs|lab|tests|alembic|deploy|docs)/[\w./-]*[\w/])")


def named_paths(text: str) -> list[str]:
    """Repository paths named in ``text`` (a glob such as ``bot/commands/*`` is its folder). Pure."""
    return [match.split("*")[0].rstrip("/.") or match for match in PATH.findall(text)]


def missing(text: str) -> list[str]:
    return [path for path in named_paths(text) if not (ROOT / path).exists()]


def _docstrings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))]
    return [(getattr(n, "lineno", 1), doc) for n in nodes if (doc := ast.get_docstring(n))]


def test_the_check_finds_paths() -> None:
    text = "see memory/store/schema.py, lab/standins/ and memory/nowhere.py; not a/memory/x or https://x/bot/y"
    assert named_paths(text) == ["memory/store/schema.py", "lab/standins", "memory/nowhere.py"]
    assert named_paths("[Settings](docs/reference/settings.md), not ../docs/x.md") == ["docs/reference/settings.md"]
    assert missing(text) == ["memory/nowhere.py"]


def test_every_path_a_docstring_names_exists() -> None:
    sources = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))
    assert len(sources) > 100
    found = {
        f"{path.relative_to(ROOT)}:{line}": gone for path in sources for line, doc in _docstrings(path) if (gone := missing(doc))
    }
    assert found == {}


def test_every_path_the_readme_and_the_docs_name_exists() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    assert len(pages) > 10, "the docs pages were not found"
    found = {
        f"{page.relative_to(ROOT)}:{n}": gone
        for page in pages
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if (gone := missing(line))
    }
    assert found == {}
