"""Episodes are searched by their exchange vector (own + half the previous message's),
kept right as the chain changes: in-order and out-of-order arrival, deletion, edit;
where more than two people talk, only a thread's reply joins its predecessor; migrations
0002 and 0026 convert a database written before them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select, text

import memory as api
from memory.api import Principal
from memory.core import Memory
from memory.episodes.append import validate_message
from memory.episodes.exchange_vectors import (
    EXCHANGE_SPEAKERS,
    PREVIOUS_SHARE,
    exchange_vector,
    joins_predecessor,
    refresh_exchange_vectors,
)
from memory.forgetting.deletion import delete_episode, edit_episode
from memory.store.conversations import ConversationRef
from memory.store.database import create_engine, downgrade, upgrade
from memory.store.schema import Episode, SearchDocument

OPERATOR = Principal.operator("test")

T0 = datetime(2024, 5, 6, 9, tzinfo=timezone.utc)


def _message(message_id: str, minute: int, body: str, author: str = "ana", thread: str | None = None) -> object:
    fields = {"id": message_id, "author": author, "text": body, "ts": T0 + timedelta(minutes=minute)}
    return validate_message(fields | ({"thread_id": thread} if thread else {}))


async def _vectors(memory: Memory, conversation_id: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Searched and own vector of every episode, by platform message id."""
    async with memory._sessions() as session:
        rows = await session.execute(
            select(Episode.platform_message_id, SearchDocument.embedding, Episode.embedding)
            .join(SearchDocument, (SearchDocument.kind == "episode") & (SearchDocument.ref_id == Episode.id))
            .where(Episode.conversation_id == conversation_id)
        )
        return {m: (np.array(searched), np.array(own)) for m, searched, own in rows}


# Vectors are stored as halfvec (migration 0023): each value to about three significant
# digits, a unit vector's values within 2.5e-4 (the sum's and each term's rounding).
HALF_PRECISION = 1e-3


def _assert_exchange(vectors: dict, message_id: str, previous: str | None) -> None:
    searched, own = vectors[message_id]
    expected = own + PREVIOUS_SHARE * vectors[previous][1] if previous else own
    assert np.allclose(searched, expected, atol=HALF_PRECISION), f"{message_id} is not its own vector + share of {previous}"


def test_exchange_vector_adds_a_share_of_the_previous_one() -> None:
    assert exchange_vector([1.0, 0.0], [0.0, 1.0]) == [1.0, PREVIOUS_SHARE]
    assert exchange_vector([1.0, 0.0], None) == [1.0, 0.0]


ids = st.sampled_from(["m1", "m2", "m3"])


@given(st.integers(0, 6), st.none() | ids, ids, st.none() | ids, ids)
def test_only_a_threads_reply_joins_its_predecessor_where_more_than_two_talk(
    speakers: int, thread: str | None, message: str, previous_thread: str | None, previous: str
) -> None:
    """Pure: where at most two people talk the predecessor always joins; where more, only
    for a reply in a thread (not the thread's first message) after a message of it."""
    joins = joins_predecessor(speakers, thread, message, (previous_thread, previous))
    if speakers <= EXCHANGE_SPEAKERS:
        assert joins
    else:
        assert joins == (thread is not None and thread != message and thread in (previous_thread, previous))


