"""The docs pages against the tree (pure: reads files, needs no database and no MkDocs).

- docs/architecture/layout.md names every Python module of bot/, memory/, connectors/ and
  jobs/ (and lab/ once it exists) by its path from the repository root, in backticks at
  the start of a bullet (``- `memory/api.py`: what it does``), once; and names no module
  that does not exist. The failure lists exactly which paths are missing and which are
  extra, so that a move is one edit of the page.
- Every page of docs/ is in mkdocs.yml's nav (``mkdocs build --strict`` checks it too, in
  .ci/run), the README's relative links reach files, the README stays a front door
  (under 200 lines) with the same quick start as docs/quickstart.md, and no line of the
  README or of a docs page is longer than 200 characters.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LAYOUT = DOCS / "architecture" / "layout.md"
PACKAGES = ("bot", "memory", "connectors", "jobs", "lab")  # lab/: benchmarks and test tooling, once moved there
_PACKAGE = "|".join(PACKAGES)
# A module's own bullet: its path in backticks, first thing on a "- " line.
BULLET = re.compile(rf"^- `((?:{_PACKAGE})/[\w/]*\.py)`", re.MULTILINE)
# Any module path in backticks anywhere on the page (a description may name another module).
NAMED = re.compile(rf"`((?:{_PACKAGE})/[\w/]*\.py)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
MAX_LINE = 200


def modules(root: Path = ROOT) -> set[str]:
    """Every Python module of the packages that exist under ``root``, as a path from it."""
    return {
        path.relative_to(root).as_posix()
        for package in PACKAGES
        if (root / package).is_dir()
        for path in (root / package).rglob("*.py")
        if "__pycache__" not in path.parts
    }


def coverage(page: str, present: set[str]) -> tuple[list[str], list[str], list[str]]:
    """``(missing, extra, twice)``: modules with no bullet on ``page``, paths the page names
    (in a bullet or anywhere in backticks) that are no module, and modules with two
    bullets. Pure."""
    bullets = BULLET.findall(page)
    named = set(bullets) | set(NAMED.findall(page))
    missing = sorted(present - set(bullets))
    extra = sorted(named - present)
    twice = sorted({path for path in bullets if bullets.count(path) > 1})
    return missing, extra, twice


def report(missing: list[str], extra: list[str], twice: list[str]) -> str:
    """The failure message: what to add, what to move or remove. Pure."""
    lines = [f"{LAYOUT.relative_to(ROOT)} is out of date with the tree:"]
    if missing:
        lines.append(f"  missing: {len(missing)} module(s) without a bullet '- `path`: what it does':")
        lines += [f"    {path}" for path in missing]
    if extra:
        lines.append(f"  extra: {len(extra)} path(s) named on the page that are no module (moved or removed?):")
        lines += [f"    {path}" for path in extra]
    if twice:
        lines.append("  named by two bullets:")
        lines += [f"    {path}" for path in twice]
    return "\n".join(lines)


def test_the_coverage_check_sees_missing_extra_and_twice() -> None:
    page = (
        "- `memory/api.py`: the commands\n"
        "- `memory/gone.py`: moved away, see `connectors/old.py`\n"
        "- `memory/api.py`: again\n"
        "- `bot/data/`: not a module\n"
        "text naming `memory/store/<kind>.py` and memory/loose.py is no claim\n"
    )
    present = {"memory/api.py", "memory/new.py"}
    assert coverage(page, present) == (["memory/new.py"], ["connectors/old.py", "memory/gone.py"], ["memory/api.py"])
    message = report(*coverage(page, present))
    assert "    memory/new.py" in message and "    memory/gone.py" in message and "    connectors/old.py" in message


def test_the_layout_page_names_every_module_once_and_nothing_else() -> None:
    present = modules()
    assert len(present) > 100, "the packages were not found"
    missing, extra, twice = coverage(LAYOUT.read_text(encoding="utf-8"), present)
    if missing or extra or twice:
        pytest.fail(report(missing, extra, twice), pytrace=False)


def test_every_docs_page_is_in_the_nav() -> None:
    nav = set(re.findall(r"^\s*- [^:\n]+: ([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M))
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert pages, "the docs pages were not found"
    assert {"not in the nav": pages - nav, "no such page": nav - pages} == {"not in the nav": set(), "no such page": set()}


def test_the_readmes_relative_links_reach_files() -> None:
    links = LINK.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    relative = [link.split("#", 1)[0] for link in links if not re.match(r"[a-z]+:|#", link)]
    assert len(relative) > 10, "the README links into docs/"
    assert [link for link in relative if not (ROOT / link).exists()] == []


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def test_the_readme_is_a_front_door_with_the_quick_start_of_the_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 200
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = _bash_blocks(quick_start)
    assert len(commands) == 2 and "stashbird demo" in commands[0] and "pytest" in commands[1]
    assert _bash_blocks((DOCS / "quickstart.md").read_text(encoding="utf-8"))[:2] == commands


def test_no_line_of_the_readme_or_the_docs_is_over_200_characters() -> None:
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    long = {
        f"{page.relative_to(ROOT)}:{n}": len(line)
        for page in pages
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > MAX_LINE
    }
    assert long == {}
