"""``stashbird audit`` as an operator runs it (the report in a subprocess, the queries
through the same entry point in-process, to spare the suite a start-up each), and its
HTML report: no trace of a deleted message or another conversation in it, and, rendered
by headless Chromium, the page's text, one graph node per entity and a screenshot (that
test needs Debian's chromium on PATH: skipped without it, failed without it under CI)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import pytest
from clirun import stashbird

from bot.audit_report import HEIGHT, WIDTH, layout, shelves
from memory import (
    ConversationRef,
    Memory,
    OfflineExtractor,
    Principal,
    ask,
    consolidate,
    drop_conversation,
    forget,
    ingest,
    stats,
    validate_message,
)

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


async def _conversation(memory: Memory, ref: ConversationRef, rows: list[tuple[str, str, str]]) -> None:
    messages = [
        validate_message({"id": i, "author": a, "text": t, "ts": f"2026-02-0{n + 1}T10:00:00Z"})
        for n, (i, a, t) in enumerate(rows)
    ]
    await ingest(memory, ref, messages, principal=OPERATOR)
    await consolidate(memory, ref, principal=OPERATOR, extractor=OfflineExtractor())


@dataclass(frozen=True)
class Audited:
    """A conversation with a corrected fact, an answer and a deleted message (holding
    ``gone``), beside another conversation (holding ``foreign``), and its HTML report."""

    name: str
    ref: ConversationRef
    gone: str
    foreign: str
    report: Path


@pytest.fixture(scope="module")
async def audited(memory: Memory, database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Audited:
    name = f"cli-audit-{uuid.uuid4().hex[:8]}"
    ref, other = ConversationRef.parse(name), ConversationRef("slack", "T9", f"C{uuid.uuid4().hex[:6]}")
    gone, foreign = f"zq{uuid.uuid4().hex[:10]}", f"zq{uuid.uuid4().hex[:10]}"
    await _conversation(memory, other, [("1", "Zed", f"Zed keeps a boat in Oslo {foreign}.")])
    await _conversation(
        memory,
        ref,
        [
            ("1", "Ann", "I live in Boston now."),
            ("2", "Bob", "Marco from the data team sits on the fourth floor."),
            ("3", "Ann", "Correction: I moved to Denver last month."),
            ("4", "Bob", f"I adopted a cat called Miso {gone}."),
        ],
    )
    await ask(memory, ref, "Where does Ann live?", principal=OPERATOR)
    await forget(memory, ref, "4", principal=OPERATOR)
    out = tmp_path_factory.mktemp("audit") / "report.html"
    written = stashbird(database_url, "audit", "report", "--conversation", name, "--out", str(out))
    assert written.returncode == 0, written.stderr
    return Audited(name, ref, gone, foreign, out)


async def test_audit_commands_and_the_html_report(audited: Audited, database_url: str) -> None:
    name, gone, foreign = audited.name, audited.gone, audited.foreign
    code, about, _ = stashbird(database_url, "audit", "about", "--conversation", name, "Ann")
    assert code == 0 and about.startswith("as the operator") and "superseded facts (1)" in about
    assert "Correction: I moved to Denver" in about and "I live in Boston now." in about
    code, dry, _ = stashbird(database_url, "audit", "provenance", "--conversation", name, "--message", "3", "--json")
    dry_run = json.loads(dry)
    assert dry_run["principal"] == "operator:cli" and dry_run["dry_run"]["counts"]["relations_restored"] == 1
    code, forgotten, _ = stashbird(database_url, "audit", "forgotten", "--conversation", name)
    assert code == 0 and re.search(r"\sdelete\s+message 4\s+deleted\s+operator\s", forgotten) and gone not in forgotten
    code, _, error = stashbird(database_url, "audit", "stats", "--conversation", "no-such-conversation")
    assert code == 2 and "no conversation" in error

    page = audited.report.read_text()
    assert not re.search(r"<script|<link|@import|url\(|https?://(?!www\.w3\.org/2000/svg)", page)  # self-contained
    assert gone not in page and "Miso" not in page and foreign not in page and "Oslo" not in page


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


async def test_the_store_wide_log_shows_who_dropped_a_conversation(memory: Memory, database_url: str) -> None:
    """``audit forgotten`` without a conversation: the store-wide log, where a dropped
    conversation's row outlives it."""
    ref = ConversationRef("slack", "T-cli", f"C{uuid.uuid4().hex[:8]}")
    await ingest(
        memory,
        ref,
        [validate_message({"id": "1", "author": "Ann", "text": "Hi.", "ts": "2026-02-01T10:00:00Z"})],
        principal=OPERATOR,
    )
    assert await drop_conversation(memory, ref, principal=Principal.event("Ev-gone"))
    code, shown, _ = stashbird(database_url, "audit", "forgotten")
    assert code == 0 and re.search(rf"\sdrop_conversation\s+{ref}\s+platform event\s+event:Ev-gone", shown), shown
    code, as_json, _ = stashbird(database_url, "audit", "forgotten", "--json", "--since", "2026-01-01")
    dropped = [e for e in json.loads(as_json)["entries"] if e["about"] == str(ref)]
    assert code == 0 and [(e["action"], e["principal"]) for e in dropped] == [("drop_conversation", "event:Ev-gone")]
    code, _, error = stashbird(database_url, "audit", "stats")
    assert code == 2 and "--conversation" in error


def test_report_layout_is_deterministic_and_inside_the_picture() -> None:
    edges = [(0, n) for n in range(1, 10)] + [(n, n + 1) for n in range(10, 15)] + [(16, 17)]
    nodes = list(range(30))
    positions = layout(nodes, edges)
    assert positions == layout(list(reversed(nodes)), list(reversed(edges)))
    assert set(positions) == set(nodes)
    assert all(0 <= x <= WIDTH and 0 <= y <= HEIGHT for x, y in positions.values())
    connected_bottom = max(positions[n][1] for n in range(18))
    assert all(positions[n][1] > connected_bottom for n in range(18, 30))  # the unrelated ones sit below
    boxes = shelves([10, 6, 2], (0, 0, 900, 600))
    assert all(a[2] <= b[0] or a[3] <= b[1] or b[2] <= a[0] or b[3] <= a[1] for a, b in combinations(boxes, 2))  # apart