async def test_where_three_talk_a_message_is_searched_by_its_own_vector(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    """Three people in a channel: a message of the channel is searched by its own vector,
    a reply in a thread with its predecessor when that is of the thread; the database's
    recomputation (after a deletion) decides as the ingest did."""
    messages = [
        _message("a", 0, "Anyone up for climbing on Saturday?", "ana"),
        _message("b", 1, "The release is blocked on the migration.", "bo"),
        _message("c", 2, "I can bring the ropes.", "cy"),
        _message("d", 3, "Which gym?", "bo", thread="c"),
        _message("e", 4, "The one by the river.", "cy", thread="c"),
    ]
    await api.ingest(memory, conversation_ref, messages, principal=OPERATOR)
    vectors = await _vectors(memory, conversation_id)
    for message_id in ("a", "b", "c"):
        _assert_exchange(vectors, message_id, None)
    _assert_exchange(vectors, "d", "c")  # a reply after its thread's first message
    _assert_exchange(vectors, "e", "d")
    async with memory._sessions.begin() as session:
        ids = list((await session.execute(select(Episode.id).where(Episode.conversation_id == conversation_id))).scalars())
        await refresh_exchange_vectors(session, conversation_id, ids)
    again = await _vectors(memory, conversation_id)
    assert all(np.allclose(again[m][0], vectors[m][0], atol=HALF_PRECISION) for m in vectors)

    # Deleting d: e follows c, its thread's first message, and joins it.
    await delete_episode(memory, conversation_id, "d", principal="test")
    _assert_exchange(await _vectors(memory, conversation_id), "e", "c")
    # A channel message after the thread keeps its own vector.
    await api.ingest(memory, conversation_ref, [_message("f", 5, "Release is out.", "bo")], principal=OPERATOR)
    _assert_exchange(await _vectors(memory, conversation_id), "f", None)


async def test_exchange_vectors_follow_the_chain(memory: Memory, conversation_ref: ConversationRef, conversation_id: int) -> None:
    await api.ingest(
        memory,
        conversation_ref,
        [_message("a", 0, "How long have you been doing yoga?"), _message("c", 2, "Three years now.")],
        principal=OPERATOR,
    )
    vectors = await _vectors(memory, conversation_id)
    _assert_exchange(vectors, "a", None)
    _assert_exchange(vectors, "c", "a")
    assert not np.allclose(vectors["c"][0], vectors["c"][1])

    # An out-of-order arrival between a and c becomes c's predecessor.
    await api.ingest(memory, conversation_ref, [_message("b", 1, "Do you go to a studio?")], principal=OPERATOR)
    vectors = await _vectors(memory, conversation_id)
    _assert_exchange(vectors, "b", "a")
    _assert_exchange(vectors, "c", "b")

    # Editing b changes its own vector and so c's searched one.
    before = vectors["c"][0]
    await edit_episode(memory, conversation_id, "b", "Do you practise at home?", principal="test")
    vectors = await _vectors(memory, conversation_id)
    _assert_exchange(vectors, "b", "a")
    _assert_exchange(vectors, "c", "b")
    assert not np.allclose(before, vectors["c"][0])

    # Deleting b leaves nothing of it in c's vector.
    await delete_episode(memory, conversation_id, "b", principal="test")
    vectors = await _vectors(memory, conversation_id)
    assert set(vectors) == {"a", "c"}
    _assert_exchange(vectors, "c", "a")

    # Deleting the head leaves c with its own vector only.
    await delete_episode(memory, conversation_id, "a", principal="test")
    _assert_exchange(await _vectors(memory, conversation_id), "c", None)


async def test_migration_0002_converts_existing_episodes(new_database) -> None:
    engine = create_engine(new_database())
    try:
        await upgrade(engine, 2, revision="0001")
        async with engine.begin() as connection:
            run = connection.execute
            conversation = (
                await run(
                    text("INSERT INTO conversations (platform, workspace_id, channel_id) VALUES ('local', '', 'm') RETURNING id")
                )
            ).scalar_one()
            speaker = (
                await run(
                    text(
                        "INSERT INTO speakers (conversation_id, platform_user_id, display_name, role) "
                        "VALUES (:c, 'u', 'U', 'user') RETURNING id"
                    ),
                    {"c": conversation},
                )
            ).scalar_one()
            ids = []
            for n, vector in enumerate(("[1,0]", "[0,1]")):
                episode = (
                    await run(
                        text(
                            "INSERT INTO episodes "
                            "(conversation_id, speaker_id, role, text, message_time, platform_message_id, prev_id) "
                            "VALUES (:c, :s, 'user', 't', now(), :m, :p) RETURNING id"
                        ),
                        {"c": conversation, "s": speaker, "m": f"m{n}", "p": ids[-1] if ids else None},
                    )
                ).scalar_one()
                ids.append(episode)
                await run(
                    text(
                        "INSERT INTO search_documents (conversation_id, kind, ref_id, text, embedding) "
                        "VALUES (:c, 'episode', :e, 't', CAST(:v AS vector))"
                    ),
                    {"c": conversation, "e": episode, "v": vector},
                )
        await upgrade(engine, 2)
        searched = text("SELECT embedding::text FROM search_documents WHERE ref_id = :e")
        own = text("SELECT embedding::text FROM episodes WHERE id = :e")
        async with engine.connect() as connection:
            assert (await connection.execute(searched, {"e": ids[0]})).scalar_one() == "[1,0]"
            assert (await connection.execute(own, {"e": ids[0]})).scalar_one() == "[1,0]"
            assert (await connection.execute(searched, {"e": ids[1]})).scalar_one() == f"[{PREVIOUS_SHARE:g},1]"
            assert (await connection.execute(own, {"e": ids[1]})).scalar_one() == "[0,1]"
        await downgrade(engine, "0001")
        async with engine.connect() as connection:
            rows = await connection.execute(text("SELECT embedding::text FROM search_documents ORDER BY ref_id"))
            assert list(rows.scalars()) == ["[1,0]", "[0,1]"]
    finally:
        await engine.dispose()


async def test_migration_0026_gives_a_group_conversations_messages_their_own_vectors(new_database) -> None:
    """At 0025 every message was searched with its predecessor: 0026 takes the share off
    where three people talk (not in a thread), leaves a two-person conversation as it
    was, and its downgrade puts the share back."""
    engine = create_engine(new_database())
    try:
        await upgrade(engine, 2, revision="0025")
        searched: dict[str, int] = {}
        async with engine.begin() as connection:

            async def insert(into: str, values: dict) -> int:
                return (await connection.execute(text(f"INSERT INTO {into} RETURNING id"), values)).scalar_one()

            for channel, people in (("group", ("u1", "u2", "u3")), ("pair", ("u1", "u2"))):
                conversation = await insert(
                    "conversations (platform, workspace_id, channel_id) VALUES ('local', '', :m)", {"m": channel}
                )
                speakers = [
                    await insert(
                        "speakers (conversation_id, platform_user_id, display_name, role) VALUES (:c, :u, :u, 'user')",
                        {"c": conversation, "u": person},
                    )
                    for person in people
                ]
                previous = None
                for n, (vector, document) in enumerate((("[1,0]", "[1,0]"), ("[0,1]", f"[{PREVIOUS_SHARE:g},1]"))):
                    previous = await insert(
                        "episodes (conversation_id, speaker_id, role, text, message_time, platform_message_id, prev_id, "
                        "embedding) VALUES (:c, :s, 'user', 't', now(), :m, :p, CAST(:v AS halfvec))",
                        {"c": conversation, "s": speakers[n], "m": f"m{n}", "p": previous, "v": vector},
                    )
                    await connection.execute(
                        text(
                            "INSERT INTO search_documents (conversation_id, kind, ref_id, text, embedding) "
                            "VALUES (:c, 'episode', :e, 't', CAST(:v AS halfvec))"
                        ),
                        {"c": conversation, "e": previous, "v": document},
                    )
                searched[channel] = previous

        async def documents() -> dict[str, str]:
            query = text("SELECT embedding::text FROM search_documents WHERE ref_id = :e")
            async with engine.connect() as connection:
                return {channel: (await connection.execute(query, {"e": e})).scalar_one() for channel, e in searched.items()}

        await upgrade(engine, 2)
        assert await documents() == {"group": "[0,1]", "pair": f"[{PREVIOUS_SHARE:g},1]"}
        await downgrade(engine, "0025")
        assert await documents() == {"group": f"[{PREVIOUS_SHARE:g},1]", "pair": f"[{PREVIOUS_SHARE:g},1]"}
    finally:
        await engine.dispose()
