"""Migration 0004 and ``reindex``: message documents lose the speaker's name, old
vectors are marked stale until every message is embedded again (real migrations, real
embedder)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
from sqlalchemy import text

from memory import ConversationRef, Principal, ingest, reindex, validate_message
from memory.core import open_memory
from memory.episodes.reindex import vectors_are_stale
from memory.store.database import downgrade, upgrade

OPERATOR = Principal.operator("test")
T0 = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
DOCUMENT_TEXTS = text("SELECT text FROM search_documents WHERE kind = 'episode' ORDER BY ref_id")
DOCUMENT_LEXEMES = text("SELECT tsv::text FROM search_documents WHERE kind = 'episode' ORDER BY ref_id")
DOCUMENT_VECTORS = text("SELECT embedding::text FROM search_documents WHERE kind = 'episode' ORDER BY ref_id")


async def test_migration_0004_and_reindex(new_database, embedder) -> None:
    memory = await open_memory(new_database(), embedder)
    try:
        ref = ConversationRef("test", "", "reindex")
        said = [("Priya", "Tom moved to Kettleburg last month."), ("Tom", "Yes, I like it there.")]
        messages = [
            validate_message({"id": f"r{i}", "author": who, "text": body, "ts": T0 + timedelta(minutes=i)})
            for i, (who, body) in enumerate(said)
        ]
        await ingest(memory, ref, messages, principal=OPERATOR)
        # The state before 0004: prefixed documents, vectors embedded from them.
        await downgrade(memory._engine, "0009")
        old = (await embedder.embed([f"{who}: {body}" for who, body in said])).vectors
        async with memory._engine.begin() as connection:
            for i, vector in enumerate(old):
                await connection.execute(
                    text("UPDATE episodes SET embedding = CAST(:v AS vector) WHERE platform_message_id = :m"),
                    {"v": str(list(vector)), "m": f"r{i}"},
                )
            texts = (await connection.execute(DOCUMENT_TEXTS)).scalars().all()
        assert texts == ["Priya: Tom moved to Kettleburg last month.", "Tom: Yes, I like it there."]

        await upgrade(memory._engine, embedder.dim)
        async with memory._sessions() as session:
            assert await vectors_are_stale(session)
            texts = (await session.execute(DOCUMENT_TEXTS)).scalars().all()
            lexemes = (await session.execute(DOCUMENT_LEXEMES)).scalars().all()
        assert texts == [body for _, body in said]
        assert "priya" not in lexemes[0] and "tom" in lexemes[0]  # the name said, not the speaker

        assert await reindex(memory, None, principal=OPERATOR) == {str(ref): 2}
        new = (await embedder.embed([body for _, body in said])).vectors
        async with memory._sessions() as session:
            assert not await vectors_are_stale(session)
            own = (await session.execute(text("SELECT embedding::text FROM episodes ORDER BY id"))).scalars().all()
            searched = (await session.execute(DOCUMENT_VECTORS)).scalars().all()
        parse = lambda v: np.asarray(v.strip("[]").split(","), dtype=float)  # noqa: E731
        half = 1e-3  # stored as halfvec (migration 0023): about three significant digits
        assert np.allclose(parse(own[0]), new[0], atol=half) and np.allclose(parse(own[1]), new[1], atol=half)
        assert np.allclose(parse(searched[1]), np.asarray(new[1]) + 0.5 * np.asarray(new[0]), atol=half)
    finally:
        await memory.close()
