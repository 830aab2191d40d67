"""The fast path against the real database: validation, idempotency, chain order,
search documents, tombstones."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select, text

import memory as api
from memory.api import Principal
from memory.core import Memory
from memory.episodes.append import append_messages, parse_time, validate_message
from memory.errors import ValidationError
from memory.store.conversations import ConversationRef
from memory.store.schema import Episode, SearchDocument, Tombstone, UsageEntry

OPERATOR = Principal.operator("test")

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def msg(mid: str, minutes: int, author: str = "ann", text: str | None = None, role: str = "user"):
    return validate_message(
        {
            "id": mid,
            "author": author,
            "text": text or f"message {mid}",
            "ts": (T0 + timedelta(minutes=minutes)).isoformat(),
            "role": role,
        }
    )


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"author": "a", "text": "x", "ts": "2026-01-01"}, "id"),
        ({"id": "1", "text": "x", "ts": "2026-01-01"}, "author"),
        ({"id": "1", "author": "  ", "text": "x", "ts": "2026-01-01"}, "author"),
        ({"id": "1", "author": "a", "text": "", "ts": "2026-01-01"}, "text"),
        ({"id": "1", "author": "a", "text": "x", "ts": "yesterday-ish"}, "ts"),
        ({"id": "1", "author": "a", "text": "x"}, "ts"),
        ({"id": "1", "author": "a", "text": "x", "ts": "2026-01-01", "role": "robot"}, "role"),
    ],
)
def test_validation_names_the_field(fields: dict, field: str) -> None:
    with pytest.raises(ValidationError) as error:
        validate_message(fields)
    assert error.value.field == field
    assert field in str(error.value)


def test_parse_time_accepts_slack_ts_iso_and_naive() -> None:
    assert parse_time("1712345678.000100") == datetime.fromtimestamp(1712345678.0001, tz=timezone.utc)
    assert parse_time("2026-03-01T12:00:00Z") == T0
    assert parse_time("2026-03-01T12:00:00") == T0


async def test_append_is_idempotent_on_platform_id(memory: Memory, conversation_id: int) -> None:
    for _ in range(2):
        async with memory._sessions.begin() as session:
            results = await append_messages(session, memory.embedder, conversation_id, [msg("a", 0)])
    assert [r.status for r in results] == ["duplicate"]
    async with memory._sessions() as session:
        count = await session.scalar(select(func.count()).where(Episode.conversation_id == conversation_id))
    assert count == 1


async def test_out_of_order_arrival_keeps_time_order(memory: Memory, conversation_ref: ConversationRef) -> None:
    arrivals = [msg("m3", 3), msg("m1", 1), msg("m5", 5), msg("m2", 2), msg("m4", 4), msg("m0", 0)]
    for message in arrivals:  # one at a time, as a platform would deliver them
        await api.ingest(memory, conversation_ref, [message], principal=OPERATOR)
    async with memory._sessions() as session:
        ordered = await api.messages(memory, conversation_ref, principal=OPERATOR)
        ids = [e["id"] for e in ordered]
        rows = (await session.execute(select(Episode).where(Episode.id.in_(ids)))).scalars().all()
    assert [e["message_id"] for e in ordered] == [f"m{i}" for i in range(6)]
    links = {e.id: (e.prev_id, e.next_id) for e in rows}
    assert [links[i] for i in ids] == list(zip([None, *ids[:-1]], [*ids[1:], None], strict=True))


async def test_batches_in_any_order_and_repeated_ids(memory: Memory, conversation_ref: ConversationRef) -> None:
    counts = await api.ingest(
        memory, conversation_ref, [msg("b", 20), msg("a", 10), msg("b", 20), msg("d", 40)], principal=OPERATOR
    )
    assert (counts.stored, counts.duplicate) == (3, 1)
    await api.ingest(memory, conversation_ref, [msg("e", 50), msg("c", 30), msg("0", 0)], principal=OPERATOR)
    assert [e["message_id"] for e in await api.messages(memory, conversation_ref, principal=OPERATOR)] == [
        "0",
        "a",
        "b",
        "c",
        "d",
        "e",
    ]


async def test_same_time_messages_keep_arrival_order(memory: Memory, conversation_ref: ConversationRef) -> None:
    await api.ingest(memory, conversation_ref, [msg("x", 0), msg("y", 0), msg("z", 0)], principal=OPERATOR)
    assert [e["message_id"] for e in await api.messages(memory, conversation_ref, principal=OPERATOR)] == ["x", "y", "z"]


async def test_each_episode_has_a_search_document_and_usage(memory: Memory, conversation_ref: ConversationRef) -> None:
    await api.ingest(memory, conversation_ref, [msg("a", 0, text="The zebra migration starts in May")], principal=OPERATOR)
    async with memory._sessions() as session:
        ordered = await api.messages(memory, conversation_ref, principal=OPERATOR)
        episode_id = ordered[0]["id"]
        document = (
            await session.execute(
                select(SearchDocument).where(SearchDocument.kind == "episode", SearchDocument.ref_id == episode_id)
            )
        ).scalar_one()
        hit = await session.scalar(
            select(func.count()).where(
                SearchDocument.id == document.id,
                SearchDocument.tsv.op("@@")(func.websearch_to_tsquery("english", "zebra migrations")),
            )
        )
        used = await session.scalar(
            select(func.sum(UsageEntry.calls)).where(
                UsageEntry.conversation_id == document.conversation_id, UsageEntry.operation == "embed_episode"
            )
        )
    assert document.text == "The zebra migration starts in May"  # who said it is not indexed as text
    assert len(document.embedding) == 384
    assert hit == 1
    assert used == 1


async def test_bot_messages_are_stored_with_their_role(memory: Memory, conversation_ref: ConversationRef) -> None:
    await api.ingest(memory, conversation_ref, [msg("b", 0, author="stashbird", role="bot")], principal=OPERATOR)
    (episode,) = await api.messages(memory, conversation_ref, principal=OPERATOR)
    assert episode["role"] == "bot"


async def test_tombstoned_message_is_refused(memory: Memory, conversation_id: int) -> None:
    async with memory._sessions.begin() as session:
        session.add(Tombstone(conversation_id=conversation_id, platform_message_id="gone"))
    async with memory._sessions.begin() as session:
        results = await append_messages(session, memory.embedder, conversation_id, [msg("gone", 0), msg("kept", 1)])
    assert [r.status for r in results] == ["tombstoned", "stored"]


async def test_database_refuses_empty_text(memory: Memory, conversation_id: int) -> None:
    """The schema backs the validation: even a raw insert of empty text fails."""
    async with memory._sessions() as session:
        with pytest.raises(Exception, match="ck_episode_text"):
            await session.execute(
                text(
                    "INSERT INTO episodes (conversation_id, speaker_id, role, text, message_time, platform_message_id) "
                    "VALUES (:c, 0, 'user', '', now(), 'e')"
                ),
                {"c": conversation_id},
            )
