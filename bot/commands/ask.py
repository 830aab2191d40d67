"""``stashbird ask --conversation C "question" [--date YYYY-MM-DD]``: answer from memory
with citations (LLM when configured, else the best evidence quoted)."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import ValidationError

if TYPE_CHECKING:
    from memory import Answer


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("question", help="the question to answer from memory")
    parser.add_argument("--conversation", required=True, help="conversation name, or platform:workspace:channel")
    parser.add_argument("--date", help="the question's date, YYYY-MM-DD (default: today); relative times resolve against it")
    parser.add_argument("--k", type=int, default=None, help="evidence items to keep (default 30)")
    parser.add_argument("--principal", default="cli", help="who is asking, for the audit log")


def parse_date(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%d").replace(hour=12, tzinfo=timezone.utc)
    except ValueError:
        raise ValidationError("date", f"expected YYYY-MM-DD, got {value!r}") from None


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    question_date = parse_date(args.date)
    async with memory_from_settings(settings) as memory:
        # The core is imported once the local model has begun to load (memory_from_settings).
        from memory import ConversationRef, Principal, ask

        result: Answer = await ask(
            memory,
            ConversationRef.parse(args.conversation),
            args.question,
            principal=Principal.operator(args.principal),
            date=question_date,
            k=args.k,
        )
    return {"conversation": args.conversation, **result.to_dict()}


def _cited_line(message: dict[str, Any]) -> str:
    link = f" {message['link']}" if message.get("link") else ""
    line = f"   - {message['speaker']}, {str(message['message_time'])[:16]} (message {message['platform_message_id']}{link})"
    if message["outdated"]:
        line += " [outdated]"
        if message["correction"]:
            fixed = message["correction"]
            line += f", corrected by {fixed['speaker']} on {str(fixed['message_time'])[:10]}: {fixed['text']}"
    return line


def render_answer(result: dict[str, Any]) -> list[str]:
    """The reply as a chat shows it: the answer line, then the cited messages (shared
    with ``stashbird demo``)."""
    reply = result["reply"]
    lines = [f"Q: {result['question']}", f"A: {reply['line']}"]
    lines += [_cited_line(message) for message in reply["messages"]]
    if result.get("refusal"):
        lines.append(f"   ({result['refusal']})")
    return lines


def render(result: dict[str, Any]) -> str:
    lines = render_answer(result)
    if result["sub_queries"]:
        lines.append("sub-queries: " + "; ".join(result["sub_queries"]))
    if result["time_ranges"]:
        lines.append(
            "times: " + "; ".join(f"{r['expression']} = {r['start'][:10]} .. {r['end'][:10]}" for r in result["time_ranges"])
        )
    lines += [f"note: {note}" for note in result["notes"]]
    calls = sum(u["calls"] for u in result["usage"])
    tokens = sum(u["prompt_tokens"] + u["completion_tokens"] for u in result["usage"])
    lines.append(
        f"({result['mode']} answer from {len(result['evidence'])} evidence items; {calls} model calls, "
        f"{tokens} tokens; trace {result['trace_id']})"
    )
    return "\n".join(lines)
