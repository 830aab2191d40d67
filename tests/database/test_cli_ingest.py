"""The ``stashbird ingest`` command as a user runs it, on the test database: in-process
through ``bot.cli.main`` (the same parser, exit codes and output as the installed
script), and once as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from clirun import stashbird

# The LoCoMo data lives in ``shared/`` beside the checkout (or beside its worktrees' folder).
_CANDIDATES = [parent / "shared" / "data" / "locomo" / "26.json" for parent in Path(__file__).resolve().parents]
LOCOMO_26 = next((path for path in _CANDIDATES if path.exists()), _CANDIDATES[0])


def test_the_installed_command_runs_as_a_process(database_url: str, tmp_path: Path) -> None:
    """One real process: the console script's module entry point, its exit code and streams."""
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"id": "1", "author": "ann", "text": "hello", "ts": "2026-01-01T10:00:00Z"}) + "\n")
    env = {**os.environ, "DATABASE_URL": database_url}
    command = [sys.executable, "-m", "bot.cli", "ingest", str(path), "--conversation", f"proc-{uuid.uuid4().hex[:8]}", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ingested"] == 1
    refused = subprocess.run([sys.executable, "-m", "bot.cli", "ask"], capture_output=True, text=True, env=env, timeout=300)
    assert refused.returncode == 2 and "--conversation" in refused.stderr


def test_bad_lines_are_reported_and_good_ones_kept(database_url: str, tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": "1", "author": "ann", "text": "first", "ts": "2026-01-01T10:00:00Z"}),
        "{not json",
        json.dumps({"id": "2", "text": "no author", "ts": "2026-01-01T10:01:00Z"}),
        json.dumps({"id": "3", "author": "bob", "text": "third", "ts": "whenever"}),
        "",
        json.dumps(
            {"id": "4", "author": "bob", "role": "admin", "text": "fourth", "ts": "2026-01-01T10:03:00Z", "reply_to": "1"}
        ),
        json.dumps(["a", "list"]),
    ]
    path = tmp_path / "messages.jsonl"
    path.write_text("\n".join(lines) + "\n")
    conversation = f"cli-{uuid.uuid4().hex[:8]}"

    first = stashbird(database_url, "ingest", str(path), "--conversation", conversation, "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["ingested"] == 2
    assert [(r["line"], r["field"]) for r in report["rejected"]] == [(2, "line"), (3, "author"), (4, "ts"), (7, "line")]

    again = json.loads(stashbird(database_url, "ingest", str(path), "--conversation", conversation, "--json").stdout)
    assert (again["ingested"], again["duplicates"]) == (0, 2)


def test_missing_file_is_a_clear_error(database_url: str, tmp_path: Path) -> None:
    result = stashbird(database_url, "ingest", str(tmp_path / "nope.jsonl"), "--conversation", "x")
    assert result.returncode == 2
    assert "file not found" in result.stderr and "nope.jsonl" in result.stderr


@pytest.mark.skipif(not LOCOMO_26.exists(), reason="LoCoMo data is not beside the repository")
def test_locomo_import_is_idempotent(database_url: str) -> None:
    conversation = f"locomo-26-{uuid.uuid4().hex[:6]}"
    first = json.loads(
        stashbird(database_url, "ingest", "--locomo", str(LOCOMO_26), "--conversation", conversation, "--json").stdout
    )
    second = json.loads(
        stashbird(database_url, "ingest", "--locomo", str(LOCOMO_26), "--conversation", conversation, "--json").stdout
    )
    assert (first["ingested"], first["duplicates"]) == (419, 0)
    assert (second["ingested"], second["duplicates"]) == (0, 419)
