"""The audit log: who did what to a conversation, written in the transaction that did it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.schema import AuditEntry


async def write_audit(session: AsyncSession, conversation_id: int, principal: str, action: str, details: dict[str, Any]) -> None:
    """One entry: ``principal`` in its ``kind:id`` form, the action and what it touched."""
    await session.execute(
        insert(AuditEntry).values(conversation_id=conversation_id, principal=principal, action=action, details=details)
    )
