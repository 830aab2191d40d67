"""Participants' rights as commands: opting out of being remembered (per person, per
workspace), retention windows (per conversation, with the store's default) and the job
that enforces a window, and forgetting everything one person wrote.

An opted-out person's new messages are acknowledged and not stored, on every path that
stores messages (they all go through ``memory.ingest``, which reads the flags through
the cache of memory/privacy/optouts.py); their mentions are still answered, from what
others said. Their past messages stay unless they are forgotten too (``forget_author``).

A retention window forgets the messages said before it through Algorithm 1 (what rests
only on them goes; what others' messages still support stays), oldest first, in
batches of its own transactions, at most ``limit`` messages per run, so that a
conversation with a long history past its window is caught up over several runs, each
holding the conversation's locks for one batch at a time.

A person may opt out and forget what they said themselves (the access table's ``OWN``
grant: ``owner`` is the person's platform id); a workspace's admins, platform events
(a member leaving) and jobs may forget anyone there; only the operator and configured
admins may forget someone across the whole store.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from memory.audit.forgotten import RETENTION_BATCH_ACTION
from memory.door import door
from memory.principal import Principal
from memory.privacy.retention import Retention, check_days, cutoff, window
from memory.store import participants
from memory.store import settings as store_settings
from memory.store.audit import write_store_audit
from memory.store.locks import mark_all_due, mark_due
from memory.store.schema import Episode
from memory.validation import normalize_id

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from memory.core import Memory
    from memory.privacy.person import PersonForgetting
    from memory.store.conversations import ConversationRef, Workspace

RETENTION_BATCH = 200  # messages forgotten per transaction
RETENTION_LIMIT = 2_000  # messages forgotten per run (the rest on the next)
_DEFAULT_KEY = "retention_default_days"  # store_settings: the default the processes last ran with


async def opted_out_of(memory: Memory, workspace: Workspace) -> frozenset[str]:
    """The platform ids opted out of ``workspace``, through the cache (ingest's check)."""

    async def read() -> frozenset[str]:
        async with memory._sessions() as session:
            return await participants.opted_out(session, workspace)

    return await memory._optouts.get(workspace, read)


async def set_optout(memory: Memory, author: str, *, workspace: Workspace, opted_out: bool, principal: Principal) -> bool:
    """Opt ``author`` out of being remembered in ``workspace`` (or back in); True when it
    changed (recorded in the store-wide audit log as ``optout``/``optin``). Returns once
    every process sees the change (memory/privacy/optouts.py), so a message checked after
    this returns is checked against it."""
    author = normalize_id(author, "author")
    arguments = {"author": author, "workspace": str(workspace), "opted_out": opted_out}
    async with door(memory, "set_optout", principal, owner=author, arguments=arguments) as call:
        async with memory._sessions.begin() as session:
            if opted_out:
                changed = await participants.opt_out(session, workspace, author, str(principal))
            else:
                changed = await participants.opt_in(session, workspace, author)
            if changed:  # the workspace's, so the store-wide log (no conversation's log holds it)
                action = "optout" if opted_out else "optin"
                details = {"author": author}
                await write_store_audit(
                    session, str(principal), action, details, platform=workspace.platform, workspace=workspace.workspace_id
                )
        memory._optouts.drop(workspace)
        if changed:
            await asyncio.sleep(memory._optouts.seconds)
        call.note(opted_out=opted_out, changed=changed)
    return changed


async def optout_status(memory: Memory, author: str, *, workspace: Workspace, principal: Principal) -> bool:
    """Whether ``author`` is opted out of ``workspace`` now (read afresh, not cached)."""
    author = normalize_id(author, "author")
    async with door(memory, "optout_status", principal, owner=author, arguments={"workspace": str(workspace)}) as call:
        async with memory._sessions() as session:
            found = author in await participants.opted_out(session, workspace)
        call.note(opted_out=found)
    return found


async def forget_author(
    memory: Memory, author: str, *, workspace: Workspace | None, principal: Principal, dry_run: bool = False
) -> PersonForgetting:
    """Forget every message ``author`` (a platform user id) wrote in ``workspace`` (None:
    every conversation of the store) and everything that rested only on them; facts
    others' messages support stay, re-worded from those. ``dry_run``: report what would
    go and change nothing. Rerun after an interruption to finish."""
    from memory.privacy.person import forget_person

    author = normalize_id(author, "author")
    arguments = {"author": author, "workspace": None if workspace is None else str(workspace), "dry_run": dry_run}
    async with door(memory, "forget_author", principal, everywhere=workspace is None, arguments=arguments, owner=author) as call:
        result = await forget_person(memory, author, workspace, principal=str(principal), dry_run=dry_run)
        call.note(messages=result.messages, conversations=result.conversations, remaining=result.remaining)
    return result


async def _window(session: AsyncSession, memory: Memory, conversation_id: int | None) -> Retention:
    own = None if conversation_id is None else await participants.read_retention(session, conversation_id)
    return window(None if own is None else (own.days,), memory.retention_days)


async def set_retention(memory: Memory, conversation: ConversationRef, days: int | None, *, principal: Principal) -> None:
    """Set the conversation's own retention window in days (None: keep everything,
    whatever the default). A chat admin's setting creates the conversation (the bot may
    have stored nothing there yet); an unknown conversation is refused to anyone else."""
    days = check_days(days)
    async with door(memory, "set_retention", principal, conversation, create=principal.kind == "user") as call:
        assert call.conversation_id is not None
        async with memory._sessions.begin() as session:
            changed = await participants.set_retention(session, call.conversation_id, days, str(principal))
            if changed:
                await mark_due(session, call.conversation_id)  # the scheduler looks at it again
        call.note(days=days, changed=changed)


async def retention(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> Retention:
    """The retention window that applies to the conversation and where it comes from (a
    conversation not in memory yet has the default)."""
    async with door(memory, "retention", principal, conversation, must_exist=False) as call:
        async with memory._sessions() as session:
            found = await _window(session, memory, call.conversation_id)
        call.note(days=found.days, source=found.source)
    return found


async def watch_retention_default(memory: Memory, *, principal: Principal) -> int:
    """Before the retention job's first run in a process: if the default window is set
    and differs from the one the store last ran with, mark every conversation due once
    (discovery may have deferred quiet ones past what the new window makes due) and
    record it. Returns the lock rows marked (0 when nothing changed)."""
    wanted = "off" if memory.retention_days is None else str(memory.retention_days)
    async with door(memory, "watch_retention_default", principal) as call:
        async with memory._sessions.begin() as session:
            marked = 0
            if await store_settings.read(session, _DEFAULT_KEY) != wanted:
                if memory.retention_days is not None:
                    marked = await mark_all_due(session)
                await store_settings.put(session, _DEFAULT_KEY, wanted)
        call.note(default=wanted, marked=marked)
    return marked


@dataclass
class RetentionReport:
    """One run of a retention window over a conversation."""

    conversation: str
    days: int | None
    source: str
    cutoff: datetime | None  # messages said before this were due
    forgotten: int = 0
    batches: int = 0
    remaining: int = 0  # still past the window after this run (the next run continues)
    removed: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "cutoff": self.cutoff.isoformat() if self.cutoff else None, "removed": dict(self.removed)}


async def _past(memory: Memory, conversation_id: int, before: datetime, limit: int) -> list[tuple[int, str]]:
    """The oldest messages said before ``before`` (``memory.privacy.retention.past_window``
    in SQL, on the chain's index: conversation, message time, id)."""
    async with memory._sessions() as session:
        rows = await session.execute(
            select(Episode.id, Episode.platform_message_id)
            .where(Episode.conversation_id == conversation_id, Episode.message_time < before)
            .order_by(Episode.message_time, Episode.id)
            .limit(limit)
        )
        return [(episode_id, message_id) for episode_id, message_id in rows]


async def _count_past(memory: Memory, conversation_id: int, before: datetime) -> int:
    async with memory._sessions() as session:
        query = select(func.count()).where(Episode.conversation_id == conversation_id, Episode.message_time < before)
        return int((await session.execute(query)).scalar_one())


async def apply_retention(
    memory: Memory,
    conversation: ConversationRef,
    *,
    principal: Principal,
    now: datetime | None = None,
    limit: int = RETENTION_LIMIT,
    batch: int = RETENTION_BATCH,
) -> RetentionReport:
    """Forget the conversation's messages said before its retention window (oldest
    first, ``batch`` per transaction through ``forget_episodes``, at most ``limit``);
    what rested only on them goes, what others' messages support stays. Each batch
    writes one audit row (``RETENTION_BATCH_ACTION``: the platform ids it forgot and
    counts), besides the door's row for the run."""
    from memory.forgetting.batch import forget_episodes

    at = now or datetime.now(UTC)
    async with door(memory, "apply_retention", principal, conversation) as call:
        assert call.conversation_id is not None
        cid = call.conversation_id
        async with memory._sessions() as session:
            applies = await _window(session, memory, cid)
        before = None if applies.days is None else cutoff(at, applies.days)
        report = RetentionReport(str(conversation), applies.days, applies.source, before)
        while before is not None and report.forgotten < limit:
            due = await _past(memory, cid, before, min(batch, limit - report.forgotten))
            if not due:
                break
            details = {"days": applies.days, "cutoff": before.isoformat(), "platform_message_ids": [m for _, m in due]}
            done = await forget_episodes(
                memory, cid, [e for e, _ in due], principal=str(principal), action=RETENTION_BATCH_ACTION, audit=details
            )
            for kind, count in done.retraction.counts().items():
                report.removed[kind] = report.removed.get(kind, 0) + count
            report.forgotten += len(done.deleted)
            report.batches += 1
        report.remaining = 0 if before is None else await _count_past(memory, cid, before)
        call.note(days=applies.days, forgotten=report.forgotten, batches=report.batches, remaining=report.remaining)
    return report
