"""Background work and the operator's maintenance: consolidation, communities, the
running summary, vacuum and erasure, re-embedding, the Citus plan, integrity and
residue checks. Jobs may run the background work; the rest is the operator's
(memory/access.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from memory.door import door, resolve
from memory.errors import ConfigurationError
from memory.principal import Principal

if TYPE_CHECKING:
    from memory.communities.run import CommunityReport
    from memory.consolidation.extraction import Extractor
    from memory.consolidation.run import ConsolidationReport
    from memory.core import Memory
    from memory.store.backlog import Backlog, Waiting
    from memory.store.citus import CitusPlan
    from memory.store.conversations import ConversationRef
    from memory.store.erasure import MaintenanceReport
    from memory.store.vector_indexes import IndexReport


async def prepare_consolidation(memory: Memory) -> None:
    """Load what consolidation needs (offline: the spaCy model) now, in a thread, rather
    than during the first run: a process about to do background work pays for it before
    it takes work, not while a conversation waits. Reads and changes no memory, so it
    takes no principal."""
    from memory.consolidation.run import warm_up

    await asyncio.to_thread(warm_up, memory)


async def consolidate(
    memory: Memory,
    conversation: ConversationRef,
    *,
    principal: Principal,
    extractor: Extractor | None = None,
    on_progress: Callable[[int], object] | None = None,
    reconcile: bool = True,
    max_tokens: int | None = None,
) -> ConsolidationReport:
    """Turn the conversation's new and edited messages into entities and relations: all
    of them, or the oldest within ``max_tokens`` (the scheduler's cap on one run, so a
    conversation that fell behind catches up in turns with the others)."""
    from memory.consolidation.run import consolidate as _consolidate

    async with door(memory, "consolidate", principal, conversation) as call:
        assert call.conversation_id is not None
        report = await _consolidate(
            memory, call.conversation_id, extractor, on_progress, reconcile=reconcile, max_tokens=max_tokens
        )
        call.note(episodes=report.episodes, chunks=report.chunks, llm_calls=report.llm_calls, stopped=report.stopped)
    return report


async def pending(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> int:
    """Messages waiting for consolidation (new, or edited since)."""
    from memory.consolidation.run import unconsolidated_count

    async with door(memory, "pending", principal, conversation) as call:
        assert call.conversation_id is not None
        async with memory._sessions() as session:
            return await unconsolidated_count(session, call.conversation_id)


async def backlog(memory: Memory, *, principal: Principal, conversation: ConversationRef | None = None) -> list[Backlog]:
    """Waiting background work per conversation (all of them, or one): consolidation
    lag, dirty communities, a dirty running summary, graph changes communities have not seen."""
    from memory.store.backlog import read_backlog

    async with door(memory, "backlog", principal, conversation) as call:
        async with memory._sessions() as session:
            found = await read_backlog(session, call.conversation_id, memory.retention_days)
        call.note(waiting=len(found))
    return found


async def due_backlog(memory: Memory, *, principal: Principal, limit: int = 1000) -> list[Backlog]:
    """The scheduler's discovery: the waiting work of the conversations due by now
    (marked by a write, or deferred to now), longest due first; its cost follows what is
    due, not how many conversations there are (memory.store.backlog)."""
    from memory.store.backlog import read_due

    async with door(memory, "due_backlog", principal) as call:
        async with memory._sessions() as session:
            found = await read_due(session, limit, memory.retention_days)
        call.note(due=len(found))
    return found


async def waiting_backlog(memory: Memory, *, principal: Principal) -> Waiting:
    """The messages waiting for consolidation in all conversations, with the oldest one's
    arrival: what backlog shedding and the service's health judge by. Reads only the
    conversations with work marked (memory.store.backlog), not every conversation."""
    from memory.store.backlog import read_waiting

    async with door(memory, "waiting_backlog", principal) as call:
        async with memory._sessions() as session:
            found = await read_waiting(session)
        call.note(messages=found.messages)
    return found


async def defer_backlog(memory: Memory, item: Backlog, next_at: datetime | None, *, principal: Principal) -> bool:
    """Look at ``item``'s conversation next at ``next_at`` (None: when a write marks it),
    unless a write marked it since ``item`` was read; whether it was moved."""
    from memory.store.backlog import defer_due

    async with door(memory, "defer_backlog", principal) as call:
        async with memory._sessions.begin() as session:
            moved = await defer_due(session, item, next_at)
        call.note(moved=moved)
    return moved


async def build_communities(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> CommunityReport:
    """Rebuild the conversation's communities by label propagation and summarise them."""
    from memory.communities import run as _communities

    async with door(memory, "build_communities", principal, conversation) as call:
        assert call.conversation_id is not None
        report = await _communities.build(memory, call.conversation_id)
        report.add(await _communities.regenerate(memory, call.conversation_id))
        call.note(**_counts(report))
    return report


async def update_communities(
    memory: Memory, conversation: ConversationRef, *, principal: Principal, rebuild_share: float | None = None
) -> CommunityReport:
    """After consolidation: new entities join their neighbours' community (which becomes
    dirty), or everything is rebuilt when the share of new entities passes ``rebuild_share``
    (default ``MemoryParams.community_rebuild_share``)."""
    from memory.communities import run as _communities

    async with door(memory, "update_communities", principal, conversation) as call:
        assert call.conversation_id is not None
        report = await _communities.update_membership(memory, call.conversation_id, rebuild_share)
        call.note(**_counts(report))
    return report


