"""``forgotten(since)``: the deletion log of a conversation, from the audit log.

Deletions and edits (an edit retracts what the old text supported, as a deletion does)
are logged by memory.forgetting.deletion with ids and counts only, so nothing here can
show a deleted message's text. A retention run forgets its messages in batches
(memory.forgetting.batch), one row per batch naming every message it forgot, so the log
shows the job, the messages and the counts, as for a single deletion.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.schema import AuditEntry

if TYPE_CHECKING:
    from memory.audit.store_log import StoreAuditRow

RETENTION_BATCH_ACTION = "retention_batch"  # one batch of a retention run (memory.privacy.commands)
ACTIONS = {"delete_episode": "delete", "edit_episode": "edit", RETENTION_BATCH_ACTION: "retention"}
# Who a principal is, by the prefix memory.api.Principal writes ("kind:id").
REQUESTERS = {"user": "user", "event": "platform event", "job": "job", "operator": "operator"}
ID_KINDS = (
    "relations_removed",
    "relations_kept",
    "relations_restored",
    "entities_removed",
    "entities_anchored",
    "entities_kept",
    "communities_dirtied",
    "answers_withdrawn",
)


def forgotten_messages(details: dict[str, Any]) -> tuple[str, ...]:
    """The platform ids of the messages one audit row of ``ACTIONS`` forgot or edited:
    one for a deletion or an edit, the batch's for a retention row. Pure."""
    if "platform_message_ids" in details:
        return tuple(str(m) for m in details["platform_message_ids"])
    return (str(details.get("platform_message_id", "")),)


def requester(principal: str) -> str:
    """Who asked, from the logged principal: a user, a platform event, a job by its
    name (the sweep, retention), or the operator. Pure."""
    kind, _, name = principal.partition(":")
    if kind == "job" and name:
        return f"job {name}"
    return REQUESTERS.get(kind, "operator" if kind in ("cli", "") else kind)


@dataclass(frozen=True)
class Forgotten:
    at: datetime
    action: str  # delete | edit | retention
    messages: tuple[str, ...]  # platform ids: one, or a retention batch's
    status: str  # deleted | tombstoned | already_deleted | edited | unchanged | unknown
    requested_by: str
    principal: str
    counts: dict[str, int]
    ids: dict[str, list[int]]

    @property
    def message(self) -> str:
        """What the row forgot, in words: ``message X``, or ``N messages`` for a batch."""
        return f"message {self.messages[0]}" if len(self.messages) == 1 else f"{len(self.messages)} messages"

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "action": self.action,
            "messages": list(self.messages),
            "message": self.message,
            "status": self.status,
            "requested_by": self.requested_by,
            "principal": self.principal,
            "counts": self.counts,
            "ids": self.ids,
        }


async def deletion_log(session: AsyncSession, conversation_id: int, since: datetime | None, limit: int) -> list[Forgotten]:
    """Newest first."""
    query = (
        select(AuditEntry.created_at, AuditEntry.action, AuditEntry.principal, AuditEntry.details)
        .where(AuditEntry.conversation_id == conversation_id, AuditEntry.action.in_(list(ACTIONS)))
        .order_by(AuditEntry.created_at.desc(), AuditEntry.id.desc())
        .limit(limit)
    )
    if since is not None:
        query = query.where(AuditEntry.created_at >= since)
    return [
        Forgotten(
            at,
            ACTIONS[action],
            forgotten_messages(details),
            str(details.get("status", "deleted")),
            requester(principal),
            principal,
            {k: int(v) for k, v in (details.get("counts") or {}).items()},
            {k: list((details.get("ids") or {}).get(k, [])) for k in ID_KINDS},
        )
        for at, action, principal, details in await session.execute(query)
    ]


@dataclass(frozen=True)
class DeletionLog:
    conversation: str
    since: datetime | None
    entries: tuple[Forgotten, ...]
    people: tuple[StoreAuditRow, ...] = ()  # the workspace's people forgotten, opted out or back in

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "since": self.since.isoformat() if self.since else None,
            "entries": [e.as_dict() for e in self.entries],
            "people": [e.as_dict() for e in self.people],
        }
