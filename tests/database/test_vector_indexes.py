"""A large conversation's own vector index (memory.store.vector_indexes): built past
``OWN_INDEX_ROWS`` documents of a kind, by the scheduler after consolidation or by
``memory.index_conversation``; used by the search instead of an exact scan; an invalid
one (a build that failed half-way) is not used and is built again, and so is one built
with other settings than today's."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text

import memory as api
from jobs import JobSettings, Scheduler
from lab.probes import (
    OWN_INDEX_ROWS,
    grow_conversations,
    halfvec_recall,
    kept_share,
    plan_check,
    search_vector,
    vacuum_analyze,
)
from memory.retrieval.pipeline import service_configs, speaker_names
from memory.retrieval.search import QueryVariant, SearchResult, search
from memory.store.database import create_engine, upgrade
from memory.store.documents import KINDS
from memory.store.vector_indexes import (
    FACT_EF_CONSTRUCTION,
    FACT_INDEX_ROWS,
    TEXT,
    build,
    create_sql,
    index_name,
    outdated,
    own_index_rows,
    wanted,
)
from tests.database.test_consolidation import messages

JOB = api.Principal.job("test")
OPERATOR = api.Principal.operator("test")


def test_a_name_holds_only_a_number_and_a_fixed_kind() -> None:
    with pytest.raises(ValueError, match="not a document kind"):
        index_name(1, "episode'; DROP TABLE episodes; --")
    assert create_sql(7, TEXT, "search_documents_p5").endswith(
        "ix_search_documents_tsv_c7 ON search_documents_p5 USING gin (tsv) WHERE conversation_id = 7"
    )


LARGEST = 2**63 - 1  # the largest conversation id: the longest names
PLAN = "EXPLAIN (FORMAT JSON) SELECT id FROM search_documents WHERE conversation_id = :c AND {where} LIMIT 5"
BY_VECTOR = "kind = :kind ORDER BY embedding <=> CAST('[1,0,0]' AS halfvec)"
BY_TEXT = "tsv @@ plainto_tsquery('english', 'kalo')"
# Two conversations with 500 documents of each kind, none of them about "kalo".
CONVERSATIONS = "INSERT INTO conversations (id, platform, channel_id) VALUES (:c, 'test', 'own'), (:c - 1, 'test', 'other')"
DOCUMENTS = """
INSERT INTO search_documents (conversation_id, kind, ref_id, text, embedding)
SELECT c, kind, n, 'filler ' || n, CAST('[1,' || n || ',0]' AS halfvec)
FROM unnest(ARRAY[CAST(:c AS bigint), :c - 1]) c, unnest(ARRAY['episode', 'entity', 'relation', 'community']) kind,
     generate_series(1, 500) n
