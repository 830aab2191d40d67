"""``stashbird audit report`` rendered by headless Chromium: the page's text, one graph
node per entity and a screenshot, as a browser shows them. A folder of its own because it
needs Debian's chromium package: skipped without it, failed without it under CI (.ci/run
installs it). The report is tests/conftest.py's ``audited``; the other ``audit`` tests
are tests/database/test_cli_audit.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from memory import Memory, Principal, stats

if TYPE_CHECKING:
    from tests.conftest import Audited

OPERATOR = Principal.operator("test")


# The report's rendering needs Debian's chromium, which .ci/run installs: elsewhere its test
# is skipped, but not under CI, where a missing browser must fail it.
UNDER_CI = os.environ.get("CI", "").lower() in {"true", "1"}
needs_chromium = pytest.mark.skipif(
    shutil.which("chromium") is None and not UNDER_CI,
    reason="renders the report in headless Chromium: install Debian's chromium package (apt-get install chromium)",
)


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium")
    assert binary, "the report test needs Debian's chromium package (.ci/run installs it)"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
    ]
    return subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=120)


@needs_chromium
async def test_the_html_report_rendered_by_chromium(audited: Audited, memory: Memory, tmp_path: Path) -> None:
    """The page's text, one graph node per entity and a screenshot, as a browser shows them."""
    dom = chromium("--dump-dom", audited.report.as_uri(), profile=tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr
    entities = (await stats(memory, audited.ref, principal=OPERATOR)).entities
    assert len(re.findall(r'<g class="node (?:entity|anchor)" data-entity-id="\d+"', dom.stdout)) == entities > 0
    text = re.sub(r"<[^>]+>", " ", dom.stdout)
    for expected in (
        "What Stashbird remembers about",
        "Ann moved to Denver",
        "Ann lives in Boston",  # the offline fact keeps the speaker's verb, in the third person
        "Deletion log",
        "Usage over time",
    ):
        assert expected in text
    assert re.search(r"delete\s*</td>\s*<td>\s*message 4\s*</td>", dom.stdout)  # the deletion, by message id only
    shot = tmp_path / "report.png"
    taken = chromium(f"--screenshot={shot}", "--window-size=1200,1600", audited.report.as_uri(), profile=tmp_path / "profile")
    assert taken.returncode == 0 and shot.stat().st_size > 20_000, taken.stderr
