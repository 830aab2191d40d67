"""The memory core's one door: every caller (CLI, connectors, jobs, benchmarks) uses these.

Each command names the conversation (a ``ConversationRef``) and, keyword-only, the
``principal`` who asks; the principal is written to the audit log with what it did. A
conversation is resolved in one place (``resolve_conversation``): commands that add to
a conversation create it, commands that read or change it refuse an unknown one with
``UnknownConversation``. The modules behind this file are private and free to move.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from memory.errors import AccessDenied, ConfigurationError, UnknownConversation, ValidationError
from memory.limits import MAX_EVIDENCE_K
from memory.principal import Principal
from memory.store.conversations import delete_conversation, ensure_conversation, find_conversation, list_conversations
from memory.validation import check_json, check_text, normalize_id

if TYPE_CHECKING:
    from memory.audit.about import About
    from memory.audit.explain import Explanation
    from memory.audit.forgotten import DeletionLog
    from memory.audit.overview import ConversationSummary, Overview
    from memory.audit.provenance import Provenance
    from memory.audit.stats import Stats
    from memory.communities.run import CommunityReport
    from memory.consolidation.extraction import Extractor
    from memory.consolidation.run import ConsolidationReport
    from memory.core import Memory
    from memory.episodes.append import AppendResult, Message
    from memory.episodes.listing import StoredMessage
    from memory.forgetting.commands import DeletionReport, EditReport
    from memory.forgetting.policies import ForgettingPolicy
    from memory.retrieval.answering import Answer
    from memory.retrieval.recall import Recall
    from memory.retrieval.search import SearchResult
    from memory.retrieval.selection import SelectionWeights
    from memory.store.backlog import Backlog
    from memory.store.citus import CitusPlan
    from memory.store.conversations import ConversationRef
    from memory.store.erasure import MaintenanceReport
    from memory.store.inbox import InboxBacklog, InboxClaim, InboxEntry
    from memory.store.integrity import Integrity
    from memory.store.residue import WordResidue
    from memory.synthetic import SuppliedGraph, SuppliedIds

log = logging.getLogger("memory")


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

    def as_dict(self) -> dict[str, object]:
        return {
            "stored": self.stored,
            "duplicate": self.duplicate,
            "tombstoned": self.tombstoned,
            "rejected": [asdict(r) for r in self.rejected],
            "stopped": self.stopped,
            "attempted": self.attempted,
        }


@contextmanager
def _logged(operation: str, conversation_id: int, principal: Principal) -> Iterator[dict[str, Any]]:
    """Log one command: its operation, conversation, principal and duration, with the
    fields the command adds (structured, in ``extra``; one line of text as well)."""
    fields: dict[str, Any] = {}
    began = time.perf_counter()
    context = {"operation": operation, "conversation_id": conversation_id, "principal": str(principal)}
    try:
        yield fields
    except Exception as error:
        elapsed = round((time.perf_counter() - began) * 1000, 1)
        log.warning(
            "%s in conversation %s failed after %.1f ms: %s",
            operation,
            conversation_id,
            elapsed,
            error,
            extra={**context, "elapsed_ms": elapsed},
        )
        raise
    elapsed = round((time.perf_counter() - began) * 1000, 1)
    details = " ".join(f"{k}={v}" for k, v in fields.items())
    log.info(
        "%s in conversation %s took %.1f ms: %s",
        operation,
        conversation_id,
        elapsed,
        details,
        extra={**context, **fields, "elapsed_ms": elapsed},
    )


async def resolve_conversation(memory: Memory, conversation: ConversationRef, *, create: bool = False) -> int:
    """The conversation's id; an unknown one is created when ``create``, else refused."""
    async with memory.sessions.begin() as session:
        if create:
            return await ensure_conversation(session, conversation)
        found = await find_conversation(session, conversation)
    if found is None:
        raise UnknownConversation(str(conversation))
    return found


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
    nothing; an embedding endpoint that fails stops the run (``stopped``)."""
    from memory.episodes.ingest import ingest_messages

    conversation_id = await resolve_conversation(memory, conversation, create=True)
    with _logged("ingest", conversation_id, principal) as fields:
        run = await ingest_messages(memory, conversation_id, messages, on_batch=on_batch)
        counts = Counter(r.status for r in run.results)
        rejected = tuple(
            Rejected(index, r.platform_message_id, r.reason or "")
            for index, r in enumerate(run.results)
            if r.status == "rejected"
        )
        report = IngestReport(
            counts["stored"], counts["duplicate"], counts["tombstoned"], rejected, run.stopped, len(run.results)
        )
        fields.update(stored=report.stored, duplicate=report.duplicate, tombstoned=report.tombstoned, stopped=run.stopped)
    return report


async def prepare_consolidation(memory: Memory, *, principal: Principal) -> None:
    """Load what consolidation needs (offline: the spaCy model) now, in a thread, rather
    than during the first run: a process about to do background work pays for it before
    it takes work, not while a conversation waits."""
    from memory.consolidation.run import warm_up

    await asyncio.to_thread(warm_up, memory)


async def consolidate(
    memory: Memory,
    conversation: ConversationRef,
    *,
    principal: Principal,
    extractor: Extractor | None = None,
    on_progress: Callable[[int], object] | None = None,
    reconcile: bool = True,
    max_tokens: int | None = None,
) -> ConsolidationReport:
    """Turn the conversation's new and edited messages into entities and relations: all
    of them, or the oldest within ``max_tokens`` (the scheduler's cap on one run, so a
    conversation that fell behind catches up in turns with the others)."""
    from memory.consolidation.run import consolidate as _consolidate

    conversation_id = await resolve_conversation(memory, conversation)
    with _logged("consolidate", conversation_id, principal) as fields:
        report = await _consolidate(memory, conversation_id, extractor, on_progress, reconcile=reconcile, max_tokens=max_tokens)
        fields.update(episodes=report.episodes, chunks=report.chunks, llm_calls=report.llm_calls, stopped=report.stopped)
    return report


async def pending(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> int:
    """Messages waiting for consolidation (new, or edited since)."""
    from memory.consolidation.run import unconsolidated_count

    conversation_id = await resolve_conversation(memory, conversation)
    async with memory.sessions() as session:
        return await unconsolidated_count(session, conversation_id)


async def ask(
    memory: Memory,
    conversation: ConversationRef,
    question: str,
    *,
    principal: Principal,
    date: datetime | None = None,
    k: int | None = None,
    weights: SelectionWeights | None = None,
) -> Answer:
    """Answer from this conversation's memory only, citing messages; the trace is stored.
    ``weights``: the offline answer selection's weights and abstention thresholds (the
    answers benchmark sweeps them; the service keeps the calibrated defaults)."""
    from memory.retrieval.answering import answer

    check_text(question, "question")
    if k is not None and not 1 <= k <= MAX_EVIDENCE_K:
        raise ValidationError("k", f"evidence items must be between 1 and {MAX_EVIDENCE_K}, got {k}")
    conversation_id = await resolve_conversation(memory, conversation)
    with _logged("ask", conversation_id, principal) as fields:
        result = await answer(
            memory, conversation_id, conversation, question, principal=principal, date=date, k=k, weights=weights
        )
        fields.update(mode=result.mode, in_memory=result.in_memory, citations=len(result.citations))
    return result


async def forget(
    memory: Memory,
    conversation: ConversationRef,
    message_id: str,
    *,
    principal: Principal,
    policy: ForgettingPolicy = "stashbird",
) -> DeletionReport:
    """Delete a message and everything that rested only on it, in one transaction. A
    message not stored yet leaves a tombstone (its conversation is created for it, as a
    platform may report a deletion before the message), so it is never stored.

    ``policy`` other than ``stashbird`` deletes a stored message by one of the forgetting
    benchmark's comparison rules instead (``episode-only``, ``cascade``; no audit entry,
    and the report holds the chain and the documents removed only): never what the
    service does."""
    from memory.forgetting.commands import delete_episode
    from memory.forgetting.policies import delete_by_policy

    message_id = normalize_id(message_id, "message")
    conversation_id = await resolve_conversation(memory, conversation, create=principal.kind == "event")
    if policy != "stashbird":
        return await delete_by_policy(memory, conversation_id, message_id, policy)
    with _logged("forget", conversation_id, principal) as fields:
        report = await delete_episode(memory, conversation_id, message_id, principal=str(principal))
        fields.update(status=report.status, **report.retraction.counts())
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
    place and queue it for consolidation."""
    from memory.forgetting.commands import edit_episode

    message_id, text = normalize_id(message_id, "message"), check_text(text, "text")
    conversation_id = await resolve_conversation(memory, conversation)
    with _logged("edit", conversation_id, principal) as fields:
        report = await edit_episode(memory, conversation_id, message_id, text, principal=str(principal), edited_at=edited_at)
        fields.update(status=report.status, **report.retraction.counts())
    return report


