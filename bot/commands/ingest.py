"""``stashbird ingest FILE --conversation C`` / ``stashbird ingest --locomo PATH --conversation C``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bot.importers import ParsedFile, read_jsonl, read_locomo
from bot.progress import progress
from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import ConversationRef, Principal, ValidationError, ingest


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", type=Path, help="JSON Lines: id, author, role, text, ts, reply_to (- reads stdin)")
    parser.add_argument("--locomo", type=Path, help="a LoCoMo conversation file instead of JSON Lines (- reads stdin)")
    parser.add_argument("--conversation", required=True, help="conversation name, or platform:workspace:channel")


def _parse(args: argparse.Namespace) -> ParsedFile:
    if bool(args.file) == bool(args.locomo):
        raise ValidationError("file", "give exactly one of FILE or --locomo PATH")
    return read_locomo(args.locomo) if args.locomo else read_jsonl(args.file)


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    ref = ConversationRef.parse(args.conversation)
    parsed = _parse(args)
    async with memory_from_settings(settings) as memory:
        with progress(len(parsed.messages), "ingest") as bar:
            report = await ingest(
                memory, ref, parsed.messages, principal=Principal.operator("cli"), on_batch=lambda r: bar.update(len(r))
            )
    refused = [{"line": parsed.lines[r.index], "field": "database", "reason": r.reason} for r in report.rejected]
    stopped = None
    if report.stopped:
        stopped = f"{report.stopped}; {len(parsed.messages) - report.attempted} messages not attempted (run again to continue)"
    return {
        "conversation": str(ref),
        "ingested": report.stored,
        "duplicates": report.duplicate,
        "tombstoned": report.tombstoned,
        "opted_out": report.opted_out,
        "rejected": sorted(parsed.rejected + refused, key=lambda r: r["line"] or 0),
        "stopped": stopped,
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        f"{result['conversation']}: ingested {result['ingested']}, duplicates skipped {result['duplicates']}, "
        f"refused as deleted {result['tombstoned']}, not stored (authors opted out) {result['opted_out']}, "
        f"rejected {len(result['rejected'])}"
    ]
    lines += [f"  line {r['line']}: {r['reason']}" if r["line"] else f"  {r['reason']}" for r in result["rejected"]]
    if result["stopped"]:
        lines.append(f"stopped: {result['stopped']}")
    return "\n".join(lines)


def exit_code(result: dict[str, Any]) -> int:
    """2 when the run stopped early (the summary says why and what is left)."""
    return 2 if result["stopped"] else 0
