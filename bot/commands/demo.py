"""``stashbird demo``: ingest a bundled multi-party sample conversation into the
(embedded) database, show what was stored, then ask it a few questions and print the
answers with their citations."""

from __future__ import annotations

import argparse
from importlib import resources
from datetime import datetime, timezone
from pathlib import Path


from bot.importers import read_jsonl
from bot.runtime import memory_from_settings
from bot.settings import Settings
from bot.commands.ask import render_answer
from memory.answering import answer
from memory.conversations import ConversationRef
from memory.ingest import ingest_messages
from memory.timeline import chain

SAMPLE = "sample_conversation.jsonl"
# Asked the day after the sample's last message.
QUESTION_DATE = datetime(2026, 3, 14, 12, tzinfo=timezone.utc)
QUESTIONS = (
    "When is the Atlas cut-over?",
    "Who is writing the rollback plan for Atlas?",
    "What is the name of Marco's dog?",
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conversation", default="demo", help="where to store the sample (default: demo)")


async def run(args: argparse.Namespace, settings: Settings) -> dict:
    ref = ConversationRef.parse(args.conversation)
    with resources.as_file(resources.files("bot") / "data" / SAMPLE) as path:
        parsed = read_jsonl(Path(path))
    async with memory_from_settings(settings) as memory:
        counts = await ingest_messages(memory, ref, parsed.messages)
        async with memory.sessions() as session:
            episodes = await chain(session, ref)
        answers = [(await answer(memory, ref, q, QUESTION_DATE, principal="demo")).to_dict() for q in QUESTIONS]
    return {
        "conversation": str(ref),
        "ingested": counts["stored"],
        "duplicates": counts["duplicate"],
        "episodes": episodes,
        "answers": answers,
    }


def render(result: dict) -> str:
    lines = [
        f"Stored the sample conversation as {result['conversation']!r}: "
        f"{result['ingested']} new episodes, {result['duplicates']} already there.",
        "",
        "Episodes in chain order (each is embedded and indexed for search):",
    ]
    lines += [
        f"  [{e['id']}] {e['time'][:16]} {e['speaker']} ({e['role']}): {e['text']}" for e in result["episodes"]
    ]
    lines += ["", f"Asking the memory (as of {QUESTION_DATE:%Y-%m-%d}):"]
    for item in result["answers"]:
        lines += [""] + render_answer(item)
    return "\n".join(lines)
