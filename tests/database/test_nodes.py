"""What must hold whichever node of a Citus cluster a statement goes through (this module
is in the cluster suite too, conftest.CLUSTER_MODULES): ids in write order within a
conversation (memory.store.ids), and the rows the conversation's vector index holds,
read from its own shard (memory.retrieval.search_sql.planned_sizes).

On the embedded server another node's sequence is played by setting the sequences back
below the conversation's ids, in a database of its own."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text

from memory import ConversationRef, OfflineExtractor, Principal, consolidate, ingest, validate_message
from memory.core import Memory, open_memory
from memory.retrieval.search_sql import planned_sizes
from memory.store.conversations import ensure_conversation
from memory.store.ids import in_write_order, next_ids
from tests.conftest import TEST_DATABASE_URL
from tests.servers import worker_url

OPERATOR = Principal.operator("test")
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


@given(st.lists(st.integers(1, 2**50), min_size=0, max_size=20, unique=True), st.integers(0, 2**50))
def test_ids_in_write_order_rise_above_the_conversation_and_stay_unique(fresh: list[int], top: int) -> None:
    ids = in_write_order(fresh, top)
    assert len(ids) == len(fresh) and len(set(ids)) == len(ids)
    assert ids == sorted(ids) and all(i > top for i in ids)
    assert all(i >= v for i, v in zip(ids, sorted(fresh), strict=True))  # a fresh value above is kept as it is
    assert in_write_order(fresh, 0) == sorted(fresh)  # one node, one sequence: never raised


async def test_only_the_ordered_tables_take_ids_in_write_order(memory: Memory, conversation_id: int) -> None:
    async with memory._sessions() as session:
        with pytest.raises(ValueError, match="speakers"):
            await next_ids(session, "speakers", conversation_id, 1)
        assert await next_ids(session, "episodes", conversation_id, 0) == []


def _messages(prefix: str, start: int, texts: list[str]) -> list:
    return [
        validate_message(
            {"id": f"{prefix}{i}", "author": "Ann" if i % 2 else "Bo", "text": t, "ts": T0 + timedelta(minutes=start + i)}
        )
        for i, t in enumerate(texts)
    ]


@pytest.fixture
async def other_node(memory: Memory, database_url: str, new_database, embedder) -> AsyncIterator[tuple[Memory, Memory]]:
    """(first writer, second writer) whose sequences disagree as two nodes' do: on the
    cluster a worker then the coordinator (the coordinator's range is below every
    worker's); on the embedded server one fresh database, its sequences set back in
    between by the test (``behind``)."""
    if TEST_DATABASE_URL is not None:
        worker = await open_memory(worker_url(database_url, 0), embedder, migrate=False)
        try:
            yield worker, memory
        finally:
            await worker.close()
        return
    alone = await open_memory(new_database(), embedder)
    try:
        yield alone, alone
    finally:
        await alone.close()


async def _behind(memory: Memory) -> None:
    """Set every ordered table's sequence back to 1, as another node's range would be
    below this one's (on the cluster the second writer's range already is)."""
    if TEST_DATABASE_URL is not None:
        return
    async with memory._engine.begin() as connection:
        for table in ("episodes", "entities", "relations"):
            await connection.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), 1)"))


_IDS = "SELECT {column} FROM {table} WHERE conversation_id = :c ORDER BY {column}"


async def _ids(memory: Memory, table: str, conversation_id: int) -> list[int]:
    async with memory._engine.connect() as connection:
        return list((await connection.execute(text(_IDS.format(column="id", table=table)), {"c": conversation_id})).scalars())


async def test_messages_written_through_another_node_are_consolidated(other_node: tuple[Memory, Memory]) -> None:
    """Written first through one node and then through one whose sequence is behind, the
    later messages, entities and relations still get larger ids: consolidation's
    watermark covers them all and nothing waits."""
    first, second = other_node
    ref = ConversationRef("test", "", f"nodes-{uuid.uuid4().hex[:8]}")
    await ingest(
        first, ref, _messages("a", 0, ["Ann adopted a dog called Rex.", "Bo moved to Lisbon in May."]), principal=OPERATOR
    )
    await consolidate(first, ref, principal=OPERATOR, extractor=OfflineExtractor())
    async with first._sessions.begin() as session:
        conversation_id = await ensure_conversation(session, ref)
    before = {t: await _ids(first, t, conversation_id) for t in ("episodes", "entities", "relations")}
    assert before["entities"], "the offline extractor found entities in the first messages"
    await _behind(second)
    later = ["Carla joined the choir in Porto.", "Dan bought a red bicycle in Berlin."]
    await ingest(second, ref, _messages("b", 10, later), principal=OPERATOR)
    await consolidate(second, ref, principal=OPERATOR, extractor=OfflineExtractor())
    after = {t: await _ids(second, t, conversation_id) for t in ("episodes", "entities", "relations")}
    for table, ids in after.items():
        new = sorted(set(ids) - set(before[table]))
        assert not before[table] or not new or min(new) > max(before[table]), table
    assert len(after["episodes"]) == 4 and len(after["entities"]) > len(before["entities"])
    async with second._engine.connect() as connection:
        checkpoint = (
            await connection.execute(
                text("SELECT last_episode_id, pending_episode_ids FROM checkpoints WHERE conversation_id = :c"),
                {"c": conversation_id},
            )
        ).one()
    assert checkpoint[0] == max(after["episodes"]) and not checkpoint[1]


_SHARD_ROWS = (
    "SELECT result::bigint FROM run_command_on_shards('search_documents', 'SELECT count(*) FROM %s') "
    "WHERE shardid = get_shard_id_for_distribution_column('search_documents', CAST(:c AS bigint))"
)


_PARTITION_ROWS = text(
    "SELECT count(*) FROM search_documents WHERE tableoid = "
    "(SELECT tableoid FROM search_documents WHERE conversation_id = :c LIMIT 1)"
)


async def test_the_vector_index_rows_are_those_of_the_conversations_own_shard(memory: Memory) -> None:
    """Under Citus each shard has its own HNSW index: the rows the plan takes it to hold
    are those of the shard that holds the conversation (not one shard Citus picked for a
    multi-shard EXPLAIN, which held 8 rows against the conversation's 38 documents); on
    one server, those of the partition that holds it (migration 0024)."""
    run = uuid.uuid4().hex[:8]
    ids = []
    for k, size in enumerate((40, 3, 3, 3, 3, 3)):
        ref = ConversationRef("test", run, f"shard-{k}")
        await ingest(memory, ref, _messages("s", 0, [f"note {i} about gardening" for i in range(size)]), principal=OPERATOR)
        async with memory._sessions.begin() as session:
            ids.append(await ensure_conversation(session, ref))
    async with memory._engine.begin() as connection:
        await connection.execute(text("ANALYZE search_documents"))
    for conversation_id in ids:
        async with memory._engine.connect() as connection:
            if TEST_DATABASE_URL is None:
                expected = (await connection.execute(_PARTITION_ROWS, {"c": conversation_id})).scalar_one()
            else:
                expected = (await connection.execute(text(_SHARD_ROWS), {"c": conversation_id})).scalar_one()
        async with memory._sessions() as session:
            index_rows, planned = await planned_sizes(session, conversation_id, ["episode"])
        assert index_rows >= planned["episode"] >= 1
        assert abs(index_rows - expected) <= max(2, 0.05 * expected), (conversation_id, index_rows, expected)
    async with memory._sessions() as session:
        index_rows, _ = await planned_sizes(session, ids[0], ["episode"])
    assert index_rows >= 40  # the large conversation's shard holds at least its own documents
