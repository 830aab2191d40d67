"""The memory core's conversation commands: what a platform reports (messages stored,
edited, deleted, a conversation gone) and what people ask.

Each command names the conversation (a ``ConversationRef``) and, keyword-only, the
``principal`` who asks, and runs through the door (memory/door.py): the principal is
checked against the command's rule (memory/access.py), the conversation resolved (a
command that adds to a conversation creates it, others refuse an unknown one with
``UnknownConversation``), one structured line logged and the audit row written. The
other commands live beside this module in memory/commands/; the public names are
``memory.__all__``, and every module behind them is private and free to move.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from memory.door import door
from memory.errors import ValidationError
from memory.limits import MAX_EVIDENCE_K
from memory.principal import Principal
from memory.store import vector_indexes
from memory.store.audit import write_store_audit
from memory.store.conversations import Workspace, delete_conversation, list_conversations
from memory.validation import check_text, normalize_id

if TYPE_CHECKING:
    from memory.core import Memory
    from memory.episodes.append import AppendResult, Message
    from memory.episodes.listing import StoredMessage
    from memory.forgetting.deletion import DeletionReport, EditReport
    from memory.retrieval.answering import Answer
    from memory.retrieval.selection import SelectionWeights
    from memory.store.conversations import ConversationRef


@dataclass(frozen=True)
class Rejected:
    """A message the database refused: its position in the ingested sequence, its id, why."""

    index: int
    platform_message_id: str
    reason: str


@dataclass(frozen=True)
class IngestReport:
    stored: int
    duplicate: int
    tombstoned: int
    rejected: tuple[Rejected, ...] = ()
    stopped: str | None = None  # why the run ended early (the messages after the last result were not attempted)
    attempted: int = 0
    opted_out: int = 0  # acknowledged and not stored: their authors opted out of the workspace
    bot_removed: int = 0  # acknowledged and not stored: the bot was removed from the conversation

    def as_dict(self) -> dict[str, object]:
        return {
            "stored": self.stored,
            "duplicate": self.duplicate,
            "tombstoned": self.tombstoned,
            "rejected": [asdict(r) for r in self.rejected],
            "stopped": self.stopped,
            "attempted": self.attempted,
            "opted_out": self.opted_out,
            "bot_removed": self.bot_removed,
        }


async def resolve_conversation(
    memory: Memory, conversation: ConversationRef, *, principal: Principal, create: bool = False
) -> int:
    """The conversation's id (what the job queue and work items carry); an unknown one is
    created when ``create``, else refused with ``UnknownConversation``."""
    async with door(memory, "resolve_conversation", principal, conversation, create=create) as call:
        assert call.conversation_id is not None
        return call.conversation_id


async def ingest(
    memory: Memory,
    conversation: ConversationRef,
    messages: Sequence[Message],
    *,
    principal: Principal,
    on_batch: Callable[[list[AppendResult]], object] | None = None,
) -> IngestReport:
    """Append messages (idempotent on their platform ids); each is searchable at once. A
    message the database refuses is reported in ``rejected`` and costs the others
    nothing; an embedding endpoint that fails stops the run (``stopped``). A message by
    someone opted out of the conversation's workspace is not stored (``opted_out``),
    nor is anything in a conversation the bot was removed from (``bot_removed``): every
    path that stores messages comes through here, so none can skip the checks."""
    from memory.commands.presence import bot_removed
    from memory.episodes.ingest import ingest_messages
    from memory.privacy.commands import opted_out_of

    async with door(memory, "ingest", principal, conversation, create=True) as call:
        assert call.conversation_id is not None
        if await bot_removed(memory, call.conversation_id):
            call.note(stored=0, bot_removed=len(messages))
            return IngestReport(0, 0, 0, attempted=len(messages), bot_removed=len(messages))
        excluded = await opted_out_of(memory, conversation.workspace)
        run = await ingest_messages(memory, call.conversation_id, messages, on_batch=on_batch, opted_out=excluded)
        counts = Counter(r.status for r in run.results)
        rejected = tuple(
            Rejected(index, r.platform_message_id, r.reason or "")
            for index, r in enumerate(run.results)
            if r.status == "rejected"
        )
        report = IngestReport(
            counts["stored"],
            counts["duplicate"],
            counts["tombstoned"],
            rejected,
            run.stopped,
            len(run.results),
            counts["opted_out"],
        )
        call.note(
            stored=report.stored,
            duplicate=report.duplicate,
            tombstoned=report.tombstoned,
            opted_out=report.opted_out,
            stopped=run.stopped,
        )
    return report


async def ask(
    memory: Memory,
    conversation: ConversationRef,
    question: str,
    *,
    principal: Principal,
    date: datetime | None = None,
    k: int | None = None,
    weights: SelectionWeights | None = None,
    thread: str | None = None,
) -> Answer:
    """Answer from this conversation's memory only, citing messages; the trace is stored.
    ``weights``: the offline answer selection's weights and abstention thresholds (the
    answers benchmark sweeps them; the service keeps the calibrated defaults);
    ``thread``: the thread the question was asked in (a platform's thread id), whose
    messages are searched first."""
    from memory.retrieval.answering import answer

    check_text(question, "question")
    if thread is not None:
        thread = normalize_id(thread, "thread")
    if k is not None and not 1 <= k <= MAX_EVIDENCE_K:
        raise ValidationError("k", f"evidence items must be between 1 and {MAX_EVIDENCE_K}, got {k}")
    async with door(memory, "ask", principal, conversation) as call:
        assert call.conversation_id is not None
        result = await answer(
            memory,
            call.conversation_id,
            conversation,
            question,
            principal=principal,
            date=date,
            k=k,
            weights=weights,
            thread=thread,
        )
        call.note(mode=result.mode, in_memory=result.in_memory, citations=len(result.citations), answer_id=result.trace_id)
    return result


async def forget(memory: Memory, conversation: ConversationRef, message_id: str, *, principal: Principal) -> DeletionReport:
    """Delete a message and everything that rested only on it, in one transaction. A
    message not stored yet leaves a tombstone (its conversation is created for it, as a
    platform may report a deletion before the message), so it is never stored."""
    from memory.forgetting.deletion import delete_episode

    message_id = normalize_id(message_id, "message")
    async with door(memory, "forget", principal, conversation, create=principal.kind == "event") as call:
        assert call.conversation_id is not None
        report = await delete_episode(memory, call.conversation_id, message_id, principal=str(principal))
        call.note(status=report.status, **report.retraction.counts())
    return report


async def edit(
    memory: Memory,
    conversation: ConversationRef,
    message_id: str,
    text: str,
    *,
    principal: Principal,
    edited_at: datetime | None = None,
) -> EditReport:
    """Correct a message: retract what the old text supported, store the new text in
    place and queue it for consolidation. An edit by someone opted out of the
    workspace is not stored, and the message it changes is forgotten (status
    ``forgotten``): its old text is no longer what they said."""
    from memory.forgetting.deletion import edit_episode
    from memory.privacy.commands import opted_out_of

    message_id, text = normalize_id(message_id, "message"), check_text(text, "text")
    async with door(memory, "edit", principal, conversation) as call:
        assert call.conversation_id is not None
        excluded = await opted_out_of(memory, conversation.workspace)
        report = await edit_episode(
            memory, call.conversation_id, message_id, text, principal=str(principal), edited_at=edited_at, opted_out=excluded
        )
        call.note(status=report.status, **report.retraction.counts())
    return report


async def drop_conversation(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> bool:
    """Remove a conversation and everything stored for it, its audit log too; who
    dropped it is recorded in the store-wide audit log, in the same transaction. False
    when there was none (and nothing is recorded)."""
    async with door(memory, "drop_conversation", principal, conversation, must_exist=False) as call:
        async with memory._sessions.begin() as session:
            dropped = await delete_conversation(session, conversation)
            if dropped:
                details = {"query": "drop_conversation", "conversation_id": call.conversation_id}
                await write_store_audit(session, str(principal), "drop_conversation", details, conversation=conversation)
        if dropped and call.conversation_id is not None:
            await vector_indexes.drop(memory._engine, call.conversation_id)  # empty now, but planned for every statement
        call.note(dropped=dropped)
    return dropped


async def stored_messages(
    memory: Memory,
    conversation: ConversationRef,
    *,
    principal: Principal,
    since: datetime | None = None,
    thread_id: str | None = None,
) -> list[StoredMessage]:
    """Ids, threads and times of the stored messages (from ``since``, of one thread),
    in time order: what a connector compares with the platform's history."""
    from memory.episodes.listing import stored_messages as _stored_messages

    async with door(memory, "stored_messages", principal, conversation) as call:
        assert call.conversation_id is not None
        async with memory._sessions() as session:
            found = await _stored_messages(session, call.conversation_id, since, thread_id)
        call.note(found=len(found))
    return found


async def conversations(
    memory: Memory,
    *,
    principal: Principal,
    platform: str | None = None,
    bot_removed: bool | None = None,
    workspace: Workspace | None = None,
) -> list[ConversationRef]:
    """The conversations in memory (of one platform, or of one ``workspace``;
    ``bot_removed``: only those the bot was removed from, or only those it is in), in
    creation order."""
    if workspace is not None:
        platform = workspace.platform
    async with door(memory, "conversations", principal) as call:
        async with memory._sessions() as session:
            found = await list_conversations(session, platform, bot_removed, workspace.workspace_id if workspace else None)
        call.note(found=len(found))
    return found
