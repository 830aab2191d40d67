"""The scheduler's discovery reads only what is due: writes mark their conversation due
under the lock they take, discovery defers what no job wants yet and clears what has
nothing left, and a write after discovery read a conversation keeps it due."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text

from jobs import JobSettings
from jobs.work import communities_due, consolidation_due, discover, next_look
from memory import Backlog, ConversationRef, Principal, defer_backlog, due_backlog, ingest, resolve_conversation
from memory.core import Memory
from memory.store.locks import LockPurpose, lock_conversation
from tests.database.test_consolidation import messages

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
SETTINGS = JobSettings(consolidate_tokens=100, consolidate_idle_seconds=60, consolidate_max_wait_seconds=30)
TEST = Principal.operator("test")


@st.composite
def backlogs(draw: st.DrawFn) -> Backlog:
    waiting = draw(st.integers(0, 5))
    oldest = draw(st.floats(0, 200))
    newest = draw(st.floats(0, oldest))
    ages = (NOW - timedelta(seconds=oldest), NOW - timedelta(seconds=newest)) if waiting else (None, None)
    return Backlog(
        1,
        ConversationRef("t", "", "c"),
        waiting,
        draw(st.integers(0, 200)) if waiting else 0,
        *ages,
        draw(st.integers(0, 2)),
        draw(st.booleans()),
        draw(st.booleans()),
        warm_communities=draw(st.integers(0, 2)),
    )


@given(backlogs())
def test_a_conversation_is_looked_at_again_exactly_when_some_job_would_want_it(item: Backlog) -> None:
    look = next_look(item, SETTINGS, NOW)
    wanted_now = (
        consolidation_due(SETTINGS, NOW)(item)
        or communities_due(SETTINGS, NOW)(item)
        or item.warm_communities > 0
        or item.summary_dirty
    )
    if wanted_now:
        assert look == NOW
    elif not item.unconsolidated_messages:
        assert look is None  # nothing waits: not until the next write
    else:
        assert look is not None and look > NOW
        assert consolidation_due(SETTINGS, look)(item)  # due by then, not a moment before
        assert not consolidation_due(SETTINGS, look - timedelta(milliseconds=1))(item)


async def _marks(memory: Memory, conversation_id: int) -> list[datetime | None]:
    async with memory._engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT due_at FROM conversation_locks WHERE conversation_id = :c AND purpose IN (1, 2) ORDER BY purpose"),
            {"c": conversation_id},
        )
        return [row[0] for row in rows]


async def _due_ids(memory: Memory) -> set[int]:
    return {item.conversation_id for item in await due_backlog(memory, principal=TEST, limit=100_000)}


async def test_a_waiting_message_is_deferred_to_when_it_becomes_due(memory: Memory, conversation_ref: ConversationRef) -> None:
    await ingest(memory, conversation_ref, messages([("m1", "ann", "I moved to Quito last spring.")]), principal=TEST)
    cid = await resolve_conversation(memory, conversation_ref, principal=TEST)
    assert cid in await _due_ids(memory)  # the message marked it
    quiet = JobSettings(consolidate_tokens=10_000, consolidate_idle_seconds=3600, consolidate_max_wait_seconds=3600)
    assert cid not in {b.conversation_id for b in await discover(memory, quiet)}  # not due yet: deferred
    assert cid not in await _due_ids(memory)
    assert all(mark is not None and mark > datetime.now(UTC) for mark in (await _marks(memory, cid))[:1])
    now = JobSettings(consolidate_tokens=0)
    async with memory._sessions.begin() as session:  # a write (any writer lock) marks it due again
        await lock_conversation(session, cid, LockPurpose.GRAPH)
    assert cid in {b.conversation_id for b in await discover(memory, now)}


async def test_a_write_after_discovery_read_the_conversation_keeps_it_due(memory: Memory, conversation_id: int) -> None:
    async with memory._sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.CHAIN)
    [read] = [b for b in await due_backlog(memory, principal=TEST, limit=100_000) if b.conversation_id == conversation_id]
    async with memory._sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.CHAIN)  # a message arrives meanwhile
    assert not await defer_backlog(memory, read, None, principal=TEST)
    assert conversation_id in await _due_ids(memory)
    [again] = [b for b in await due_backlog(memory, principal=TEST, limit=100_000) if b.conversation_id == conversation_id]
    assert await defer_backlog(memory, again, None, principal=TEST)
    assert conversation_id not in await _due_ids(memory)
    assert await _marks(memory, conversation_id) == [None]


async def test_an_idle_conversation_is_not_read_by_discovery(memory: Memory, conversation_id: int) -> None:
    """Made, written once, cleared: from then on no tick reads it (its rows are outside
    the partial index discovery reads through)."""
    async with memory._sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.CHAIN, LockPurpose.GRAPH)
    await discover(memory, SETTINGS)
    assert await _marks(memory, conversation_id) == [None, None]
    assert conversation_id not in await _due_ids(memory)
