"""``stashbird demo``: ingest a bundled multi-party sample conversation into the
(embedded) database and show what was stored."""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path


from bot.importers import read_jsonl
from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory.conversations import ConversationRef
from memory.ingest import ingest_messages
from memory.timeline import chain

SAMPLE = "sample_conversation.jsonl"


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
    return {
        "conversation": str(ref),
        "ingested": counts["stored"],
        "duplicates": counts["duplicate"],
        "episodes": episodes,
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
    return "\n".join(lines)
