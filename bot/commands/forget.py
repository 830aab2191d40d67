"""``stashbird forget --conversation C --message ID``: delete one message and everything
that rested only on it; prints what was removed, kept, re-worded and anchored.
``stashbird forget --author ID --workspace PLATFORM:WORKSPACE [--dry-run]``: forget
everything one person wrote in a workspace (memory.forget_author; ``--everywhere``
instead of ``--workspace``: in every conversation of the store, which the door allows
the operator and configured admins only); prints what was
removed by kind and what stays and why (``--dry-run``: the messages that would go, one
by one, and the same counts, changing nothing). Then, in
its own statement after the deleting transaction, a plain VACUUM of the memory tables
reclaims the dead row versions (``--no-vacuum`` skips it; a scheduled job will take it
over). ``stashbird erase`` removes the bytes for certain."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import ConversationRef, Principal, ValidationError, Workspace, forget, forget_author, vacuum

STATUS = {
    "deleted": "deleted",
    "tombstoned": "not stored (yet): tombstone left, the message will be refused if it arrives",
    "already_deleted": "already deleted: nothing to do",
}


def add_message_arguments(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """Which message, and who asks (shared with ``stashbird edit``)."""
    parser.add_argument("--conversation", required=required, help="conversation name, or platform:workspace:channel")
    parser.add_argument("--message", required=required, help="the platform message id")
    parser.add_argument("--principal", default="cli", help="who asks, for the audit log")
    parser.add_argument("--no-vacuum", action="store_true", help="skip the VACUUM of the memory tables afterwards")


def configure(parser: argparse.ArgumentParser) -> None:
    add_message_arguments(parser, required=False)
    parser.add_argument("--author", help="forget everything this platform user id wrote (with --workspace)")
    parser.add_argument("--workspace", help="the person's workspace, PLATFORM:WORKSPACE (slack:TEAM, discord:GUILD)")
    parser.add_argument("--everywhere", action="store_true", help="with --author: every conversation of the store")
    parser.add_argument("--dry-run", action="store_true", help="with --author: print what would go, change nothing")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    one_message = args.conversation is not None or args.message is not None
    if args.author is None and not (args.conversation and args.message):
        raise ValidationError("forget", "give --conversation and --message, or --author with --workspace or --everywhere")
    if args.author is not None and (one_message or (args.workspace is None) == (not args.everywhere)):
        raise ValidationError(
            "forget", "--author takes one of --workspace PLATFORM:WORKSPACE or --everywhere, not --conversation or --message"
        )
    if args.everywhere and args.author is None:
        raise ValidationError("forget", "--everywhere goes with --author")
    if args.dry_run and args.author is None:
        raise ValidationError("forget", "--dry-run goes with --author (audit provenance shows one message's)")
    async with memory_from_settings(settings) as memory:
        principal = Principal.operator(args.principal)
        if args.author is not None:
            workspace = None if args.everywhere else Workspace.parse(args.workspace)
            person = await forget_author(memory, args.author, workspace=workspace, principal=principal, dry_run=args.dry_run)
            done = not args.no_vacuum and not args.dry_run and person.messages
            vacuumed = await vacuum(memory, principal=principal) if done else None
            return {**person.as_dict(), "vacuum": asdict(vacuumed) if vacuumed else None}
        report = await forget(memory, ConversationRef.parse(args.conversation), args.message, principal=principal)
        vacuumed = None if args.no_vacuum or report.status != "deleted" else await vacuum(memory, principal=principal)
    return {"conversation": args.conversation, **report.as_dict(), "vacuum": asdict(vacuumed) if vacuumed else None}


def render_vacuum(result: dict[str, Any]) -> list[str]:
    done = result.get("vacuum")
    return [f"  VACUUM of the memory tables: {done['seconds']} s (lock: {done['lock']})"] if done else []


def render_counts(result: dict[str, Any]) -> list[str]:
    """The retraction part of a delete or edit report, one line per kind of record."""
    c = result["counts"]
    lines = [
        f"  relations: {c['relations_removed']} removed, {c['relations_kept']} kept with remaining support, "
        f"{c['relations_restored']} restored (their correction was removed)",
        f"  entities: {c['entities_removed']} removed, {c['entities_anchored']} kept as anchors, {c['entities_kept']} kept",
        f"  communities marked for regeneration: {c['communities_dirtied']}; search documents removed: {c['documents_removed']}",
        f"  kept records re-worded from their surviving messages: {c['relations_reworded']} relations, "
        f"{c['entities_reworded']} entities",
        f"  rolling context entries: {c['context_entries_dropped']} dropped, {c['context_entries_pruned']} pruned; "
        f"answers withdrawn: {c['answers_withdrawn']}",
    ]
    if c["summary_cleared"]:
        lines.append(
            "  conversation summary: "
            + ("rebuilt from the surviving messages" if result["summary_rebuilt"] else "cleared, to be rebuilt")
        )
    return lines


def render(result: dict[str, Any]) -> str:
    if "author" in result:
        return "\n".join([*result["lines"], *render_vacuum(result)])
    head = f"{result['conversation']} message {result['platform_message_id']}: {STATUS[result['status']]}"
    return "\n".join([head, *(render_counts(result) if result["status"] == "deleted" else []), *render_vacuum(result)])
