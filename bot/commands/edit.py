"""``stashbird edit --conversation C --message ID --text "…"``: a changed message is a
correction. The old version's derived state is retracted as in a deletion, the new text
is stored in place, and the conversation is consolidated at once (``--no-consolidate``
leaves the edit queued for the next consolidation run). Then the memory tables are
vacuumed, as after ``stashbird forget``: the old text's dead row versions go."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from bot.commands.forget import add_message_arguments, render_counts, render_vacuum
from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import ConversationRef, Principal, consolidate, edit, vacuum

STATUS = {
    "edited": "edited",
    "unchanged": "text unchanged: nothing to do",
    "outdated": "an older edit than the one stored: nothing to do",
    "unknown": "no such message in this conversation: nothing to do",
    "deleted": "the message was deleted: nothing to edit",
    "forgotten": "its author opted out of being remembered: the edit is not stored and the message was forgotten",
}


def configure(parser: argparse.ArgumentParser) -> None:
    add_message_arguments(parser)
    parser.add_argument("--text", required=True, help="the new text of the message")
    parser.add_argument("--no-consolidate", action="store_true", help="only queue the edit for consolidation")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    async with memory_from_settings(settings) as memory:
        ref, principal = ConversationRef.parse(args.conversation), Principal.operator(args.principal)
        report = await edit(memory, ref, args.message, args.text, principal=principal)
        consolidation = None
        if report.status == "edited" and not args.no_consolidate:
            consolidation = (await consolidate(memory, ref, principal=principal)).as_dict()
        changed = report.status in ("edited", "forgotten")
        vacuumed = await vacuum(memory, principal=principal) if changed and not args.no_vacuum else None
    return {
        "conversation": args.conversation,
        **report.as_dict(),
        "consolidation": consolidation,
        "vacuum": asdict(vacuumed) if vacuumed else None,
    }


def render(result: dict[str, Any]) -> str:
    lines = [f"{result['conversation']} message {result['platform_message_id']}: {STATUS[result['status']]}"]
    if result["status"] != "edited":
        return lines[0]
    lines += ["  old version retracted:", *render_counts(result)]
    run = result["consolidation"]
    if run is None:
        lines.append("  new version queued for the next consolidation run")
    else:
        lines.append(
            f"  new version consolidated: {run['relations_created']} relations created, "
            f"{run['relations_duplicate']} confirmed, {run['entities_created']} entities created"
        )
    return "\n".join([*lines, *render_vacuum(result)])
