"""Integration: everything a user can get wrong is one line naming it, exit code 2; a
traceback only with ``--debug``. ``stashbird`` runs in-process on the test database."""

from __future__ import annotations

import io
import json
import socket
import sys
import uuid
from pathlib import Path

import pytest
from clirun import stashbird

from memory import ConversationRef, Memory, Principal, ValidationError, ingest, validate_message


def closed_port() -> int:
    """A loopback port nothing listens on (bound to port 0, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def one_line(err: str, *words: str) -> bool:
    lines = err.strip().splitlines()
    return len(lines) == 1 and "Traceback" not in err and all(word in lines[0] for word in words)


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"STASHBIRD_EMBEDDING_DIM": "abc"}, ("STASHBIRD_EMBEDDING_DIM='abc'", "valid integer")),
        ({"STASHBIRD_EMBEDDING_DIM": "0"}, ("STASHBIRD_EMBEDDING_DIM",)),
        ({"STASHBIRD_EMBEDDING_DIM": "512"}, ("STASHBIRD_EMBEDDING_DIM is 512", "384")),  # issue case 5
        ({"DATABASE_URL": "mysql://u@h/db"}, ("postgresql://",)),
        ({"DATABASE_URL": "postgresql://u:secret@host:port/db"}, ("database URL cannot be used",)),
        ({"DATABASE_URL": f"postgresql://postgres:secret@127.0.0.1:{closed_port()}/x"}, ("cannot open the database", "***")),
        ({"STASHBIRD_LLM_TIMEOUT": "nan"}, ("STASHBIRD_LLM_TIMEOUT",)),
        ({"STASHBIRD_WORKERS": "0"}, ("STASHBIRD_WORKERS='0'", "greater than or equal to 1")),
        ({"STASHBIRD_SWEEP_DAYS": "0"}, ("STASHBIRD_SWEEP_DAYS='0'",)),
        ({"STASHBIRD_SWEEP_HOURS": "-1"}, ("STASHBIRD_SWEEP_HOURS='-1'",)),
        ({"STASHBIRD_SWEEP_HOURS": "inf"}, ("STASHBIRD_SWEEP_HOURS",)),
        ({"STASHBIRD_HTTP_PORT": "70000"}, ("STASHBIRD_HTTP_PORT='70000'", "less than or equal to 65535")),
        ({"STASHBIRD_JOBS_INTERVAL": "0"}, ("STASHBIRD_JOBS_INTERVAL='0'", "greater than 0")),
        ({"STASHBIRD_COMMUNITY_REBUILD_SHARE": "1.5"}, ("STASHBIRD_COMMUNITY_REBUILD_SHARE",)),
        ({"STASHBIRD_LOG_LEVEL": "LOUD"}, ("STASHBIRD_LOG_LEVEL='LOUD'",)),
    ],
)
async def test_bad_settings_are_one_line(
    env: dict[str, str], words: tuple[str, ...], cli_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, _, err = stashbird(None, "usage", "--conversation", "x")
    assert code == 2 and one_line(err, *words), err
    assert "secret" not in err


async def test_a_data_folder_that_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("STASHBIRD_DATA_DIR", str(tmp_path / "file"))
    (tmp_path / "file").write_text("not a folder")
    code, _, err = stashbird(None, "usage", "--conversation", "x")
    assert code == 2 and one_line(err, "STASHBIRD_DATA_DIR", "is a file")


async def test_an_embedding_endpoint_that_is_down_stops_the_run_with_its_summary(
    cli_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STASHBIRD_EMBEDDING_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"id": "1", "author": "ann", "text": "hi", "ts": 1}) + "\n")
    code, out, _ = stashbird(None, "ingest", str(path), "--conversation", f"down-{uuid.uuid4().hex[:6]}")
    assert code == 2
    assert "ingested 0" in out and "stopped: embedding endpoint" in out and "1 messages not attempted" in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["ask", "--conversation", "x", "--k", "0", "q?"], ("k:", "between 1 and 500")),
        (["ask", "--conversation", "caf\udce9", "q?"], ("conversation:", "lone surrogate")),  # invalid UTF-8 in argv
        (["ask", "--conversation", "x", "what\x00?"], ("question:", "NUL")),
        (["ask", "--conversation", "x", "--date", "01/02/2026", "q?"], ("date:", "YYYY-MM-DD")),
        (["forget", "--conversation", "x", "--message", "\udcff"], ("message:",)),
        (["edit", "--conversation", "x", "--message", "m1", "--text", "a\ud800"], ("text:", "lone surrogate")),
        (["ingest", "/", "--conversation", "x"], ("is a folder",)),
        (["ingest", "--locomo", "/nonexistent.json", "--conversation", "x"], ("file not found", "/nonexistent.json")),
    ],
)
async def test_bad_arguments_are_one_line(argv: list[str], words: tuple[str, ...], cli_env: None) -> None:
    code, _, err = stashbird(None, *argv)
    assert code == 2 and one_line(err, *words), err


async def test_debug_shows_the_traceback(cli_env: None) -> None:
    with pytest.raises(ValidationError, match="k:"):
        stashbird(None, "--debug", "ask", "--conversation", "x", "--k", "0", "q?")


async def test_a_file_that_is_not_locomo(cli_env: None, tmp_path: Path) -> None:
    path = tmp_path / "messages.jsonl"
    path.write_text(json.dumps({"id": "1", "author": "ann", "text": "hi", "ts": 1}) + "\n")
    code, _, err = stashbird(None, "ingest", "--locomo", str(path), "--conversation", "x")
    assert code == 2 and one_line(err, "not a LoCoMo conversation")


async def test_dash_reads_messages_from_standard_input(memory: Memory, cli_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    line = json.dumps({"id": "s1", "author": "ann", "text": "from a pipe", "ts": 1_700_000_000})
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(line.encode() + b"\n")))
    code, out, err = stashbird(None, "ingest", "-", "--conversation", f"stdin-{uuid.uuid4().hex[:6]}", "--json")
    assert code == 0, err
    assert json.loads(out)["ingested"] == 1


async def test_a_question_dated_in_year_one_is_answered(memory: Memory, cli_env: None) -> None:
    """Issue case 8: "last year" on 0001-01-01 would be year 0; it resolves to nothing."""
    name = f"year-one-{uuid.uuid4().hex[:6]}"
    message = validate_message({"id": "m1", "author": "Ann", "text": "I went hiking in the Alps.", "ts": "2026-01-05T10:00:00Z"})
    await ingest(memory, ConversationRef.parse(name), [message], principal=Principal.operator("test"))
    argv = ["ask", "--conversation", name, "--date", "0001-01-01", "what did Ann do last year?", "--json"]
    code, out, err = stashbird(None, *argv)
    assert code == 0, err
    assert json.loads(out)["time_ranges"] == []
