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


def test_forget_author_command(database_url: str, tmp_path: Path) -> None:
    team = f"T{uuid.uuid4().hex[:8]}"
    chats = {
        "C1": [("U1", "Ann", "I moved to Lisbon with Bob."), ("U2", "Bob", "I sold my Vespa in Lisbon.")],
        "C2": [("U3", "Cy", "Bob and Ann hike in Sintra."), ("U2", "Bob", "Sintra hiking is my favourite.")],
    }
    for channel, chat in chats.items():
        path = tmp_path / f"{channel}.jsonl"
        rows = [
            {"id": f"{channel}-{i}", "author_id": who, "author_name": name, "text": text, "ts": f"2026-01-01T10:0{i}:00Z"}
            for i, (who, name, text) in enumerate(chat)
        ]
        path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
        conversation = f"slack:{team}:{channel}"
        assert stashbird(database_url, "ingest", str(path), "--conversation", conversation).returncode == 0
        assert stashbird(database_url, "consolidate", "--conversation", conversation).returncode == 0

    def provenance(channel: str, message: str) -> str:
        run = stashbird(
            database_url, "audit", "provenance", "--conversation", f"slack:{team}:{channel}", "--message", message, "--json"
        )
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)["status"]

    dry = stashbird(database_url, "forget", "--author", "U2", "--workspace", f"slack:{team}", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("Would forget 2 message(s) by U2 in 2 conversation(s)")
    assert f"slack:{team}:C1: C1-1" in dry.stdout and f"slack:{team}:C2: C2-1" in dry.stdout
    assert provenance("C1", "C1-1") == "stored"  # the dry run changed nothing

    done = stashbird(database_url, "forget", "--author", "U2", "--workspace", f"slack:{team}", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["messages"], report["remaining"], report["removed"]["messages"]) == (2, 0, 2)
    assert report["vacuum"] is not None
    assert provenance("C1", "C1-1") == provenance("C2", "C2-1") == "deleted"
    assert provenance("C1", "C1-0") == "stored"

    again = stashbird(database_url, "forget", "--author", "U2", "--workspace", f"slack:{team}")
    assert again.returncode == 0 and again.stdout.startswith("Nothing to forget: no message by U2")
    unknown = stashbird(database_url, "forget", "--author", "U2", "--workspace", "slack:TNOWHERE")
    assert unknown.returncode == 2 and unknown.stderr.strip().endswith("no conversation of workspace 'slack:TNOWHERE' in memory")
    assert len(unknown.stderr.strip().splitlines()) == 1
    for argv in (("--author", "U2"), ("--author", "U2", "--workspace", "slack"), ("--dry-run",)):
        refused = stashbird(database_url, "forget", *argv)
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, (argv, refused.stderr)


def test_forget_author_everywhere_reaches_every_workspace(database_url: str, tmp_path: Path) -> None:
    author, teams = f"U{uuid.uuid4().hex[:8].upper()}", [f"T{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for n, team in enumerate(teams):
        rows = [
            {"id": f"{n}-0", "author_id": author, "author_name": "Dee", "text": f"Dee note {n}.", "ts": "2026-01-01T10:00:00Z"},
            {"id": f"{n}-1", "author_id": "U1", "author_name": "Ann", "text": "Ann stays.", "ts": "2026-01-01T10:01:00Z"},
        ]
        path = tmp_path / f"{team}.jsonl"
        path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
        assert stashbird(database_url, "ingest", str(path), "--conversation", f"slack:{team}:C1").returncode == 0

    dry = stashbird(database_url, "forget", "--author", author, "--everywhere", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith(f"Would forget 2 message(s) by {author} in 2 conversation(s) of every conversation.")
    done = stashbird(database_url, "forget", "--author", author, "--everywhere", "--no-vacuum", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["workspace"], report["messages"], report["conversations"], report["remaining"]) == (None, 2, 2, 0)
    for n, team in enumerate(teams):
        for message, status in ((f"{n}-0", "deleted"), (f"{n}-1", "stored")):
            run = stashbird(
                database_url, "audit", "provenance", "--conversation", f"slack:{team}:C1", "--message", message, "--json"
            )
            assert json.loads(run.stdout)["status"] == status, (team, message)

    for argv in (
        ("--author", author, "--everywhere", "--workspace", f"slack:{teams[0]}"),
        ("--everywhere",),
        ("--everywhere", "--conversation", f"slack:{teams[0]}:C1", "--message", "0-1"),
    ):
        refused = stashbird(database_url, "forget", *argv)
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, (argv, refused.stderr)
