"""Backfill and import, platform-neutral part: history read from a platform's API or
an export file is stored exactly as the live stream stores it (the same conversation,
message ids and rules, through ``core_message``), so a later live event for the same
message is a duplicate and a message deleted live (a tombstone) is never stored."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from connectors.events import ChatMessage, core_message
from memory import ConversationRef, IngestReport, Memory, Principal, forget, ingest, resolve_conversation


@dataclass
class BackfillReport:
    """What one channel's backfill or import did (``skipped``: housekeeping messages,
    the bot's own messages, empty ones; ``forgotten``: messages the history marks as
    deleted, forgotten so that a late event cannot store them)."""

    conversation: str
    fetched: int = 0
    stored: int = 0
    duplicate: int = 0
    tombstoned: int = 0
    opted_out: int = 0  # not stored: their authors opted out of the workspace
    skipped: int = 0
    forgotten: int = 0
    resumed_after: str | None = None
    rejected: list[dict[str, str]] = field(default_factory=list)

    def add(self, counts: IngestReport) -> None:
        self.stored += counts.stored
        self.duplicate += counts.duplicate
        self.tombstoned += counts.tombstoned
        self.opted_out += counts.opted_out
        self.rejected += [{"message": r.platform_message_id, "reason": r.reason} for r in counts.rejected]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


async def store(
    memory: Memory,
    conversation: ConversationRef,
    chats: Sequence[ChatMessage],
    principal: Principal,
    on_batch: Callable[[int], object] | None = None,
) -> IngestReport:
    """Store messages whose authors are described (name and role set), in time order."""
    report = (lambda results: on_batch(len(results))) if on_batch is not None else None
    core = [core_message(chat, chat.author) for chat in sorted(chats, key=lambda c: (c.time, c.id))]
    return await ingest(memory, conversation, core, principal=principal, on_batch=report)


async def forget_deleted(memory: Memory, conversation: ConversationRef, message_ids: Sequence[str], principal: Principal) -> int:
    """Forget messages a history marks as deleted (each leaves a tombstone); returns how many."""
    if message_ids:
        await resolve_conversation(memory, conversation, principal=principal, create=True)
    for message_id in message_ids:
        await forget(memory, conversation, message_id, principal=principal)
    return len(message_ids)
