"""Integration: importing a Slack workspace export (``tests/data/slack_export``, written
for these tests in the export's format: users.json, channels.json, groups.json and a
folder of daily files per channel) into the conversations of the live stream."""

from __future__ import annotations

import argparse
import importlib
import zipfile
from pathlib import Path

import pytest

from bot.settings import Settings
from connectors.events import Author, ChatMessage, MessagePosted
from connectors.service import ChatService
from connectors.slack.export import read_export
from memory import ConversationRef, Memory, Principal, ValidationError, drop_conversation, messages, parse_time

EXPORT = Path(__file__).parent / "data" / "slack_export"
GENERAL = ConversationRef("slack", "T05EXPORT", "C05GENERAL")
DESIGN = ConversationRef("slack", "T05EXPORT", "G05DESIGN1")
TEST = Principal.operator("test")
import_command = importlib.import_module("bot.commands.import")


def zipped(tmp_path: Path, top: str = "Stand-in Slack export Mar 2 2026 - Mar 4 2026") -> Path:
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted(EXPORT.rglob("*.json")):
            archive.write(file, f"{top}/{file.relative_to(EXPORT)}")
    return path


def test_the_export_reads_as_the_live_stream_reads_slack(tmp_path: Path) -> None:
    with zipfile.ZipFile(zipped(tmp_path)) as archive:
        export = read_export(archive)
    assert export.team == "T05EXPORT"
    general, design = export.channels
    assert (general.conversation, general.name, design.conversation) == (GENERAL, "general", DESIGN)
    by_id = {m.id: m for m in general.messages}
    parent = by_id["1772449200.000200"]
    assert (parent.author.name, parent.author.role, parent.thread_id, parent.reply_to) == ("maya", "admin", parent.id, None)
    assert by_id["1772451000.000300"].reply_to == parent.id
    assert by_id["1772451000.000300"].author.name == "Tom Ortiz"
    assert by_id["1772456400.000500"].author == Author("B05DEPLOY9", "Deploys", "bot")
    assert by_id["1772532000.000600"].text.startswith("Correction: the budget")
    assert "floor-plan-v3.pdf" in by_id["1772542800.000900"].text
    assert general.deleted == ["1772535600.000700"] and general.skipped == 1
    assert len(general.messages) == 7
    assert [r["message"] for r in design.rejected] == ["2026-03-04.json#1"]


def test_an_archive_that_is_not_an_export_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "hello")
    with zipfile.ZipFile(path) as archive, pytest.raises(ValidationError, match="users.json"):
        read_export(archive)


async def test_import_then_live_events_for_imported_messages_are_duplicates(
    tmp_path: Path, memory: Memory, database_url: str
) -> None:
    for ref in (GENERAL, DESIGN):
        await drop_conversation(memory, ref, principal=TEST)
    args = argparse.Namespace(format="slack-export", file=zipped(tmp_path), workspace=None)
    settings = Settings(database_url=database_url)
    result = await import_command.run(args, settings)
    general, design = result["channels"]
    assert (general["stored"], general["forgotten"], general["skipped"]) == (7, 1, 1)
    assert (design["stored"], len(design["rejected"])) == (1, 1)
    assert "#general" in import_command.render(result)
    stored = {m["message_id"]: m for m in await messages(memory, GENERAL, principal=TEST)}
    assert stored["1772456400.000500"]["role"] == "bot"

    service = ChatService(memory)
    text = "The offsite venue is the Lisbon harbour hotel, 14-16 May."
    live = ChatMessage("1772449200.000200", Author("U05MAYA01", "maya", "admin"), text, parse_time("1772449200.000200"))
    await service.accept(MessagePosted(GENERAL, "EvLIVE1", live))
    late = ChatMessage(
        "1772535600.000700",
        Author("U05TOM0002", "Tom", "user"),
        "The deleted parent, delivered late.",
        parse_time("1772535600.000700"),
    )
    await service.accept(MessagePosted(GENERAL, "EvLIVE2", late))
    await service.drain()
    assert {m["message_id"] for m in await messages(memory, GENERAL, principal=TEST)} == set(stored)

    again = await import_command.run(args, settings)
    assert (again["channels"][0]["stored"], again["channels"][0]["duplicate"]) == (0, 7)
