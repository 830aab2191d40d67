"""DiscordChatExporter JSON imports: the pure reader over a fixture written in the
exporter's format (tests/data/discord_export.json, our own file modelled field for field
on DiscordChatExporter's JSON writer), then stored into the test database."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.cli import main
from connectors.backfill import store
from connectors.discord.export import read_export
from memory import Memory, Principal, ValidationError, drop_conversation, resolve_conversation
from memory.store.schema import Episode

FIXTURE = Path(__file__).parents[1] / "data" / "discord_export.json"
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


def exported(message_id: str, content: str, author: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A message as DiscordChatExporter's JSON writer puts it (the fields we read and their neighbours)."""
    return {
        "id": message_id,
        "type": "Default",
        "timestamp": "2026-02-02T10:00:00+01:00",
        "timestampEdited": None,
        "callEndedTimestamp": None,
        "isPinned": False,
        "content": content,
        "author": author,
        "attachments": [],
        "embeds": [],
        "stickers": [],
        "reactions": [],
        "mentions": [],
        **extra,
    }


def variations() -> dict[str, Any]:
    """The fixture plus a bot notice in an embed, a person's link preview, a forward (as
    newer versions write it, with ``forwardedMessage``, and as older ones did) and an edit."""
    document = export()
    rosa = copy.deepcopy(document["messages"][1]["author"])
    bot = copy.deepcopy(document["messages"][4]["author"])
    embed = {
        "title": "Frost warning tonight",
        "url": None,
        "timestamp": None,
        "description": "Cover the seedlings before 8 pm.",
        "color": "#3498DB",
        "author": {"name": "Weather Bot", "url": None},
        "images": [],
        "fields": [{"name": "Low", "value": "-3 °C", "isInline": True}],
        "footer": {"text": "Met service"},
    }
    preview = {
        "title": "Best tomato varieties",
        "url": "https://example.org/t",
        "description": "A guide",
        "images": [],
        "fields": [],
    }
    forwarded = {
        "timestamp": "2026-01-30T18:00:00+01:00",
        "timestampEdited": None,
        "content": "The community plot opens on 1 March.",
        "attachments": [
            {"id": "1190000000000000901", "url": "https://cdn.example/plot.png", "fileName": "plot.png", "fileSizeBytes": 2048}
        ],
        "embeds": [],
        "stickers": [],
    }
    reference = {
        "type": "Forward",
        "messageId": "1190000000000000777",
        "channelId": "1190000000000000009",
        "guildId": "1190000000000000001",
    }
    document["messages"] = document["messages"][:6] + [
        exported("1190000000000000111", "", bot, embeds=[embed]),
        exported("1190000000000000112", "look https://example.org/t", rosa, embeds=[preview]),
        exported("1190000000000000113", "", rosa, reference=reference, forwardedMessage=forwarded),
        exported("1190000000000000114", "Plot keys are with Ana.", rosa, reference=reference),  # an older export's forward
        exported("1190000000000000115", "Meeting moved to 11.", rosa, timestampEdited="2026-02-02T10:30:00+01:00"),
    ]
    return document


def test_embeds_forwards_and_edit_times_are_read() -> None:
    by_id = {m.id: m for m in read_export(variations()).messages}
    notice = by_id["1190000000000000111"]
    assert notice.author.role == "bot"
    assert notice.text == "Weather Bot\nFrost warning tonight\nCover the seedlings before 8 pm.\nLow: -3 °C\nMet service"
    assert by_id["1190000000000000112"].text == "look https://example.org/t"  # a link preview is not what Rosa wrote
    forward = by_id["1190000000000000113"]
    assert forward.text == "[forwarded] The community plot opens on 1 March. [attachment: plot.png]"
    assert forward.author.name == "Rosa" and forward.reply_to is None
    assert by_id["1190000000000000114"].text == "[forwarded] Plot keys are with Ana."
    assert by_id["1190000000000000115"].edited_at == datetime(2026, 2, 2, 9, 30, tzinfo=UTC)
    assert by_id["1190000000000000102"].edited_at == datetime(2026, 2, 1, 8, 7, 40, 1000, tzinfo=UTC)


async def test_an_imported_edit_time_is_stored_with_the_message(memory: Memory) -> None:
    contents = read_export(variations())
    await drop_conversation(memory, contents.conversation, principal=IMPORT)
    await store(memory, contents.conversation, contents.messages, IMPORT)
    conversation_id = await resolve_conversation(memory, contents.conversation, principal=IMPORT)
    async with memory._sessions() as session:
        rows = await session.execute(
            select(Episode.platform_message_id, Episode.edited_at).where(Episode.conversation_id == conversation_id)
        )
        edited = {message_id: at for message_id, at in rows if at is not None}
    assert edited == {
        "1190000000000000102": datetime(2026, 2, 1, 8, 7, 40, 1000, tzinfo=UTC),
        "1190000000000000115": datetime(2026, 2, 2, 9, 30, tzinfo=UTC),
    }
