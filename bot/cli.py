"""The ``stashbird`` command line.

Each command lives in ``bot/commands/<name>.py`` (a ``-`` in its name is ``_`` in the file's)
and provides ``configure(parser)``, ``async run(args, settings) -> dict`` (the ``--json``
output) and ``render(result) -> str`` (the human output), and may provide
``exit_code(result) -> int`` for a run whose output is printed but which did not finish
(``ingest`` when an embedding endpoint fails). Errors a user can fix are printed as one
clear line, exit code 2; ``--debug`` shows tracebacks instead.

Only the command being run is imported (with the memory core behind it): ``stashbird
--help`` imports none of them, so it answers at once.

Commands of other packages (the lab's ``bench``) are plugins: entry points of the
``stashbird.commands`` group (pyproject.toml), each naming a module with the same
functions and a ``HELP`` line. They are looked up and imported only when no built-in
command is chosen (to list them, or to run one): the product never imports them.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from types import ModuleType
from typing import Sequence

COMMANDS = {
    "demo": "ingest a bundled sample conversation and show what was stored",
    "ingest": "append messages from a JSON Lines or LoCoMo file",
    "usage": "LLM and embedding usage totals of a conversation",
    "consolidate": "turn new messages into entities and relations with provenance",
    "ask": "answer a question from a conversation's memory, with citations",
    "forget": "delete a message, or everything a person wrote (--author), and what rested only on it",
    "optout": "opt a person out of being remembered in a workspace (or back in with --off)",
    "retention": "a conversation's retention window: show it, set it (--days N|off), apply it now",
    "edit": "correct a message: retract what its old text supported, store and consolidate the new",
    "backfill": "import a channel's history through the platform API (resumable, idempotent)",
    "import": "import a platform export file (a Slack workspace export)",
    "communities": "a conversation's communities of entities and their summaries (--rebuild)",
    "jobs": "background work: status, run-once, run the scheduler",
    "erase": "rewrite the memory tables so that deleted messages are physically gone from them",
    "audit": "what the memory holds about a conversation and why, what it forgot (runs as the operator)",
    "reindex": "embed stored messages again from what is indexed now (once after migration 0004)",
    "citus-plan": "shard the memory on Citus by conversation: print the plan (default) or --apply it",
    "serve": "run the chat service: connectors, the inbox worker, the sweep, /healthz",
    "sweep": "forget recent messages the platform no longer has (missed deletions)",
}
PLUGINS = "stashbird.commands"


def plugins() -> dict[str, ModuleType]:
    """The installed plugin commands by name, each module imported; a name a built-in
    command has stays the built-in's."""
    from importlib.metadata import entry_points

    return {point.name: point.load() for point in entry_points(group=PLUGINS) if point.name not in COMMANDS}


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """Every command with its help line (the plugins' only when ``argv`` chooses no
    built-in one); the arguments of the one ``argv`` names (the first word that is not
    an option), whose module is imported for them."""
    chosen = next((word for word in argv if not word.startswith("-")), None)
    parser = argparse.ArgumentParser(prog="stashbird", description="Long-term memory for group chats.")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    commands = parser.add_subparsers(dest="command", required=True)
    found = {} if chosen in COMMANDS else plugins()
    for name, help_text in {**COMMANDS, **{name: plugin.HELP for name, plugin in found.items()}}.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--json", action="store_true", help="print the result as JSON")
        if name == chosen:
            module = found.get(name) or importlib.import_module(f"bot.commands.{name.replace('-', '_')}")
            module.configure(sub)
            sub.set_defaults(module=module)
    return parser


def error_line(error: Exception) -> tuple[str, int]:
    """One line saying what is wrong, and the exit code: 2 for what a user can fix, 1
    for anything else (a defect: ``--debug`` shows its traceback)."""
    from memory import StashbirdError  # imported with the command, never for --help

    if isinstance(error, StashbirdError):
        text, code = str(error), 2
    elif isinstance(error, OSError) and error.filename is not None:
        reason = "file not found" if isinstance(error, FileNotFoundError) else (error.strerror or type(error).__name__).lower()
        text, code = f"{reason}: {error.filename}", 2
    else:
        text, code = f"unexpected {type(error).__name__}: {error} (--debug shows the traceback)", 1
    return " ".join(text.split()).encode("utf-8", "backslashreplace").decode("utf-8"), code


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code. Without ``argv`` this is the process
    (the ``stashbird`` script), which ends next: the objects it made are frozen out of
    the garbage collector, whose passes over them at interpreter exit would otherwise
    cost a short command about a sixth of its CPU."""
    if argv is not None:
        return run_command(argv)
    try:
        return run_command(sys.argv[1:])
    finally:
        gc.freeze()


def run_command(argv: Sequence[str]) -> int:
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    argv = list(argv)
    args = build_parser(argv).parse_args(argv)
    import asyncio
    import json

    from bot.settings import load_settings

    try:
        result = asyncio.run(args.module.run(args, load_settings()))
    except Exception as error:
        if args.debug:
            raise
        text, code = error_line(error)
        print(f"stashbird {args.command}: {text}", file=sys.stderr)
        return code
    try:
        print(json.dumps(result, indent=2, default=str) if args.json else args.module.render(result), flush=True)
    except BrokenPipeError:  # the reader left (``| head``): nothing more to say, and no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    exit_code = getattr(args.module, "exit_code", None)  # a command may end non-zero after its output
    return int(exit_code(result)) if exit_code is not None else 0


if __name__ == "__main__":
    sys.exit(main())