async def regenerate_communities(
    memory: Memory,
    conversation: ConversationRef,
    *,
    principal: Principal,
    limit: int | None = None,
    include_cold: bool = True,
) -> CommunityReport:
    """Re-summarise dirty communities from their surviving members; dissolve those left
    with fewer than two. The most used first, at most ``limit`` (None: all); cold ones
    (not used lately: memory/communities/use.py) only with ``include_cold``."""
    from memory.communities import run as _communities

    async with door(memory, "regenerate_communities", principal, conversation) as call:
        assert call.conversation_id is not None
        report = await _communities.regenerate(memory, call.conversation_id, limit=limit, include_cold=include_cold)
        call.note(**_counts(report))
    return report


async def regenerate_summary(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> bool:
    """Rebuild a running summary a deletion cleared (False when it was not dirty)."""
    from memory.consolidation.summary import rebuild_summary
    from memory.store.backlog import read_backlog
    from memory.store.locks import LockPurpose, lock_conversation

    async with door(memory, "regenerate_summary", principal, conversation) as call:
        assert call.conversation_id is not None
        rebuilt = False
        async with memory._sessions.begin() as session:
            await lock_conversation(session, call.conversation_id, LockPurpose.GRAPH)
            for item in await read_backlog(session, call.conversation_id):
                if item.summary_dirty:
                    await rebuild_summary(memory, session, call.conversation_id)
                    rebuilt = True
                    break
        call.note(rebuilt=rebuilt)
    return rebuilt


def _counts(report: CommunityReport) -> dict[str, object]:
    return {k: v for k, v in report.as_dict().items() if k != "conversation_id"}


async def vacuum(memory: Memory, *, principal: Principal) -> MaintenanceReport:
    """Plain VACUUM of the memory tables, after a batch of deletions: dead row versions
    and their index entries go (memory.store.erasure says what that does not promise)."""
    from memory.store import erasure

    async with door(memory, "vacuum", principal) as call:
        report = await erasure.vacuum(memory._engine)
        call.note(seconds=report.seconds, tables=len(report.tables))
    return report


async def index_conversation(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> IndexReport:
    """Give a large conversation its own vector index of each kind past
    ``own_index_rows(kind)`` documents, built concurrently (memory.store.vector_indexes): its
    searches then cost the same whatever the store holds. Does nothing for a small one."""
    from memory.store import vector_indexes

    async with door(memory, "index_conversation", principal, conversation) as call:
        assert call.conversation_id is not None
        report = await vector_indexes.build(memory._engine, call.conversation_id)
        call.note(built=report.built, seconds=round(report.seconds, 2))
    return report


async def erase(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> MaintenanceReport:
    """For operators who must guarantee physical removal of what was deleted from
    ``conversation``: the memory tables (every conversation's: Postgres rewrites whole
    tables) are rewritten with their live rows only, indexes rebuilt, then a CHECKPOINT.
    Blocks the memory tables while it runs; recorded in the conversation's audit log."""
    from memory.store import erasure

    async with door(memory, "erase", principal, conversation) as call:
        report = await erasure.erase(memory._engine)
        call.note(seconds=report.seconds, tables=report.tables)
    return report


async def reindex(
    memory: Memory,
    conversation: ConversationRef | None = None,
    *,
    principal: Principal,
    on_batch: Callable[[int], object] | None = None,
) -> dict[str, int]:
    """Embed messages again from what is indexed now (needed once after migration 0004,
    which took the speaker's name out of message documents): one conversation, or every
    one (``None``), which also clears the store's mark of stale vectors. Returns the
    messages embedded, by conversation."""
    from memory.episodes.reindex import clear_stale_mark, reindex_episodes
    from memory.store.conversations import list_conversations

    async with door(memory, "reindex", principal, conversation) as call:
        if conversation is None:
            async with memory._sessions() as session:
                refs = await list_conversations(session)
        else:
            refs = [conversation]
        done = {str(ref): await reindex_episodes(memory, await resolve(memory, ref), on_batch) for ref in refs}
        if conversation is None:
            await clear_stale_mark(memory)
        call.note(embedded=sum(done.values()))
    return done


async def citus_plan(memory: Memory, *, principal: Principal, apply: bool = False) -> CitusPlan:
    """The plan that shards the memory on Citus by conversation (memory.store.citus):
    reference tables, then every other table distributed by ``conversation_id``,
    co-located, in foreign-key order. With ``apply``, runs the steps Citus has not done
    yet, each in its own transaction; refused without the extension or when the schema
    breaks a rule (the plan says which)."""
    from memory.store.citus import apply_plan as apply_citus_plan
    from memory.store.citus import read_plan as read_citus_plan

    async with door(memory, "citus_plan", principal, arguments={"apply": apply}) as call:
        async with memory._engine.connect() as connection:
            plan = await read_citus_plan(connection)
        if not apply:
            return plan
        if plan.citus is None:
            raise ConfigurationError("citus is not installed in this database (CREATE EXTENSION citus); --dry-run shows the plan")
        if plan.violations:
            raise ConfigurationError(f"the schema breaks {len(plan.violations)} Citus rules, first: {plan.violations[0]}")
        async with memory._engine.connect() as connection:
            await apply_citus_plan(connection, plan)
        call.note(applied=", ".join(plan.applied) or "nothing left to do")
    return plan
