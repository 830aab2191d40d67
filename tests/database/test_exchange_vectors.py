"""Episodes are searched by their exchange vector (own + half the previous message's),
kept right as the chain changes: in-order and out-of-order arrival, deletion, edit;
and migration 0002 converts a database written before it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
from sqlalchemy import select, text

import memory as api
from memory.api import Principal
from memory.core import Memory
from memory.episodes.append import validate_message
from memory.episodes.exchange_vectors import PREVIOUS_SHARE, exchange_vector
from memory.forgetting.deletion import delete_episode, edit_episode
from memory.store.conversations import ConversationRef
from memory.store.database import create_engine, downgrade, upgrade
from memory.store.schema import Episode, SearchDocument

OPERATOR = Principal.operator("test")

T0 = datetime(2024, 5, 6, 9, tzinfo=timezone.utc)


def _message(message_id: str, minute: int, body: str) -> object:
    return validate_message({"id": message_id, "author": "ana", "text": body, "ts": T0 + timedelta(minutes=minute)})


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
