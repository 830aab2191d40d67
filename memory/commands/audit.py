"""The audit commands: what the memory holds about a conversation and why. Each reveals
memory, so each is granted to the operator and the conversation's admins only
(memory/access.py) and every request, granted or refused, is written to the
conversation's audit log with its arguments (the asker's own words and ids, never a
stored message's text)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from memory.door import door
from memory.errors import ValidationError
from memory.principal import Principal

if TYPE_CHECKING:
    from memory.audit.about import About
    from memory.audit.explain import Explanation
    from memory.audit.forgotten import DeletionLog
    from memory.audit.overview import ConversationSummary, Overview
    from memory.audit.provenance import Provenance
    from memory.audit.stats import Stats
    from memory.audit.store_log import StoreAuditLog
    from memory.core import Memory
    from memory.store.conversations import ConversationRef


async def about(memory: Memory, conversation: ConversationRef, name: str, *, principal: Principal) -> About:
    """Entities matching ``name`` (by name and by meaning), each with its current and
    superseded relations and the messages that support them."""
    from memory.audit.about import about as _about

    if not isinstance(name, str) or not name.strip():
        raise ValidationError("name", "is empty")
    async with door(memory, "about", principal, conversation, arguments={"name": name}) as call:
        assert call.conversation_id is not None
        embedded = await memory.embedder.embed([name.strip()])
        found = await _about(memory, conversation, call.conversation_id, name, embedded)
        call.note(entities=len(found.entities))
    return found


async def explain(memory: Memory, conversation: ConversationRef, answer_id: int, *, principal: Principal) -> Explanation:
    """A stored answer's trace; a withdrawn answer says which deleted message withdrew it."""
    from memory.audit.explain import explain as _explain

    async with door(memory, "explain", principal, conversation, arguments={"answer_id": answer_id}) as call:
        assert call.conversation_id is not None
        async with memory._sessions() as session:
            return await _explain(session, conversation, call.conversation_id, answer_id)


async def forgotten(
    memory: Memory, conversation: ConversationRef, *, principal: Principal, since: datetime | None = None, limit: int = 200
) -> DeletionLog:
    """Deletions and edits (newest first): when, which message, who asked, what they
    removed, kept, anchored and restored (ids and counts, never the deleted text); and
    the people of the conversation's workspace forgotten, opted out or back in, by whom."""
    from memory.audit.forgotten import DeletionLog, deletion_log
    from memory.audit.store_log import PEOPLE, store_log

    arguments = {"since": since.isoformat() if since else None, "limit": limit}
    async with door(memory, "forgotten", principal, conversation, arguments=arguments) as call:
        assert call.conversation_id is not None
        async with memory._sessions() as session:
            entries = await deletion_log(session, call.conversation_id, since, limit)
            people = await store_log(session, since, limit, conversation, actions=PEOPLE)
        call.note(entries=len(entries), people=len(people))
    return DeletionLog(str(conversation), since, tuple(entries), tuple(people))


async def store_audit(
    memory: Memory,
    *,
    principal: Principal,
    conversation: ConversationRef | None = None,
    since: datetime | None = None,
    limit: int = 200,
) -> StoreAuditLog:
    """The store-wide audit log (newest first): dropped conversations, people forgotten
    or opted out, the store-wide commands and refusals, who asked. With
    ``conversation``, what concerns it or its workspace, even once it is dropped: the
    operator's or a configured admin's alone, as every store-wide audit is."""
    from memory.audit.store_log import StoreAuditLog, store_log

    named = None if conversation is None else str(conversation)
    arguments = {"conversation": named, "since": since.isoformat() if since else None, "limit": limit}
    async with door(memory, "store_audit", principal, arguments=arguments) as call:
        async with memory._sessions() as session:
            entries = await store_log(session, since, limit, conversation)
        call.note(entries=len(entries))
    return StoreAuditLog(named, since, tuple(entries))


async def provenance(memory: Memory, conversation: ConversationRef, message_id: str, *, principal: Principal) -> Provenance:
    """Everything derived from one message, and a dry run of its deletion computed by
    the deletion's own rules: what ``forget`` would remove, keep, anchor, restore and dirty."""
    from memory.audit.provenance import provenance as _provenance

    if not isinstance(message_id, str) or not message_id.strip():
        raise ValidationError("message", "a platform message id is required")
    async with door(memory, "provenance", principal, conversation, arguments={"message_id": message_id}) as call:
        assert call.conversation_id is not None
        return await _provenance(memory, conversation, call.conversation_id, message_id)


async def stats(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> Stats:
    """Messages, speakers, entities, anchors, relations, communities, consolidation lag,
    model usage by phase."""
    from memory.audit.stats import conversation_stats

    async with door(memory, "stats", principal, conversation) as call:
        assert call.conversation_id is not None
        async with memory._sessions() as session:
            return await conversation_stats(session, conversation, call.conversation_id, memory.retention_days)


async def overview(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> Overview:
    """The whole memory of a conversation, for the audit report."""
    from memory.audit.overview import overview as _overview

    async with door(memory, "overview", principal, conversation) as call:
        assert call.conversation_id is not None
        async with memory._sessions() as session:
            return await _overview(session, conversation, call.conversation_id, memory.retention_days)


async def audit_conversations(memory: Memory, *, principal: Principal) -> list[ConversationSummary]:
    """Every conversation in memory with its message count; only the operator or a
    configured admin id may list them (a platform admin is an admin of its own
    workspace only)."""
    from memory.audit.overview import conversation_summaries

    async with door(memory, "audit_conversations", principal) as call:
        async with memory._sessions() as session:
            found = await conversation_summaries(session)
        call.note(conversations=len(found))
    return found


async def facts(
    memory: Memory, conversation: ConversationRef, *, principal: Principal, include_superseded: bool = True
) -> list[dict[str, object]]:
    """Relations in creation order with their status and supporting message ids."""
    from memory.graph.reads import list_facts

    async with door(memory, "facts", principal, conversation) as call:
        assert call.conversation_id is not None
        async with memory._sessions() as session:
            found = await list_facts(session, call.conversation_id, include_superseded)
        call.note(facts=len(found))
    return found


async def messages(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> list[dict[str, object]]:
    """The conversation's stored messages in chain order."""
    from memory.episodes.chain import chain

    async with door(memory, "messages", principal, conversation) as call:
        assert call.conversation_id is not None
        async with memory._sessions() as session:
            found = await chain(session, call.conversation_id)
        call.note(messages=len(found))
    return found


async def list_communities(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> list[dict[str, object]]:
    """The conversation's communities with their members; a dirty one shows no summary."""
    from memory.communities import run as _communities

    async with door(memory, "list_communities", principal, conversation) as call:
        assert call.conversation_id is not None
        async with memory._sessions() as session:
            found = await _communities.list_communities(session, call.conversation_id)
        call.note(communities=len(found))
    return found


async def usage(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> list[dict[str, object]]:
    """LLM and embedding calls and tokens by phase and operation."""
    from memory.store.ledger import usage_totals

    async with door(memory, "usage", principal, conversation) as call:
        assert call.conversation_id is not None
        async with memory._sessions() as session:
            return await usage_totals(session, call.conversation_id)
