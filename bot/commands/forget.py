"""``stashbird forget --conversation C --message ID``: delete one message and everything
that rested only on it; prints what was removed, kept and anchored."""

from __future__ import annotations

import argparse

from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import ConversationRef, Principal, forget

STATUS = {
    "deleted": "deleted",
    "tombstoned": "not stored (yet): tombstone left, the message will be refused if it arrives",
    "already_deleted": "already deleted: nothing to do",
}


def add_message_arguments(parser: argparse.ArgumentParser) -> None:
    """Which message, and who asks (shared with ``stashbird edit``)."""
    parser.add_argument("--conversation", required=True, help="conversation name, or platform:workspace:channel")
    parser.add_argument("--message", required=True, help="the platform message id")
    parser.add_argument("--principal", default="cli", help="who asks, for the audit log")


def configure(parser: argparse.ArgumentParser) -> None:
    add_message_arguments(parser)


async def run(args: argparse.Namespace, settings: Settings) -> dict:
    async with memory_from_settings(settings) as memory:
        report = await forget(
            memory, ConversationRef.parse(args.conversation), args.message, principal=Principal.operator(args.principal)
        )
    return {"conversation": args.conversation, **report.as_dict()}


def render_counts(result: dict) -> list[str]:
    """The retraction part of a delete or edit report, one line per kind of record."""
    c = result["counts"]
    lines = [
        f"  relations: {c['relations_removed']} removed, {c['relations_kept']} kept with remaining support, "
        f"{c['relations_restored']} restored (their correction was removed)",
        f"  entities: {c['entities_removed']} removed, {c['entities_anchored']} kept as anchors, {c['entities_kept']} kept",
        f"  communities marked for regeneration: {c['communities_dirtied']}; search documents removed: {c['documents_removed']}",
        f"  rolling context entries: {c['context_entries_dropped']} dropped, {c['context_entries_pruned']} pruned; "
        f"answers withdrawn: {c['answers_withdrawn']}",
    ]
    if c["summary_cleared"]:
        lines.append("  conversation summary: " + ("rebuilt from the surviving messages" if result["summary_rebuilt"] else "cleared, to be rebuilt"))
    return lines


def render(result: dict) -> str:
    head = f"{result['conversation']} message {result['platform_message_id']}: {STATUS[result['status']]}"
    return "\n".join([head, *(render_counts(result) if result["status"] == "deleted" else [])])
