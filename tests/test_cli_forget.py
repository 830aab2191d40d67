"""``stashbird forget`` and ``stashbird edit`` as a user runs them: subprocesses on the
test database."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from clirun import stashbird


def test_forget_and_edit_commands(database_url: str, tmp_path: Path) -> None:
    lines = [
        {"id": "1", "author": "Ann", "text": "I moved to Lisbon last spring.", "ts": "2026-01-01T10:00:00Z"},
        {"id": "2", "author": "Ann", "text": "I work at Google.", "ts": "2026-01-01T10:01:00Z"},
    ]
    path = tmp_path / "messages.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    conversation = f"cli-forget-{uuid.uuid4().hex[:8]}"
    assert stashbird(database_url, "ingest", str(path), "--conversation", conversation).returncode == 0
    assert stashbird(database_url, "consolidate", "--conversation", conversation).returncode == 0

    forget = stashbird(database_url, "forget", "--conversation", conversation, "--message", "1", "--json")
    assert forget.returncode == 0, forget.stderr
    report = json.loads(forget.stdout)
    assert report["status"] == "deleted" and report["counts"]["relations_removed"] >= 1
    again = stashbird(database_url, "forget", "--conversation", conversation, "--message", "1")
    assert "already deleted" in again.stdout

    edit = stashbird(database_url, "edit", "--conversation", conversation, "--message", "2", "--text", "I work at Spotify.")
    assert edit.returncode == 0, edit.stderr
    assert "edited" in edit.stdout and "new version consolidated" in edit.stdout
    empty = stashbird(database_url, "edit", "--conversation", conversation, "--message", "2", "--text", " ")
    assert empty.returncode == 2 and "text" in empty.stderr
