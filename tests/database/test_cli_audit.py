"""``stashbird audit`` as an operator runs it (the report in a subprocess, the queries
through the same entry point in-process, to spare the suite a start-up each), and its
HTML report: no trace of a deleted message or another conversation in it. The report
rendered by headless Chromium is tests/browser/test_audit_report.py; the audited
conversation and its report are tests/conftest.py's ``audited``."""

from __future__ import annotations

import json
import re
import uuid
from itertools import combinations
from typing import TYPE_CHECKING

from clirun import stashbird

from bot.audit_report import HEIGHT, WIDTH, layout, shelves
from memory import (
    ConversationRef,
    Memory,
    Principal,
    drop_conversation,
    ingest,
    validate_message,
)

if TYPE_CHECKING:
    from tests.conftest import Audited

OPERATOR = Principal.operator("test")


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