"""
HOLDER = "SELECT CAST(tableoid AS regclass)::text FROM search_documents WHERE conversation_id = :c LIMIT 1"
VALID = text(
    "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = ANY(:names)"
)


FACTS = """
INSERT INTO search_documents (conversation_id, kind, ref_id, text, embedding)
SELECT :c, 'entity', n, 'entity ' || n, CAST('[1,' || n || ',0]' AS halfvec) FROM generate_series(1, :n) n
"""


def test_only_a_fact_index_without_the_wider_graph_is_outdated() -> None:
    wider = [f"ef_construction={FACT_EF_CONSTRUCTION}"]
    for kind in ("entity", "relation"):
        assert outdated(kind, []) and outdated(kind, ["ef_construction=64"]) and not outdated(kind, wider)
        assert f"WITH (ef_construction={FACT_EF_CONSTRUCTION}) WHERE" in create_sql(7, kind, "search_documents_p5")
    for kind in ("episode", "community", TEXT):
        assert not outdated(kind, []) and " WITH " not in create_sql(7, kind, "search_documents_p5")


async def test_an_entity_index_of_the_default_graph_is_built_again_once(new_database) -> None:
    """An own entity index built before ``FACT_EF_CONSTRUCTION`` (pgvector's default graph)
    is outdated: the next build drops it and makes it as ``create_sql`` does, the one
    after leaves it."""
    engine = create_engine(new_database())
    try:
        await upgrade(engine, 3)
        async with engine.begin() as connection:
            await connection.execute(text(CONVERSATIONS), {"c": 7})
            await connection.execute(text(FACTS), {"c": 7, "n": FACT_INDEX_ROWS})
            partition = await connection.scalar(text(HOLDER), {"c": 7})
        default = create_sql(7, "entity", partition).replace(f" WITH (ef_construction={FACT_EF_CONSTRUCTION})", "")
        async with engine.connect() as connection:
            autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
            await autocommit.execute(text(default))
        first = await build(engine, 7)
        assert first.built == ["entity"] and first.present == []
        async with engine.connect() as connection:
            options = text("SELECT reloptions FROM pg_class WHERE relname = :n")
            assert await connection.scalar(options, {"n": index_name(7, "entity")}) == [f"ef_construction={FACT_EF_CONSTRUCTION}"]
        second = await build(engine, 7)
        assert second.built == [] and second.present == ["entity"]
    finally:
        await engine.dispose()


def _indexes_in(plan: object) -> set[str]:
    """The indexes a JSON plan scans."""
    if isinstance(plan, list):
        return set().union(*map(_indexes_in, plan))
    if not isinstance(plan, dict):
        return set()
    found = {plan["Index Name"]} if "Index Name" in plan else set()
    return found.union(*map(_indexes_in, plan.values()))


async def test_each_own_index_is_valid_and_serves_its_conversation_and_kind_alone(new_database) -> None:
    """Each statement ``create_sql`` makes, run on a real database: Postgres keeps the
    name whole (under its 63-character limit even for the largest id) and the index
    valid, and the planner uses it for that conversation's statements of its kind, never
    for another conversation's or kind's."""
    engine = create_engine(new_database())
    try:
        await upgrade(engine, 3)
        async with engine.begin() as connection:
            for statement in (CONVERSATIONS, DOCUMENTS):
                await connection.execute(text(statement), {"c": LARGEST})
            await connection.execute(text("ANALYZE search_documents"))
            partition = await connection.scalar(text(HOLDER), {"c": LARGEST})  # migration 0024
        async with engine.connect() as connection:
            autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
            for kind in (*KINDS, TEXT):
                await autocommit.execute(text(create_sql(LARGEST, kind, partition)))
        mine = {kind: index_name(LARGEST, kind) for kind in (*KINDS, TEXT)}
        async with engine.connect() as connection:
            valid = dict((await connection.execute(VALID, {"names": list(mine.values())})).all())
            assert valid == dict.fromkeys(mine.values(), True)
            await connection.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))  # as the search plans

            async def used(conversation_id: int, where: str, kind: str = "") -> set[str]:
                plan = await connection.scalar(text(PLAN.format(where=where)), {"c": conversation_id, "kind": kind})
                return _indexes_in(json.loads(plan) if isinstance(plan, str) else plan)

            for position, kind in enumerate(KINDS):
                assert mine[kind] in await used(LARGEST, BY_VECTOR, kind)
                assert mine[kind] not in await used(LARGEST, BY_VECTOR, KINDS[(position + 1) % len(KINDS)])
                assert not set(mine.values()) & await used(LARGEST - 1, BY_VECTOR, kind)
            assert mine[TEXT] in await used(LARGEST, BY_TEXT)
            assert mine[TEXT] not in await used(LARGEST - 1, BY_TEXT)
    finally:
        await engine.dispose()


@given(st.dictionaries(st.sampled_from(KINDS), st.integers(0, 3 * OWN_INDEX_ROWS)), st.integers(0, OWN_INDEX_ROWS))
def test_more_rows_never_want_fewer_indexes_and_a_kind_counts_alone(counts: dict[str, int], more: int) -> None:
    kinds = wanted(counts)
    assert len(kinds) == len(set(kinds)) and (TEXT in kinds) == ("episode" in kinds)
    assert set(kinds) <= set(wanted({k: n + more for k, n in counts.items()}))
    # whether a kind gets its own index depends on its own count only
    assert all((kind in kinds) == (kind in wanted({kind: counts.get(kind, 0)})) for kind in KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_a_kind_wants_its_index_from_its_threshold_on(kind: str) -> None:
    assert kind not in wanted({kind: own_index_rows(kind) - 1})
    assert kind in wanted({kind: own_index_rows(kind)})


def test_entities_and_relations_get_theirs_sooner_and_every_kind_at_the_message_threshold() -> None:
    """Entities and relations are read by every search and are fewer than messages."""
    assert wanted({kind: FACT_INDEX_ROWS - 1 for kind in KINDS}) == []
    assert sorted(wanted({kind: FACT_INDEX_ROWS for kind in KINDS})) == ["entity", "relation"]
    assert set(wanted({kind: OWN_INDEX_ROWS for kind in KINDS})) == {*KINDS, TEXT}


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

        def nearest(found: SearchResult) -> tuple[str, int]:
            """The candidate most similar to the query (the fused order also weighs the
            full text and the anchored list, which may put others first)."""
            return max(found.candidates, key=lambda c: c.similarity).key

        before = await search_vector(memory, large, "what about kalo?", query)
        assert "episode" in before.plan.exact  # no own index yet: scanned exactly
        assert nearest(before) == ("episode", target)

        built = await api.index_conversation(memory, large, principal=JOB)
        # 2,000 messages (topics and relations fewer): their vectors and full text.
        assert built.built == ["episode", "text"] and built.present == []
        assert (await api.index_conversation(memory, large, principal=JOB)).as_dict()["built"] == []
        assert (await api.index_conversation(memory, small, principal=JOB)).built == []
        # On the conversation's partition (migration 0024), not on the table: the
        # planner reads them only for statements of the conversations that partition holds.
        async with memory._engine.connect() as connection:
            on = text("SELECT CAST(indrelid AS regclass)::text FROM pg_index WHERE indexrelid = CAST(:n AS regclass)")
            holder = text("SELECT DISTINCT CAST(tableoid AS regclass)::text FROM search_documents WHERE conversation_id = :c")
            partition = (await connection.execute(holder, {"c": conversation_id})).scalar_one()
            assert partition.startswith("search_documents_p")
            for kind in ("episode", TEXT):
                assert await connection.scalar(on, {"n": index_name(conversation_id, kind)}) == partition

        after = await search_vector(memory, large, "what about kalo?", query)
        assert after.plan.hnsw == ("episode",) and after.plan.ef_search == 120
        # Its size is the rows the catalogue says its own index holds (counted at the
        # build), not an estimate: no EXPLAIN before the vector lists.
        assert after.plan.episode_rows == OWN_INDEX_ROWS
        assert nearest(after) == ("episode", target)  # found through the index
        # bench scale's check of an approximate plan: its recall against exact, and planning.
        kept, planning_ms = await plan_check(memory, large, query, after.plan)
        assert set(kept) == {"episode"} and 0.9 <= kept["episode"] <= 1 and planning_ms > 0
        assert (await plan_check(memory, large, query, before.plan))[0] == {}  # exact: nothing to compare
        # A balanced plan (HNSW kinds and exact ones) scans the exact kinds on the second
        # connection, after the full text: what one connection finds, in the same order.
        assert after.plan.exact
        async with memory._sessions.begin() as session:
            variant = QueryVariant("what about kalo?", query)
            speakers = len(await speaker_names(session, conversation_id))
            alone = await search(session, conversation_id, [variant], service_configs(memory.params, speakers)[0])
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


def test_the_kept_share_counts_the_first_k_of_each_order() -> None:
    assert kept_share([1, 2, 3], [3, 2, 1], 3) == 1.0
    assert kept_share([1, 2, 3], [1, 3, 2], 2) == 0.5
    assert kept_share([], [], 30) == 1.0


async def test_the_halfvec_probe_sees_two_vectors_that_half_precision_cannot_tell_apart(memory) -> None:
    """``lab.probes.halfvec_recall`` on the server: 0.3 and 0.3001 round to the same
    half-precision value, so the halfvec order falls back to the ids and puts the farther
    one first; vectors that half precision holds exactly keep their order."""
    query = [[1.0, 0.0]]
    assert await halfvec_recall(memory, [[1.0, 0.3001], [1.0, 0.3], [0.0, 1.0]], query, (1, 2)) == {1: [0.0], 2: [1.0]}
    assert await halfvec_recall(memory, [[0.5, 0.5], [1.0, 0.25], [0.0, 1.0]], query, (1, 2)) == {1: [1.0], 2: [1.0]}
