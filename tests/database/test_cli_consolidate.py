"""``stashbird consolidate`` as a user runs it: replayed extractions, JSON report, clear
errors for a bad extractions file."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from clirun import stashbird

from memory.consolidation.extraction import ReplayExtractor
from memory.errors import ValidationError


def _write(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_consolidate_replays_extractions_and_reports(database_url: str, tmp_path: Path) -> None:
    conversation = f"cli-{uuid.uuid4().hex[:8]}"
    messages = _write(
        tmp_path / "m.jsonl",
        [
            {"id": "1", "author": "ann", "text": "I live in Boston", "ts": "2026-01-01T10:00:00Z"},
            {"id": "2", "author": "ann", "text": "Moved to Denver!", "ts": "2026-01-02T10:00:00Z"},
        ],
    )
    extractions = _write(
        tmp_path / "x.jsonl",
        [
            {
                "message_id": "1",
                "entities": [{"name": "ann", "type": "person"}],
                "relations": [{"subject": "ann", "predicate": "lives_in", "object": "Boston", "fact": "ann lives in Boston"}],
            },
            {
                "message_id": "2",
                "relations": [
                    {
                        "subject": "ann",
                        "predicate": "moved_to",
                        "object": "Denver",
                        "fact": "ann moved to Denver",
                        "decision": "contradiction",
                    }
                ],
            },
        ],
    )
    assert stashbird(database_url, "ingest", str(messages), "--conversation", conversation).returncode == 0
    result = stashbird(database_url, "consolidate", "--conversation", conversation, "--extractions", str(extractions), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["extractor"], report["episodes"], report["relations_created"], report["relations_superseded"]) == (
        "replay",
        2,
        2,
        1,
    )
    assert report["entities_created"] == 3 and report["llm_calls"] == 0

    human = stashbird(database_url, "consolidate", "--conversation", conversation, "--offline")
    assert human.returncode == 0 and "consolidated 0 episodes" in human.stdout


def test_bad_extractions_and_unknown_conversation_are_clear_errors(database_url: str, tmp_path: Path) -> None:
    conversation = f"cli-{uuid.uuid4().hex[:8]}"
    messages = _write(tmp_path / "m.jsonl", [{"id": "1", "author": "ann", "text": "hi", "ts": "2026-01-01T10:00:00Z"}])
    assert stashbird(database_url, "ingest", str(messages), "--conversation", conversation).returncode == 0
    bad = _write(tmp_path / "bad.jsonl", [{"message_id": "1", "relations": [{"subject": "ann", "predicate": "x", "fact": "f"}]}])
    result = stashbird(database_url, "consolidate", "--conversation", conversation, "--extractions", str(bad))
    assert result.returncode == 2 and "bad.jsonl line 1.relations[0].object" in result.stderr
    missing = stashbird(database_url, "consolidate", "--conversation", "no-such-conversation")
    assert missing.returncode == 2 and "no conversation 'no-such-conversation' in memory" in missing.stderr


def test_replay_records_are_validated() -> None:
    with pytest.raises(ValidationError, match=r"record 0.relations\[0\].decision"):
        ReplayExtractor.from_records(
            [
                {
                    "message_id": "1",
                    "relations": [{"subject": "a", "predicate": "p", "object": "b", "fact": "f", "decision": "maybe"}],
                }
            ]
        )
    with pytest.raises(ValidationError, match="record 0.message_id"):
        ReplayExtractor.from_records([{"relations": []}])
