"""``stashbird serve`` as an operator starts it (no chat tokens), read from its stderr:
it says in one line that no connector is configured, the libraries (Alembic,
APScheduler) print nothing at INFO, idle jobs print nothing, and a unit of real work
(consolidating a waiting message) is one INFO line with the door's structured fields."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory import ConversationRef, LocalEmbedder, Principal, ingest, open_memory, validate_message


async def _lines_until(stream: asyncio.StreamReader, done: Callable[[dict[str, Any]], bool], seconds: float) -> list[str]:
    """Lines of ``stream`` until one (JSON) satisfies ``done``, or ``seconds`` pass."""
    lines: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            raw = await asyncio.wait_for(stream.readline(), max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            break
        if not raw:
            break
        lines.append(raw.decode().rstrip("\n"))
        try:
            if done(json.loads(lines[-1])):
                break
        except ValueError:
            continue
    return lines


async def test_serve_without_tokens_logs_what_an_operator_needs(new_database: Callable[[], str], embedder: LocalEmbedder) -> None:
    url = new_database()
    ref = ConversationRef("serve-logs", "", f"c-{uuid.uuid4().hex[:8]}")
    memory = await open_memory(url, embedder)
    try:
        message = validate_message({"id": "m1", "author": "ann", "text": "I adopted a cat.", "ts": datetime.now(UTC).isoformat()})
        await ingest(memory, ref, [message], principal=Principal.operator("test"))
    finally:
        await memory._engine.dispose()
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "DISCORD_", "STASHBIRD_"))}
    environment |= {
        "DATABASE_URL": url,
        "STASHBIRD_HTTP_HOST": "127.0.0.1",
        "STASHBIRD_CONSOLIDATE_IDLE_SECONDS": "0",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "serve", "--port", "0", env=environment, stderr=asyncio.subprocess.PIPE
    )
    assert process.stderr is not None
    try:
        lines = await _lines_until(process.stderr, lambda e: e.get("operation") == "consolidate", 120)
        lines += await _lines_until(process.stderr, lambda e: False, 3)  # idle jobs: nothing more
    finally:
        process.terminate()
        await process.wait()
    entries = [json.loads(line) for line in lines]  # every line is JSON: no library's raw output
    consolidated = [e for e in entries if e.get("operation") == "consolidate"]
    assert len(consolidated) == 1, lines
    (line,) = consolidated
    assert line["level"] == "info" and line["conversation"] == str(ref) and line["principal"] == "job:scheduler"
    assert line["outcome"] == "ok" and line["elapsed_ms"] >= 0 and line["episodes"] == 1
    assert sum("no chat connector configured" in e["message"] for e in entries) == 1
    ours = {"memory", "connectors", "jobs", "bot"}
    assert all(e["logger"].split(".")[0] in ours or e["level"] in {"warning", "error"} for e in entries), lines
    assert all(e["level"] != "debug" for e in entries)


async def test_serve_on_the_embedded_server_says_only_what_matters(tmp_path: Path) -> None:
    """The first start of the embedded server (initdb, migrations) and idle jobs print
    nothing: the lines are the missing connector's and the port's."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "DISCORD_", "STASHBIRD_", "DATABASE_"))}
    environment |= {
        "STASHBIRD_DATA_DIR": str(tmp_path / "pg"),
        "STASHBIRD_HTTP_HOST": "127.0.0.1",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "serve", "--port", "0", env=environment, stderr=asyncio.subprocess.PIPE
    )
    assert process.stderr is not None
    try:
        lines = await _lines_until(process.stderr, lambda e: e["message"].startswith("serving on port"), 180)
        lines += await _lines_until(process.stderr, lambda e: False, 3)  # idle jobs: nothing more
    finally:
        process.terminate()
        await process.wait()
    entries = [json.loads(line) for line in lines]  # every line is JSON: no initdb or command-line output
    assert len(entries) == 2, lines
    assert entries[0]["message"].startswith("no chat connector configured: set SLACK_BOT_TOKEN"), lines
    assert entries[1]["message"].startswith("serving on port"), lines