async def facts(
    memory: Memory, conversation: ConversationRef, *, principal: Principal, include_superseded: bool = True
) -> list[dict[str, object]]:
    """Relations in creation order with their status and supporting message ids."""
    from memory.graph.reads import list_facts

    conversation_id = await resolve_conversation(memory, conversation)
    async with memory.sessions() as session:
        return await list_facts(session, conversation_id, include_superseded)


async def messages(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> list[dict[str, object]]:
    """The conversation's stored messages in chain order."""
    from memory.episodes.chain import chain

    conversation_id = await resolve_conversation(memory, conversation)
    async with memory.sessions() as session:
        return await chain(session, conversation_id)


async def usage(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> list[dict[str, object]]:
    """LLM and embedding calls and tokens by phase and operation."""
    from memory.store.ledger import usage_totals

    conversation_id = await resolve_conversation(memory, conversation)
    async with memory.sessions() as session:
        return await usage_totals(session, conversation_id)


async def drop_conversation(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> bool:
    """Remove a conversation and everything stored for it; False when there was none."""
    async with memory.sessions.begin() as session:
        return await delete_conversation(session, conversation)


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

    conversation_id = await resolve_conversation(memory, conversation)
    async with memory.sessions() as session:
        return await _stored_messages(session, conversation_id, since, thread_id)


def inbox_entry(
    conversation: ConversationRef, event_id: str, kind: str, payload: dict[str, Any], message_id: str | None = None
) -> InboxEntry:
    """A platform event ready for ``inbox_put`` (``message_id``: the message it is about).
    Ids are normalised as everywhere (so the delete of a message finds the events about
    it), and a payload the database cannot hold is refused (ValidationError): checked
    here, per event, so that one bad event never fails the others stored with it. Pure."""
    from memory.store.inbox import InboxEntry

    event_id = normalize_id(event_id, "event_id")
    message_id = None if message_id is None else normalize_id(message_id, "message")
    check_json(payload, "payload")
    return InboxEntry(conversation, event_id, kind, payload, message_id)


async def inbox_put(memory: Memory, entries: Sequence[InboxEntry], *, principal: Principal) -> list[bool]:
    """Store platform events durably before they are acknowledged, in one transaction
    (one commit: events that arrive together share a disk flush). Per entry, False when
    its conversation's inbox already holds its event id: a redelivery, which changes
    nothing."""
    from memory.store import inbox as _inbox

    async with memory.sessions.begin() as session:
        return await _inbox.put(session, entries)


async def inbox_conversations(memory: Memory, *, principal: Principal) -> list[ConversationRef]:
    """Conversations whose inbox has events ready to process."""
    from memory.store import inbox as _inbox

    async with memory.sessions() as session:
        return await _inbox.pending_conversations(session)


@asynccontextmanager
async def inbox_claim(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> AsyncIterator[InboxClaim | None]:
    """Hold a conversation's inbox for processing, or None when another process holds
    it. Held until the block ends or this process dies (the lock goes with its
    connection), so events are processed once at a time, in order, by one process."""
    from memory.store import inbox as _inbox

    conversation_id = await resolve_conversation(memory, conversation)
    async with _inbox.claim(memory.engine, conversation_id) as claim:
        yield claim


async def inbox_backlog(memory: Memory, *, principal: Principal) -> InboxBacklog:
    """Events waiting across all conversations, events given up on, age of the oldest."""
    from memory.store import inbox as _inbox

    async with memory.sessions() as session:
        return await _inbox.backlog(session)


async def inbox_prune(memory: Memory, older_than: timedelta, *, principal: Principal) -> int:
    """Drop inbox rows finished more than ``older_than`` ago; returns how many."""
    from memory.store import inbox as _inbox

    async with memory.sessions.begin() as session:
        return await _inbox.prune(session, older_than)


async def read_cursor(memory: Memory, conversation: ConversationRef, name: str, *, principal: Principal) -> dict[str, Any] | None:
    """A resumable job's saved position in this conversation (None: start afresh)."""
    from memory.store import inbox as _inbox

    async with memory.sessions() as session:
        conversation_id = await find_conversation(session, conversation)
        return None if conversation_id is None else await _inbox.read_cursor(session, conversation_id, name)


async def save_cursor(
    memory: Memory, conversation: ConversationRef, name: str, value: dict[str, Any] | None, *, principal: Principal
) -> None:
    """Save a resumable job's position (None: the job finished; forget it)."""
    from memory.store import inbox as _inbox

    async with memory.sessions.begin() as session:
        conversation_id = await ensure_conversation(session, conversation)
        await _inbox.write_cursor(session, conversation_id, name, value)


async def conversations(memory: Memory, *, principal: Principal, platform: str | None = None) -> list[ConversationRef]:
    """The conversations in memory (of one platform), in creation order."""
    async with memory.sessions() as session:
        return await list_conversations(session, platform)


async def backlog(memory: Memory, *, principal: Principal, conversation: ConversationRef | None = None) -> list[Backlog]:
    """Waiting background work per conversation (all of them, or one): consolidation
    lag, dirty communities, a dirty running summary, graph changes communities have not seen."""
    from memory.store.backlog import read_backlog

    conversation_id = None if conversation is None else await resolve_conversation(memory, conversation)
    async with memory.sessions() as session:
        return await read_backlog(session, conversation_id)


async def build_communities(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> CommunityReport:
    """Rebuild the conversation's communities by label propagation and summarise them."""
    from memory.communities import run as _communities

    conversation_id = await resolve_conversation(memory, conversation)
    report = await _communities.build(memory, conversation_id)
    report.add(await _communities.regenerate(memory, conversation_id))
    return report


async def update_communities(
    memory: Memory, conversation: ConversationRef, *, principal: Principal, rebuild_share: float | None = None
) -> CommunityReport:
    """After consolidation: new entities join their neighbours' community (which becomes
    dirty), or everything is rebuilt when the share of new entities passes ``rebuild_share``
    (default ``MemoryParams.community_rebuild_share``)."""
    from memory.communities import run as _communities

    conversation_id = await resolve_conversation(memory, conversation)
    return await _communities.update_membership(memory, conversation_id, rebuild_share)


async def regenerate_communities(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> CommunityReport:
    """Re-summarise dirty communities from their surviving members; dissolve those left
    with fewer than two."""
    from memory.communities import run as _communities

    conversation_id = await resolve_conversation(memory, conversation)
    return await _communities.regenerate(memory, conversation_id)


async def communities(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> list[dict[str, object]]:
    """The conversation's communities with their members; a dirty one shows no summary."""
    from memory.communities import run as _communities

    conversation_id = await resolve_conversation(memory, conversation)
    async with memory.sessions() as session:
        return await _communities.list_communities(session, conversation_id)


async def regenerate_summary(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> bool:
    """Rebuild a running summary a deletion cleared (False when it was not dirty)."""
    from memory.consolidation.summary import rebuild_summary
    from memory.store.backlog import read_backlog
    from memory.store.locks import LockPurpose, lock_conversation

    conversation_id = await resolve_conversation(memory, conversation)
    async with memory.sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.GRAPH)
        for item in await read_backlog(session, conversation_id):
            if item.summary_dirty:
                await rebuild_summary(memory, session, conversation_id)
                return True
    return False


# --- the audit: each query refuses a principal that may not audit the conversation ------


async def _audited(
    memory: Memory, conversation: ConversationRef, principal: Principal, query: str, arguments: dict[str, Any]
) -> int:
    """The conversation's id once the principal may audit it; every request, granted or
    refused, is written to the conversation's audit log (a refusal for a conversation
    that does not exist has no log to go to, and says only that it is refused)."""
    from memory.audit.access import log_request, may_audit

    granted = may_audit(principal.kind, principal.id, principal.role, memory.admin_ids)
    async with memory.sessions.begin() as session:
        conversation_id = await log_request(session, conversation, str(principal), granted, query, arguments)
    if not granted:
        raise AccessDenied(str(principal), str(conversation))
    if conversation_id is None:
        raise UnknownConversation(str(conversation))
    return conversation_id


async def about(memory: Memory, conversation: ConversationRef, name: str, *, principal: Principal) -> About:
    """Entities matching ``name`` (by name and by meaning), each with its current and
    superseded relations and the messages that support them."""
    from memory.audit.about import about as _about

    if not isinstance(name, str) or not name.strip():
        raise ValidationError("name", "is empty")
    # the name is embedded while the request is checked and logged (no data is read)
    conversation_id, embedded = await asyncio.gather(
        _audited(memory, conversation, principal, "about", {"name": name}), memory.embedder.embed([name.strip()])
    )
    return await _about(memory, conversation, conversation_id, name, embedded)


async def explain(memory: Memory, conversation: ConversationRef, answer_id: int, *, principal: Principal) -> Explanation:
    """A stored answer's trace; a withdrawn answer says which deleted message withdrew it."""
    from memory.audit.explain import explain as _explain

    conversation_id = await _audited(memory, conversation, principal, "explain", {"answer_id": answer_id})
    async with memory.sessions() as session:
        return await _explain(session, conversation, conversation_id, answer_id)


async def forgotten(
    memory: Memory, conversation: ConversationRef, *, principal: Principal, since: datetime | None = None, limit: int = 200
) -> DeletionLog:
    """Deletions and edits (newest first): when, which message, who asked, what they
    removed, kept, anchored and restored (ids and counts, never the deleted text)."""
    from memory.audit.forgotten import DeletionLog, deletion_log

    arguments = {"since": since.isoformat() if since else None, "limit": limit}
    conversation_id = await _audited(memory, conversation, principal, "forgotten", arguments)
    async with memory.sessions() as session:
        entries = await deletion_log(session, conversation_id, since, limit)
    return DeletionLog(str(conversation), since, tuple(entries))


async def provenance(memory: Memory, conversation: ConversationRef, message_id: str, *, principal: Principal) -> Provenance:
    """Everything derived from one message, and a dry run of its deletion computed by
    the deletion's own rules: what ``forget`` would remove, keep, anchor, restore and dirty."""
    from memory.audit.provenance import provenance as _provenance

    if not isinstance(message_id, str) or not message_id.strip():
        raise ValidationError("message", "a platform message id is required")
    conversation_id = await _audited(memory, conversation, principal, "provenance", {"message_id": message_id})
    return await _provenance(memory, conversation, conversation_id, message_id)


async def stats(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> Stats:
    """Messages, speakers, entities, anchors, relations, communities, consolidation lag,
    model usage by phase."""
    from memory.audit.stats import conversation_stats

    conversation_id = await _audited(memory, conversation, principal, "stats", {})
    async with memory.sessions() as session:
        return await conversation_stats(session, str(conversation), conversation_id)


async def overview(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> Overview:
    """The whole memory of a conversation, for the audit report."""
    from memory.audit.overview import overview as _overview

    conversation_id = await _audited(memory, conversation, principal, "overview", {})
    async with memory.sessions() as session:
        return await _overview(session, conversation, conversation_id)


async def audit_conversations(memory: Memory, *, principal: Principal) -> list[ConversationSummary]:
    """Every conversation in memory with its message count; only the operator or a
    configured admin id may list them (a platform admin is an admin of its own
    workspace only)."""
    from memory.audit.access import may_list
    from memory.audit.overview import conversation_summaries

    if not may_list(principal.kind, principal.id, memory.admin_ids):
        raise AccessDenied(str(principal), "*")
    async with memory.sessions() as session:
        return await conversation_summaries(session)


async def citus_plan(memory: Memory, *, principal: Principal, apply: bool = False) -> CitusPlan:
    """The plan that shards the memory on Citus by conversation (memory.store.citus):
    reference tables, then every other table distributed by ``conversation_id``,
    co-located, in foreign-key order. With ``apply``, runs the steps Citus has not done
    yet, each in its own transaction; refused without the extension or when the schema
    breaks a rule (the plan says which)."""
    from memory.store.citus import apply_plan as apply_citus_plan
    from memory.store.citus import read_plan as read_citus_plan

    async with memory.engine.connect() as connection:
        plan = await read_citus_plan(connection)
    if not apply:
        return plan
    if plan.citus is None:
        raise ConfigurationError("citus is not installed in this database (CREATE EXTENSION citus); --dry-run shows the plan")
    if plan.violations:
        raise ConfigurationError(f"the schema breaks {len(plan.violations)} Citus rules, first: {plan.violations[0]}")
    async with memory.engine.connect() as connection:
        await apply_citus_plan(connection, plan)
    log.info("citus_plan by %s: %s", principal, ", ".join(plan.applied) or "nothing left to do")
    return plan


async def vacuum(memory: Memory, *, principal: Principal) -> MaintenanceReport:
    """Plain VACUUM of the memory tables, after a batch of deletions: dead row versions
    and their index entries go (memory.store.erasure says what that does not promise)."""
    from memory.store import erasure

    return await erasure.vacuum(memory.engine)


async def erase(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> MaintenanceReport:
    """For operators who must guarantee physical removal of what was deleted from
    ``conversation``: the memory tables (every conversation's: Postgres rewrites whole
    tables) are rewritten with their live rows only, indexes rebuilt, then a CHECKPOINT.
    Blocks the memory tables while it runs; recorded in the conversation's audit log."""
    from memory.store import erasure
    from memory.store.audit import write_audit

    conversation_id = await resolve_conversation(memory, conversation)
    report = await erasure.erase(memory.engine)
    async with memory.sessions.begin() as session:
        details = {"seconds": report.seconds, "tables": report.tables}
        await write_audit(session, conversation_id, str(principal), "erase", details)
    return report


async def reindex(
    memory: Memory,
    conversation: ConversationRef | None = None,
    *,
    principal: Principal,
    on_batch: Callable[[int], object] | None = None,
) -> dict[str, int]:
    """Embed messages again from what is indexed now (needed once after migration 0004,
    which took the speaker's name out of message documents): one conversation, or every
    one (``None``), which also clears the store's mark of stale vectors. Returns the
    messages embedded, by conversation."""
    from memory.episodes.reindex import clear_stale_mark, reindex_episodes

    refs = [conversation] if conversation is not None else await conversations(memory, principal=principal)
    done = {}
    for ref in refs:
        done[str(ref)] = await reindex_episodes(memory, await resolve_conversation(memory, ref), on_batch)
    if conversation is None:
        await clear_stale_mark(memory)
    return done


async def recall(
    memory: Memory,
    conversation: ConversationRef,
    question: str,
    *,
    principal: Principal,
    date: datetime | None = None,
    k: int | None = None,
    search: str = "hybrid",
    kinds: Sequence[str] | None = None,
) -> Recall:
    """The evidence ``question`` brings back, without an answer: by the service's hybrid
    retrieval (over ``kinds`` of documents, all by default), or by a named baseline
    search (``full_text``, ``vector``: messages only)."""
    from memory.retrieval.recall import recall as _recall

    conversation_id = await resolve_conversation(memory, conversation)
    when, size = date or datetime.now(UTC), k or memory.params.evidence_k
    return await _recall(memory, conversation_id, question, when, size, search, kinds)


async def search_vector(
    memory: Memory, conversation: ConversationRef, question: str, vector: list[float], *, principal: Principal
) -> SearchResult:
    """The hybrid search for a query whose vector is given (a benchmark's synthetic
    conversation carries random vectors)."""
    from memory.retrieval.recall import search_with_vector

    conversation_id = await resolve_conversation(memory, conversation)
    return await search_with_vector(memory, conversation_id, question, vector)


async def integrity(memory: Memory, conversation: ConversationRef, *, principal: Principal) -> Integrity:
    """Relations without support and search documents of records that are gone."""
    from memory.store.integrity import check_integrity

    conversation_id = await resolve_conversation(memory, conversation)
    async with memory.sessions() as session:
        return await check_integrity(session, conversation_id)


async def residue(memory: Memory, pattern: str, *, principal: Principal) -> dict[str, set[str]]:
    """Every distinct match of the POSIX regex ``pattern`` in any text-like column of the
    whole store (all conversations), with where it was found: proof that deleted text
    survives nowhere."""
    from memory.store.residue import find_tokens

    async with memory.sessions() as session:
        return await find_tokens(session, pattern)


async def word_residue(
    memory: Memory,
    conversation: ConversationRef,
    gone_texts: Iterable[str],
    *,
    principal: Principal,
    ignore: Iterable[str] = (),
) -> WordResidue:
    """Words that only ``gone_texts`` (deleted or edited-away messages) said, less
    ``ignore``, and where in the conversation's rows any of them is still found."""
    from memory.store.residue import word_residue as _word_residue

    conversation_id = await resolve_conversation(memory, conversation)
    async with memory.sessions() as session:
        return await _word_residue(session, conversation_id, gone_texts, ignore)


async def load_supplied(
    memory: Memory,
    conversation: ConversationRef,
    messages: Sequence[Message],
    message_vectors: Sequence[Sequence[float]],
    graph: SuppliedGraph,
    vectors: Iterator[Sequence[float]],
    *,
    principal: Principal,
) -> SuppliedIds:
    """Benchmarks: store messages and a graph as given (see ``memory.synthetic``)."""
    from memory.synthetic import supply_graph

    conversation_id = await resolve_conversation(memory, conversation, create=True)
    return await supply_graph(memory, conversation_id, messages, message_vectors, graph, vectors)


async def load_bulk_messages(
    memory: Memory,
    conversation: ConversationRef,
    speaker: str,
    batches: Iterable[tuple[Sequence[str], Iterable[Iterable[float]]]],
    *,
    principal: Principal,
) -> None:
    """Benchmarks: many messages with given vectors, bulk-inserted and chained."""
    from memory.synthetic import bulk_messages

    conversation_id = await resolve_conversation(memory, conversation, create=True)
    await bulk_messages(memory, conversation_id, speaker, batches)


async def load_bulk_graph(memory: Memory, conversation: ConversationRef, size: int, *, principal: Principal) -> None:
    """Benchmarks: ``size`` messages and a proportional graph with random vectors."""
    from memory.synthetic import bulk_graph

    conversation_id = await resolve_conversation(memory, conversation, create=True)
    await bulk_graph(memory, conversation_id, size)
