"""The ``stashbird`` command line.

Each command lives in ``bot/commands/<name>.py`` and provides ``configure(parser)``,
``async run(args, settings) -> dict`` (the ``--json`` output) and ``render(result) -> str``
(the human output). Errors a user can fix are printed as one clear line, exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
from typing import Sequence

from bot.settings import Settings
from memory import StashbirdError

COMMANDS = {
    "demo": "ingest a bundled sample conversation and show what was stored",
    "ingest": "append messages from a JSON Lines or LoCoMo file",
    "usage": "LLM and embedding usage totals of a conversation",
    "consolidate": "turn new messages into entities and relations with provenance",
    "ask": "answer a question from a conversation's memory, with citations",
    "forget": "delete a message and everything that rested only on it",
    "edit": "correct a message: retract what its old text supported, store and consolidate the new",
    "backfill": "import a channel's history through the platform API (resumable)",
    "import": "import a platform export file (DiscordChatExporter JSON)",
    "communities": "a conversation's communities of entities and their summaries (--rebuild)",
    "jobs": "background work: status, run-once, run the scheduler",
    "erase": "rewrite the memory tables so that deleted messages are physically gone from them",
    "audit": "what the memory holds about a conversation and why, what it forgot (runs as the operator)",
    "bench": "benchmarks that print their figures",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stashbird", description="Long-term memory for group chats.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"bot.commands.{name}")
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--json", action="store_true", help="print the result as JSON")
        module.configure(sub)
        sub.set_defaults(module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    args = build_parser().parse_args(argv)
    try:
        result = asyncio.run(args.module.run(args, Settings()))
    except StashbirdError as error:
        print(f"stashbird {args.command}: {error}", file=sys.stderr)
        return 2
    except FileNotFoundError as error:
        print(f"stashbird {args.command}: file not found: {error.filename}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(args.module.render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
