"""Integration: conversation locks are row locks (memory.store.locks) that exclude what
they must and nothing else, and need no row made beforehand."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from memory.core import Memory
from memory.store.conversations import ConversationRef, ensure_conversation
from memory.store.locks import LockPurpose, lock_conversation, try_hold


async def _blocked(memory: Memory, conversation_id: int, *purposes: LockPurpose) -> bool:
    """Whether taking ``purposes`` now would wait (a short lock_timeout says so). Under
    Citus the row lock is waited for on the shard's worker: the timeout must be sent
    there too (a plain Postgres keeps the citus setting as an unused placeholder)."""
    async with memory._sessions() as session:
        await session.execute(text("SET LOCAL citus.propagate_set_commands = 'local'"))
        await session.execute(text("SET LOCAL lock_timeout = '200ms'"))
        try:
            await lock_conversation(session, conversation_id, *purposes)
        except DBAPIError as error:
            assert "lock timeout" in str(error.orig)
            return True
        finally:
            await session.rollback()
        return False


async def test_a_lock_excludes_its_purpose_only_until_the_transaction_ends(memory: Memory, conversation_id: int) -> None:
    async with memory._sessions() as holder:
        await lock_conversation(holder, conversation_id, LockPurpose.CHAIN)  # first use: the row is made
        assert await _blocked(memory, conversation_id, LockPurpose.CHAIN)
        assert await _blocked(memory, conversation_id, LockPurpose.CHAIN, LockPurpose.GRAPH)
        assert not await _blocked(memory, conversation_id, LockPurpose.GRAPH)
        await holder.commit()
    assert not await _blocked(memory, conversation_id, LockPurpose.CHAIN, LockPurpose.GRAPH)


async def test_other_conversations_are_not_held(memory: Memory, conversation_id: int) -> None:
    async with memory._sessions() as holder:
        await lock_conversation(holder, conversation_id, LockPurpose.CHAIN, LockPurpose.GRAPH)
        async with memory._sessions.begin() as session:
            other = await ensure_conversation(session, ConversationRef("test", "", f"other-{conversation_id}"))
        assert not await _blocked(memory, other, LockPurpose.CHAIN, LockPurpose.GRAPH)
        await holder.rollback()


async def test_a_held_lock_is_not_taken_twice_and_goes_with_its_holder(memory: Memory, conversation_id: int) -> None:
    async with try_hold(memory._engine, conversation_id, LockPurpose.INBOX) as first:
        assert first
        async with try_hold(memory._engine, conversation_id, LockPurpose.INBOX) as second:
            assert not second
        assert not await _blocked(memory, conversation_id, LockPurpose.CHAIN)  # another purpose
    async with try_hold(memory._engine, conversation_id, LockPurpose.INBOX) as again:
        assert again


@pytest.mark.parametrize("purpose", list(LockPurpose))
async def test_every_purpose_locks_a_new_conversation(memory: Memory, conversation_id: int, purpose: LockPurpose) -> None:
    async with memory._sessions() as holder:
        await lock_conversation(holder, conversation_id, purpose)
        assert await _blocked(memory, conversation_id, purpose)
        await holder.rollback()
