"""DiscordChatExporter JSON imports: the pure reader over a fixture written in the
exporter's format (tests/data/discord_export.json, our own file modelled field for field
on DiscordChatExporter's JSON writer), then stored into the test database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from connectors.backfill import store
from connectors.discord.export import read_export
from memory import Memory, Principal, ValidationError, drop_conversation

FIXTURE = Path(__file__).parent / "data" / "discord_export.json"
IMPORT = Principal.job("test-import")


def export() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_an_export_reads_as_the_live_stream_would_store_it() -> None:
    contents = read_export(export())
    assert str(contents.conversation) == "discord:1190000000000000001:1190000000000000002"
    assert [m.id for m in contents.messages] == [f"119000000000000010{i}" for i in (2, 3, 4, 5)]
    seed, reply, attachment, bot = contents.messages
    assert seed.author.name == "Rosa" and seed.text.startswith("The seed swap is on Saturday")  # the edited text
    assert reply.reply_to == seed.id and attachment.text == "[attachment: garden-plan.pdf]"
    assert bot.author.role == "bot" and seed.author.role == "user"
    assert contents.skipped == 2  # a member joined, a thread created
    assert contents.rejected == [(6, "timestamp: must be an ISO 8601 time, got 'yesterday-ish'")]
    assert [m.id for m in read_export(export(), bot_id="1190000000000000204").messages][-1] == "1190000000000000104"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda doc: doc.pop("guild"), "guild"),
        (lambda doc: doc["channel"].update(id="general"), "channel.id"),
        (lambda doc: doc["channel"].update(type="DirectTextChat"), "channel.type"),
        (lambda doc: doc.update(messages={"id": 1}), "messages"),
    ],
)
def test_a_file_that_is_not_a_server_channel_export_is_refused_whole(change: Any, field: str) -> None:
    document = export()
    change(document)
    with pytest.raises(ValidationError) as refused:
        read_export(document)
    assert refused.value.field == field


def test_the_command_refuses_a_file_that_is_not_json_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "export.json"
    broken.write_text('{"guild": ', encoding="utf-8")
    assert main(["import", "discord-export", str(broken)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("stashbird import: ") and "is not a JSON export" in error and "\n" not in error


async def test_importing_twice_stores_each_message_once(memory: Memory) -> None:
    contents = read_export(export())
    await drop_conversation(memory, contents.conversation, principal=IMPORT)
    first = await store(memory, contents.conversation, contents.messages, IMPORT)
    again = await store(memory, contents.conversation, contents.messages, IMPORT)
    assert (first.stored, first.duplicate) == (4, 0) and (again.stored, again.duplicate) == (0, 4)
