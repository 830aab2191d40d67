"""``stashbird optout --author ID --workspace PLATFORM:WORKSPACE [--off]``: opt a person
out of being remembered in a workspace (their new messages are acknowledged and not
stored, on every path; their mentions are still answered), or back in with ``--off``.
Their past messages stay: ``stashbird forget --author`` forgets them."""

from __future__ import annotations

import argparse
from typing import Any

from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import Principal, Workspace, set_optout


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--author", required=True, help="the person's platform user id (U…, a Discord snowflake)")
    parser.add_argument("--workspace", required=True, help="PLATFORM:WORKSPACE, e.g. slack:T024BE7LD, discord:8138…")
    parser.add_argument("--off", action="store_true", help="opt back in: their new messages are stored again")
    parser.add_argument("--principal", default="cli", help="who asks, for the audit log")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    workspace = Workspace.parse(args.workspace)
    async with memory_from_settings(settings) as memory:
        changed = await set_optout(
            memory, args.author, workspace=workspace, opted_out=not args.off, principal=Principal.operator(args.principal)
        )
    return {"author": args.author, "workspace": str(workspace), "opted_out": not args.off, "changed": changed}


def render(result: dict[str, Any]) -> str:
    who = f"{result['author']} in {result['workspace']}"
    if result["opted_out"]:
        state = "opted out: new messages are not stored" + ("" if result["changed"] else " (already)")
    else:
        state = "opted in: new messages are stored" + ("" if result["changed"] else " (was not opted out)")
    return f"{who}: {state}"
