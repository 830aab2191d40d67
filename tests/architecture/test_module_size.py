"""No module of memory/, connectors/ or jobs/ is over 500 lines but the ORM schema
(memory/store/schema.py, every table in one place): a longer one is split along a seam
that says something, so that each module keeps one purpose. Pure: reads files."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("memory", "connectors", "jobs")
MAX_LINES = 500
EXEMPT = frozenset({"memory/store/schema.py"})


def sizes(root: Path = ROOT) -> dict[str, int]:
    """The line count of every module of ``PACKAGES`` under ``root``, by its path from it."""
    return {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for package in PACKAGES
        for path in (root / package).rglob("*.py")
        if "__pycache__" not in path.parts
    }


def oversized(lines: Mapping[str, int]) -> dict[str, int]:
    """The modules over ``MAX_LINES``, the exempt ones left out, by path. Pure."""
    return {path: n for path, n in sorted(lines.items()) if n > MAX_LINES and path not in EXEMPT}


def test_the_check_names_long_modules_but_the_schema() -> None:
    lines = {"memory/long.py": MAX_LINES + 1, "jobs/full.py": MAX_LINES, "memory/store/schema.py": 3 * MAX_LINES}
    assert oversized(lines) == {"memory/long.py": MAX_LINES + 1}


def test_no_module_is_over_500_lines_but_the_schema() -> None:
    lines = sizes()
    assert len(lines) > 50, "the packages were not found"
    assert EXEMPT <= lines.keys(), "an exemption names no module"
    if long := oversized(lines):
        listed = "\n".join(f"  {path}: {n} lines" for path, n in long.items())
        pytest.fail(f"over {MAX_LINES} lines (split each along a seam that says something):\n{listed}", pytrace=False)
