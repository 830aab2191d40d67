"""A large conversation's own vector index (memory.store.vector_indexes): built past
``OWN_INDEX_ROWS`` documents of a kind, by the scheduler after consolidation or by
``memory.index_conversation``; used by the search instead of an exact scan; an invalid
one (a build that failed half-way) is not used and is built again."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text

import memory as api
from jobs import JobSettings, Scheduler
from lab.probes import OWN_INDEX_ROWS, grow_conversations, search_vector, vacuum_analyze
from memory.retrieval.pipeline import service_configs
from memory.retrieval.search import QueryVariant, search
from memory.store.documents import KINDS
from memory.store.vector_indexes import FACT_INDEX_ROWS, TEXT, create_sql, index_name, own_index_rows, wanted
from tests.test_consolidation import messages

JOB = api.Principal.job("test")
OPERATOR = api.Principal.operator("test")


def test_names_and_statements_hold_only_a_number_and_a_fixed_kind() -> None:
    assert len(index_name(2**63 - 1, "community")) <= 63  # Postgres's identifier limit
    with pytest.raises(ValueError, match="not a document kind"):
        index_name(1, "episode'; DROP TABLE episodes; --")
    statement = create_sql(7, "episode")
    assert statement.startswith("CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_search_documents_embedding_c7_episode ")
    assert statement.endswith("WHERE conversation_id = 7 AND kind = 'episode'")
    assert create_sql(7, TEXT).endswith(
        "ix_search_documents_tsv_c7 ON search_documents USING gin (tsv) WHERE conversation_id = 7"
    )


@given(st.dictionaries(st.sampled_from(KINDS), st.integers(0, 3 * OWN_INDEX_ROWS)), st.integers(0, OWN_INDEX_ROWS))
def test_wanted_kinds_are_those_past_the_threshold_and_more_rows_never_want_fewer(counts: dict[str, int], more: int) -> None:
    kinds = wanted(counts)
    by_vector = [k for k in KINDS if counts.get(k, 0) >= own_index_rows(k)]
    assert kinds == by_vector + ([TEXT] if "episode" in by_vector else [])
    # Entities and relations (read by every search, fewer than messages) get theirs sooner.
    assert [own_index_rows(k) for k in KINDS] == [OWN_INDEX_ROWS, FACT_INDEX_ROWS, FACT_INDEX_ROWS, OWN_INDEX_ROWS]
    assert set(kinds) <= set(wanted({k: n + more for k, n in counts.items()}))


async def _invalidate(memory: api.Memory, name: str) -> None:
    """What a concurrent build that failed half-way leaves: the index, marked invalid."""
    async with memory._engine.begin() as connection:
        await connection.execute(
            text("UPDATE pg_index SET indisvalid = false WHERE indexrelid = CAST(:n AS regclass)"), {"n": name}
        )


async def test_a_large_conversation_gets_its_own_index_and_its_search_uses_it(new_database, embedder) -> None:
    memory = await api.open_memory(new_database(), embedder)
    run = uuid.uuid4().hex[:6]
    large, small = api.ConversationRef("index-test", run, "large"), api.ConversationRef("index-test", run, "small")
    try:
        await grow_conversations(memory, [(large, 0, OWN_INDEX_ROWS), (small, 0, 50)], ("ka", "lo", "mi", "ru"))
        await vacuum_analyze(memory)
        conversation_id = await api.resolve_conversation(memory, large, principal=OPERATOR)
        async with memory._engine.connect() as connection:
            stored = text(
                "SELECT ref_id, CAST(embedding AS text) FROM search_documents "
                "WHERE conversation_id = :c AND kind = 'episode' ORDER BY ref_id OFFSET 700 LIMIT 1"
            )
            target, vector = (await connection.execute(stored, {"c": conversation_id})).one()
        query = json.loads(vector)  # a stored message's own vector: the nearest is that message
        before = await search_vector(memory, large, "what about kalo?", query)
        assert "episode" in before.plan.exact  # no own index yet: scanned exactly
        assert ("episode", target) in [(c.kind, c.ref_id) for c in before.candidates[:3]]

        built = await api.index_conversation(memory, large, principal=JOB)
        # 2,000 messages (topics and relations fewer): their vectors and full text.
        assert built.built == ["episode", "text"] and built.present == []
        assert (await api.index_conversation(memory, large, principal=JOB)).as_dict()["built"] == []
        assert (await api.index_conversation(memory, small, principal=JOB)).built == []

        after = await search_vector(memory, large, "what about kalo?", query)
        assert after.plan.hnsw == ("episode",) and after.plan.ef_search == 120
        assert ("episode", target) in [(c.kind, c.ref_id) for c in after.candidates[:3]]  # found through the index
        # A balanced plan (HNSW kinds and exact ones) scans the exact kinds on the second
        # connection, after the full text: what one connection finds, in the same order.
        assert after.plan.exact
        async with memory._sessions.begin() as session:
            variant = QueryVariant("what about kalo?", query)
            alone = await search(session, conversation_id, [variant], service_configs(memory.params)[0])
        assert alone.plan == after.plan
        assert [c.key for c in after.candidates] == [c.key for c in alone.candidates]
        name = index_name(conversation_id, "episode")
        await _invalidate(memory, name)
        assert "episode" in (await search_vector(memory, large, "what about kalo?", query)).plan.exact
        assert (await api.index_conversation(memory, large, principal=JOB)).built == ["episode"]
        assert (await search_vector(memory, large, "what about kalo?", query)).plan.hnsw == ("episode",)

        # The scheduler builds it after a consolidation run: here the small conversation,
        # grown past the threshold with one message waiting.
        await grow_conversations(memory, [(small, 50, OWN_INDEX_ROWS)], ("ka", "lo", "mi", "ru"))
        await api.ingest(memory, small, messages([("w1", "Ann", "I adopted Rex.")]), principal=OPERATOR)
        small_id = await api.resolve_conversation(memory, small, principal=OPERATOR)
        jobs = Scheduler(memory, JobSettings(consolidate_tokens=0, interval_seconds=3600), only=frozenset({small_id}))
        (run_result,) = await jobs.run_job("consolidation")
        assert run_result.result["indexes_built"] == ["episode", "text"]
        assert await jobs.run_job("consolidation") == []  # nothing waits: no run, no second build

        # A dropped conversation's indexes go with it.
        assert await api.drop_conversation(memory, large, principal=OPERATOR)
        async with memory._engine.connect() as connection:
            assert await connection.scalar(text("SELECT to_regclass(:n)"), {"n": name}) is None
            assert await connection.scalar(text("SELECT to_regclass(:n)"), {"n": index_name(conversation_id, TEXT)}) is None
    finally:
        await memory.close()
