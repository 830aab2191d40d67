"""The audit logs, the only writer of both, each row written in the transaction that did
what it records.

- ``audit_log``: who did what to one conversation; it goes with the conversation.
- ``store_audit_log``: who did what to the store as a whole (store-wide commands), or to
  what outlives a conversation's log: a dropped conversation, a person forgotten or
  opted out across conversations. It names the conversation, or the platform and
  workspace, in text, so its rows survive the conversations they name.

``principal`` is a principal in its ``kind:id`` form (``str(Principal)``); ``details``
holds ids and counts, never a message's text.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.conversations import ConversationRef
from memory.store.schema import AuditEntry, StoreAuditEntry


async def write_audit(session: AsyncSession, conversation_id: int, principal: str, action: str, details: dict[str, Any]) -> None:
    """One entry of a conversation's log: the action and what it touched."""
    await session.execute(
        insert(AuditEntry).values(conversation_id=conversation_id, principal=principal, action=action, details=details)
    )


async def write_store_audit(
    session: AsyncSession,
    principal: str,
    action: str,
    details: dict[str, Any],
    *,
    platform: str | None = None,
    workspace: str | None = None,
    conversation: ConversationRef | None = None,
) -> None:
    """One entry of the store-wide log, about ``conversation`` (its platform, workspace
    and channel are recorded), or about a platform's ``workspace``, or the whole store.
    Naming both a conversation and a platform or workspace is a programming error."""
    if conversation is not None:
        if platform is not None or workspace is not None:
            raise ValueError("write_store_audit: name a conversation, or a platform and workspace, not both")
        platform, workspace = conversation.platform, conversation.workspace_id
    await session.execute(
        insert(StoreAuditEntry).values(
            principal=principal,
            action=action,
            platform=platform,
            workspace_id=workspace,
            channel_id=None if conversation is None else conversation.channel_id,
            details=details,
        )
    )
