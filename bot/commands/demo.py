"""``stashbird demo``: the whole memory on a bundled multi-party sample conversation.

It starts the sample's conversation afresh, ingests it, consolidates it into facts with
provenance, asks a few questions (answers cite messages), then deletes one message and
shows that what rested only on it is gone while everything else stays.
"""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from bot.commands.ask import render_answer
from bot.importers import read_jsonl
from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import (
    ConversationRef,
    Principal,
    ask,
    consolidate,
    drop_conversation,
    facts,
    forget,
    ingest,
    messages,
)

SAMPLE = "sample_conversation.jsonl"
# Asked the day after the sample's last message.
QUESTION_DATE = datetime(2026, 3, 14, 12, tzinfo=timezone.utc)
QUESTIONS = (
    "When is the Atlas cut-over?",
    "Who is writing the rollback plan for Atlas?",
    "What is the name of Marco's dog?",
)
FORGOTTEN = ("m13", "What is the name of Marco's dog?")  # the message deleted, the question asked again


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conversation", default="demo", help="where to store the sample (default: demo)")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    ref = ConversationRef.parse(args.conversation)
    with resources.as_file(resources.files("bot") / "data" / SAMPLE) as path:
        parsed = read_jsonl(Path(path))
    async with memory_from_settings(settings) as memory:
        demo = Principal.operator("demo")
        await drop_conversation(memory, ref, principal=demo)
        report = await ingest(memory, ref, parsed.messages, principal=demo)
        consolidation = await consolidate(memory, ref, principal=demo)
        episodes = await messages(memory, ref, principal=demo)
        stored_facts = await facts(memory, ref, principal=demo)
        answers = [(await ask(memory, ref, q, principal=demo, date=QUESTION_DATE)).to_dict() for q in QUESTIONS]
        message_id, question = FORGOTTEN
        deletion = await forget(memory, ref, message_id, principal=demo)
        after = (await ask(memory, ref, question, principal=demo, date=QUESTION_DATE)).to_dict()
    return {
        "conversation": str(ref),
        "ingested": report.stored,
        "episodes": episodes,
        "consolidation": consolidation.as_dict(),
        "facts": stored_facts,
        "answers": answers,
        "deletion": deletion.as_dict(),
        "answer_after_deletion": after,
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        f"Stored the sample conversation as {result['conversation']!r}: {result['ingested']} episodes "
        "(each embedded and indexed for search), in chain order:",
    ]
    lines += [f"  {e['message_id']:>4} {e['time'][:16]} {e['speaker']} ({e['role']}): {e['text']}" for e in result["episodes"]]
    report = result["consolidation"]
    lines += [
        "",
        f"Consolidated {report['episodes']} episodes: {report['entities_created']} entities, "
        f"{report['relations_created']} relations ({report['relations_superseded']} superseded), "
        f"{report['llm_calls']} LLM calls. Facts with the messages that support them:",
    ]
    lines += [f"  {'  ' if f['status'] == 'active' else '~ '}{f['fact']}  <- {', '.join(f['messages'])}" for f in result["facts"]]
    lines += ["", f"Asking the memory (as of {QUESTION_DATE:%Y-%m-%d}):"]
    for item in result["answers"]:
        lines += [""] + render_answer(item)
    deletion = result["deletion"]
    counts = ", ".join(f"{name} {value}" for name, value in deletion["counts"].items() if value)
    lines += [
        "",
        f"Deleting message {deletion['platform_message_id']}: {deletion['status']} ({counts or 'nothing derived'}).",
        "",
    ]
    lines += render_answer(result["answer_after_deletion"])
    return "\n".join(lines)
