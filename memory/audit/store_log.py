"""The store-wide audit log as the audit shows it: dropped conversations, people
forgotten or opted out, the store-wide commands and their refusals, who asked (rows
written by memory/store/audit.py; ids and counts only, never a message's text). A
conversation's deletion log shows its workspace's people decisions (``PEOPLE``) from
here too: they are the workspace's, so no conversation's own log holds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.audit.forgotten import requester
from memory.store.conversations import ConversationRef
from memory.store.schema import StoreAuditEntry


def scope(platform: str | None, workspace: str | None, channel: str | None) -> str:
    """What a row is about, in words: a conversation, a platform's workspace, or the
    whole store. Pure."""
    if platform is None:
        return "the store"
    if channel is not None:
        return str(ConversationRef(platform, workspace or "", channel))
    return f"{platform}:{workspace}" if workspace else platform


# The people decisions of a workspace: a person forgotten, opted out, opted back in.
PEOPLE = ("forget_author", "optout", "optin")


def summary(action: str, details: dict[str, Any]) -> str:
    """What a row did, in a few words (ids and counts, as the row holds them). Pure."""
    author = details.get("author")
    if action == "forget_author":
        left = int(details.get("remaining") or 0)
        return f"{author}: {details.get('messages', 0)} message(s) in {details.get('conversations', 0)} conversation(s)" + (
            f", {left} still stored" if left else ""
        )
    if action in ("optout", "optin") and author:
        return str(author)
    return ""


@dataclass(frozen=True)
class StoreAuditRow:
    at: datetime
    action: str
    about: str  # see ``scope``
    requested_by: str
    principal: str
    details: dict[str, Any]

    @property
    def summary(self) -> str:
        return summary(self.action, self.details)

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "action": self.action,
            "about": self.about,
            "requested_by": self.requested_by,
            "principal": self.principal,
            "summary": self.summary,
            "details": self.details,
        }


@dataclass(frozen=True)
class StoreAuditLog:
    conversation: str | None  # the filter, when one was given
    since: datetime | None
    entries: tuple[StoreAuditRow, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "since": self.since.isoformat() if self.since else None,
            "entries": [e.as_dict() for e in self.entries],
        }


async def store_log(
    session: AsyncSession,
    since: datetime | None,
    limit: int,
    conversation: ConversationRef | None,
    actions: Sequence[str] | None = None,
) -> list[StoreAuditRow]:
    """Newest first; with ``conversation``, the rows about it (dropped or not) and about
    its workspace as a whole; with ``actions``, those actions' rows only."""
    query = select(
        StoreAuditEntry.created_at,
        StoreAuditEntry.action,
        StoreAuditEntry.platform,
        StoreAuditEntry.workspace_id,
        StoreAuditEntry.channel_id,
        StoreAuditEntry.principal,
        StoreAuditEntry.details,
    )
    if since is not None:
        query = query.where(StoreAuditEntry.created_at >= since)
    if conversation is not None:
        query = query.where(
            StoreAuditEntry.platform == conversation.platform,
            StoreAuditEntry.workspace_id == conversation.workspace_id,
            or_(StoreAuditEntry.channel_id == conversation.channel_id, StoreAuditEntry.channel_id.is_(None)),
        )
    if actions is not None:
        query = query.where(StoreAuditEntry.action.in_(list(actions)))
    query = query.order_by(StoreAuditEntry.created_at.desc(), StoreAuditEntry.id.desc()).limit(limit)
    return [
        StoreAuditRow(at, action, scope(platform, workspace, channel), requester(principal), principal, details)
        for at, action, platform, workspace, channel, principal, details in await session.execute(query)
    ]
