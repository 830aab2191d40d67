"""``stashbird retention --conversation C [--days N|off]``: a conversation's retention
window. With ``--days``, set the conversation's own window (``off`` keeps everything,
whatever ``STASHBIRD_RETENTION_DAYS`` says); without, show the window that applies. The
scheduler's retention job forgets what is past it; ``--apply`` does it now."""

from __future__ import annotations

import argparse
from typing import Any

from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import ConversationRef, Principal, apply_retention, parse_days, retention, set_retention


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conversation", required=True, help="conversation name, or platform:workspace:channel")
    parser.add_argument("--days", help="N (days) or off: the conversation's own window")
    parser.add_argument("--apply", action="store_true", help="forget what is past the window now, as the job would")
    parser.add_argument("--principal", default="cli", help="who asks, for the audit log")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    ref = ConversationRef.parse(args.conversation)
    principal = Principal.operator(args.principal)
    days = parse_days(args.days, "--days") if args.days is not None else None
    async with memory_from_settings(settings) as memory:
        if args.days is not None:
            await set_retention(memory, ref, days, principal=principal)
        applies = await retention(memory, ref, principal=principal)
        applied = (await apply_retention(memory, ref, principal=principal)).as_dict() if args.apply else None
    return {
        "conversation": str(ref),
        "set": args.days is not None,
        "days": applies.days,
        "source": applies.source,
        "describe": applies.describe(),
        "applied": applied,
    }


def render(result: dict[str, Any]) -> str:
    lines = [f"{result['conversation']}: {'set; ' if result['set'] else ''}messages are kept {result['describe']}"]
    applied = result["applied"]
    if applied is not None:
        lines.append(
            f"  forgot {applied['forgotten']} messages said before {applied['cutoff'] or '-'} in {applied['batches']} batches; "
            f"{applied['remaining']} still past the window (the next run continues)"
        )
    return "\n".join(lines)
