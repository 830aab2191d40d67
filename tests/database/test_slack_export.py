"""Integration: importing a Slack workspace export (``tests/data/slack_export``, written
for these tests in the export's format: users.json, channels.json, groups.json and a
folder of daily files per channel) into the conversations of the live stream."""

from __future__ import annotations

import argparse
import importlib
import json
import zipfile
from pathlib import Path

import pytest

from bot.settings import DatabaseSettings, Settings
from connectors.events import Author, ChatMessage, MessagePosted
from connectors.service import ChatService
from connectors.slack.export import read_export
from memory import ConversationRef, Memory, Principal, ValidationError, drop_conversation, messages, parse_time

EXPORT = Path(__file__).parents[1] / "data" / "slack_export"
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
    settings = Settings(database=DatabaseSettings(url=database_url))
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


def export_zip(tmp_path: Path, files: dict[str, object]) -> Path:
    """A zip of JSON files written from ``files`` (path -> content), as an export lays them out."""
    path = tmp_path / "written.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, json.dumps(content))
    return path


USERS = [{"id": "U05MAYA01", "team_id": "T05EXPORT", "name": "maya", "profile": {"display_name": "maya"}}]
DAY = [{"type": "message", "user": "U05MAYA01", "text": "Standup moves to 10:00.", "ts": "1772449200.000200"}]


@pytest.mark.parametrize(
    "files",
    [
        {"users.json": USERS, "general/2026-03-02.json": DAY},  # only the channel folders
        {"export/users.json": USERS, "export/groups.json": [], "export/general/2026-03-02.json": DAY},
        {"users.json": USERS},  # nothing listed at all
    ],
)
async def test_an_export_without_channels_json_is_refused_in_one_line_naming_it(
    tmp_path: Path, database_url: str, files: dict[str, object]
) -> None:
    args = argparse.Namespace(format="slack-export", file=export_zip(tmp_path, files), workspace=None)
    with pytest.raises(ValidationError, match="channels.json.* is missing from the export") as refused:
        await import_command.run(args, Settings(database=DatabaseSettings(url=database_url)))
    assert "\n" not in str(refused.value)


def test_an_export_of_private_channels_only_needs_no_channels_json(tmp_path: Path) -> None:
    files = {"users.json": USERS, "groups.json": [{"id": "G05OPS", "name": "ops"}], "ops/2026-03-02.json": DAY}
    files["dms.json"], files["D05DIRECT/2026-03-02.json"] = [{"id": "D05DIRECT", "members": ["U05MAYA01"]}], DAY
    with zipfile.ZipFile(export_zip(tmp_path, files)) as archive:
        [ops] = read_export(archive).channels
    assert ops.conversation == ConversationRef("slack", "T05EXPORT", "G05OPS") and len(ops.messages) == 1


def test_bot_notices_and_legacy_file_shares_are_imported_with_their_text(tmp_path: Path) -> None:
    notice = {
        "type": "message",
        "subtype": "bot_message",
        "bot_id": "B05GITHUB",
        "username": "GitHub",
        "text": "",
        "ts": "1772449300.000300",
        "attachments": [
            {
                "fallback": "[offsite:main] 1 new commit by maya",
                "pretext": "[offsite:main] 1 new commit pushed by <https://github.test/maya|maya>",
                "text": "<https://github.test/c/a1b2c3d|`a1b2c3d`> - Book the Porto river lodge",
                "mrkdwn_in": ["text", "pretext"],
            }
        ],
    }
    legacy = {
        "type": "message",
        "subtype": "file_share",
        "user": "U05MAYA01",
        "text": "<@U05MAYA01> uploaded a file: <https://files.test/F05|Budget 2026>",
        "ts": "1772449400.000400",
        "upload": True,
        "file": {"id": "F05BUDGET", "name": "budget-2026.xlsx", "title": "Budget 2026", "filetype": "xlsx"},
    }
    files = {
        "users.json": USERS,
        "channels.json": [{"id": "C05GENERAL", "name": "general"}],
        "general/2026-03-02.json": [notice, legacy],
    }
    with zipfile.ZipFile(export_zip(tmp_path, files)) as archive:
        [general] = read_export(archive).channels
    bot, shared = general.messages
    assert (bot.author.name, bot.author.role) == ("GitHub", "bot")
    assert bot.text == (
        "[offsite:main] 1 new commit pushed by <https://github.test/maya|maya>\n"
        "<https://github.test/c/a1b2c3d|`a1b2c3d`> - Book the Porto river lodge"
    )
    assert shared.text.endswith("\n[shared files: budget-2026.xlsx]")
