"""Integration: bad input never loses good data. ``stashbird ingest`` run in-process
(``bot.cli.main``) on the test database, and the core's ingest when the database itself
refuses a message."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from clirun import stashbird
from hostile import HOSTILE, mixed_file
from sqlalchemy import text

from memory import ConversationRef, Memory, Principal, UnknownConversation, edit, forget, ingest, messages, validate_message

OPERATOR = Principal.operator("test")


async def test_a_thousand_good_lines_among_a_hundred_hostile_ones(memory: Memory, cli_env: None, tmp_path: Path) -> None:
    """The issue's done-when check: every kind of hostile line, none stops the others."""
    data, numbers, kinds = mixed_file(1000, 100)
    assert set(kinds) == {kind for kind, _ in HOSTILE}
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(data)
    name = f"hostile-{uuid.uuid4().hex[:8]}"

    code, out, err = stashbird(None, "ingest", str(path), "--conversation", name, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert (report["ingested"], report["duplicates"]) == (1000, 0)
    assert [r["line"] for r in report["rejected"]] == numbers
    assert all(r["reason"] and r["field"] for r in report["rejected"])
    stored = await messages(memory, ConversationRef.parse(name), principal=OPERATOR)
    assert sorted(m["message_id"] for m in stored) == sorted(f"g{i}" for i in range(1000))

    code, out, _ = stashbird(None, "forget", "--conversation", name, "--message", "g3")  # stored from "  g3\t"
    assert code == 0 and "deleted" in out


async def test_a_message_the_database_refuses_costs_the_others_nothing(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    """Issue case 1: a line that passes validation and fails in the database rejects that
    line only. The refusal is a real constraint, added for this conversation alone."""
    lines = [
        validate_message({"id": f"m{i}", "author": "ann", "text": "poison" if i in (99, 150) else f"note {i}", "ts": i})
        for i in range(200)
    ]
    constraint = f"test_poison_{conversation_id}"
    async with memory._engine.begin() as connection:
        await connection.execute(
            text(
                f"ALTER TABLE episodes ADD CONSTRAINT {constraint} "
                f"CHECK (conversation_id <> {int(conversation_id)} OR text <> 'poison') NOT VALID"
            )
        )
    try:
        report = await ingest(memory, conversation_ref, lines, principal=OPERATOR)
    finally:
        async with memory._engine.begin() as connection:
            await connection.execute(text(f"ALTER TABLE episodes DROP CONSTRAINT {constraint}"))
    assert (report.stored, report.duplicate) == (198, 0)
    assert [(r.index, r.platform_message_id) for r in report.rejected] == [(99, "m99"), (150, "m150")]
    assert constraint in report.rejected[0].reason
    stored = await messages(memory, conversation_ref, principal=OPERATOR)
    assert [m["message_id"] for m in stored] == [f"m{i}" for i in range(200) if i not in (99, 150)]


async def test_an_id_with_surrounding_spaces_is_deleted_and_edited_by_its_stripped_id(
    memory: Memory, conversation_ref: ConversationRef
) -> None:
    """Issue case 4: ingest, forget and edit normalise the id the same way."""
    lines = [validate_message({"id": f" {mid} ", "author": "ann", "text": f"text {mid}", "ts": 0}) for mid in ("spaced", "e1")]
    await ingest(memory, conversation_ref, lines, principal=OPERATOR)
    assert (await forget(memory, conversation_ref, "spaced", principal=OPERATOR)).status == "deleted"
    assert (await edit(memory, conversation_ref, "\te1 ", "new text", principal=OPERATOR)).status == "edited"
    stored = await messages(memory, conversation_ref, principal=OPERATOR)
    assert [(m["message_id"], m["text"]) for m in stored] == [("e1", "new text")]


async def test_forget_on_an_unknown_conversation_is_an_error_and_creates_nothing(memory: Memory, cli_env: None) -> None:
    name = f"typo-{uuid.uuid4().hex[:8]}"
    code, _, err = stashbird(None, "forget", "--conversation", name, "--message", "m1")
    assert code == 2 and f"no conversation '{name}'" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(UnknownConversation):
        await messages(memory, ConversationRef.parse(name), principal=OPERATOR)


async def test_chat_events_use_the_same_ids_and_refuse_what_the_inbox_cannot_hold(memory: Memory) -> None:
    """A platform id with surrounding blanks is the stripped id everywhere: the delete of
    "q1" erases the text an undelivered mention " q1 " left in the inbox; a payload with
    a NUL is refused before it is acknowledged."""
    from connectors.events import MessageDeleted
    from connectors.service import ChatService, ServiceConfig
    from memory import ValidationError
    from memory.store.residue import find_tokens
    from tests.service.test_connector_service import RecordingPlatform, mention, posted

    ref = ConversationRef("test", "W1", f"C{uuid.uuid4().hex[:10]}")
    config = ServiceConfig(retry_seconds=0, max_attempts=2, reply_give_up_seconds=0.001)
    service = ChatService(memory, [RecordingPlatform(failures=9)], config)
    marker = f"zq{uuid.uuid4().hex[:8]}8"
    await service.accept(posted(ref, " m1 ", "The offsite is in Lisbon."))
    await service.accept(mention(ref, " q1 ", f"Where is the offsite {marker}?"))
    await service.drain()  # the answer cannot be delivered: kept, failed; the question is stored
    assert [m["message_id"] for m in await messages(memory, ref, principal=OPERATOR)] == ["m1", "q1"]
    await service.accept(MessageDeleted(ref, "ev-del", "q1"))
    await service.drain()
    async with memory._sessions() as session:
        places = (await find_tokens(session, "zq[0-9a-f]{8}8")).get(marker, set())
    assert not {place for place in places if place.startswith("inbox_events.")}, places
    with pytest.raises(ValidationError, match="NUL"):
        await service.accept(posted(ref, "m2", "a\x00b"))
