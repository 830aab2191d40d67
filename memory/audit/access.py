"""Who may audit a conversation, and the audit log's record of each request.

Allowed: the operator (the command line, which has database access anyway), a platform
user whose role the platform reports as ``admin`` (the chat layer passes the role of the
user in that conversation's workspace), or a platform user id configured as an admin
(``Memory.admin_ids``, from STASHBIRD_ADMIN_IDS). Events and jobs never audit. Every
request is logged, granted (``audit``) or refused (``audit_refused``), with the query's
name and arguments (the asker's own words and ids, never a stored message's text).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.audit import write_audit
from memory.store.conversations import ConversationRef, find_conversation

GRANTED = "audit"
REFUSED = "audit_refused"


def may_audit(kind: str, principal_id: str, role: str, admin_ids: frozenset[str]) -> bool:
    """Pure: whether a principal (its kind, id and platform role) may audit."""
    if kind == "operator":
        return True
    return kind == "user" and (role == "admin" or principal_id in admin_ids)


def may_list(kind: str, principal_id: str, admin_ids: frozenset[str]) -> bool:
    """Pure: whether a principal may list every conversation: a platform role is an admin
    of one workspace or channel only, so only the operator and configured admins may."""
    return kind == "operator" or (kind == "user" and principal_id in admin_ids)


async def log_request(
    session: AsyncSession, conversation: ConversationRef, principal: str, granted: bool, query: str, arguments: dict[str, Any]
) -> int | None:
    """Log the request in the named conversation's audit log and return the
    conversation's id; None when there is no such conversation, and so nothing logged."""
    conversation_id = await find_conversation(session, conversation)
    if conversation_id is not None:
        details = {"query": query, "arguments": arguments}
        await write_audit(session, conversation_id, principal, GRANTED if granted else REFUSED, details)
    return conversation_id
