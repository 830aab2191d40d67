"""The door every public command goes through: authorise, resolve, log, audit.

``async with door(memory, "forget", principal, conversation) as call:`` checks the
principal against the command's rule (memory/access.py) before anything is read, so an
unknown conversation is refused to whoever may not act on it rather than revealed;
resolves the conversation (creating it when the command adds to it); and when the block
ends logs one structured line (operation, conversation, principal, elapsed_ms, outcome,
and the fields the command noted) and writes the audit row of a command that changes or
reveals memory: to the conversation's audit log, or for a command of the whole store
(no conversation) to the store-wide one (memory/store/audit.py). A refusal is logged,
and written to the conversation's audit log when the conversation exists, to the
store-wide one for a command of the whole store.

A command that only polls (queues, cursors, counts: ``Audit.NONE``) logs at DEBUG, so
that a service with nothing to do prints nothing; every other command logs at INFO.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memory.access import ACCESS, EVERYWHERE, Audit, Rule, permits
from memory.errors import AccessDenied, StashbirdError, UnknownConversation
from memory.principal import Principal
from memory.store.audit import write_audit, write_store_audit
from memory.store.conversations import ConversationRef, ensure_conversation, find_conversation

if TYPE_CHECKING:
    from memory.core import Memory

log = logging.getLogger("memory")


@dataclass
class Call:
    """One command on its way through the door: the conversation's id (None for a
    command of the whole store) and what it reports for the log and audit row."""

    operation: str
    conversation_id: int | None
    arguments: dict[str, Any]
    fields: dict[str, Any] = field(default_factory=dict)

    def note(self, **fields: Any) -> None:
        """Add fields to the command's log line and audit row (ids and counts, no text)."""
        self.fields.update(fields)


async def resolve(memory: Memory, conversation: ConversationRef, *, create: bool = False) -> int:
    """The conversation's id; an unknown one is created when ``create``, else refused."""
    async with memory._sessions.begin() as session:
        if create:
            return await ensure_conversation(session, conversation)
        found = await find_conversation(session, conversation)
    if found is None:
        raise UnknownConversation(str(conversation))
    return found


@asynccontextmanager
async def door(
    memory: Memory,
    operation: str,
    principal: Principal,
    conversation: ConversationRef | None = None,
    *,
    create: bool = False,
    must_exist: bool = True,
    arguments: dict[str, Any] | None = None,
    owner: str | None = None,
    everywhere: bool = False,
) -> AsyncIterator[Call]:
    """Run one command (see the module's docstring); raises ``AccessDenied`` for a
    principal its rule refuses, ``UnknownConversation`` for a conversation not in memory
    (unless ``create``, or not ``must_exist``: then ``call.conversation_id`` is None).
    ``owner``: the platform user id of the one person whose data the command touches
    (an ``OWN`` grant allows that person only). ``everywhere``: the command reaches every
    conversation of the store, under its ``EVERYWHERE`` rule."""
    rule = EVERYWHERE[operation] if everywhere else ACCESS[operation]
    began = time.perf_counter()
    where = "*" if conversation is None else str(conversation)
    arguments = arguments or {}
    if not permits(rule, principal, memory.admin_ids, owner):
        await _refused(memory, rule, operation, principal, conversation, arguments)
        _log(logging.WARNING, operation, where, principal, began, "denied", {})
        raise AccessDenied(str(principal), where, operation, rule.allowed())
    try:
        conversation_id = None if conversation is None else await _find(memory, conversation, create, must_exist)
        call = Call(operation, conversation_id, arguments)
        yield call
    except StashbirdError as error:  # the caller's to report: refused input, not a fault
        _log(logging.INFO, operation, where, principal, began, f"rejected: {error}", {})
        raise
    except BaseException as error:
        _log(logging.WARNING, operation, where, principal, began, f"failed: {type(error).__name__}: {error}", {})
        raise
    if rule.audit is Audit.DOOR and (call.conversation_id is not None or conversation is None):
        async with memory._sessions.begin() as session:
            details = {"query": operation, "arguments": arguments, "result": call.fields}
            action = rule.action or operation
            if call.conversation_id is None:
                await write_store_audit(session, str(principal), action, details)
            else:
                await write_audit(session, call.conversation_id, str(principal), action, details)
    level = logging.DEBUG if rule.audit is Audit.NONE else logging.INFO
    _log(level, operation, where, principal, began, "ok", {"conversation_id": call.conversation_id, **call.fields})


async def _find(memory: Memory, conversation: ConversationRef, create: bool, must_exist: bool) -> int | None:
    if create or must_exist:
        return await resolve(memory, conversation, create=create)
    async with memory._sessions() as session:
        return await find_conversation(session, conversation)


async def _refused(
    memory: Memory,
    rule: Rule,
    operation: str,
    principal: Principal,
    conversation: ConversationRef | None,
    arguments: dict[str, Any],
) -> None:
    """Write the refusal to the conversation's audit log, when there is one, or to the
    store-wide log for a command of the whole store."""
    details = {"query": operation, "arguments": arguments}
    action = f"{rule.action or operation}_refused"
    async with memory._sessions.begin() as session:
        if conversation is None:
            await write_store_audit(session, str(principal), action, details)
            return
        conversation_id = await find_conversation(session, conversation)
        if conversation_id is not None:
            await write_audit(session, conversation_id, str(principal), action, details)


def _log(
    level: int, operation: str, where: str, principal: Principal, began: float, outcome: str, fields: dict[str, Any]
) -> None:
    """The command's one line: text for people, the same in ``extra`` for the JSON log."""
    elapsed = round((time.perf_counter() - began) * 1000, 1)
    details = "".join(f" {k}={v}" for k, v in fields.items() if k != "conversation_id")
    log.log(
        level,
        "%s in %s by %s: %s in %.1f ms%s",
        operation,
        where,
        principal,
        outcome,
        elapsed,
        details,
        extra={
            "operation": operation,
            "conversation": where,
            "principal": str(principal),
            "elapsed_ms": elapsed,
            "outcome": outcome,
            **fields,
        },
    )
