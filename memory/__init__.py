"""Stashbird's memory core: episodes, the provenance graph, search and lifecycle rules.

Knows nothing of Slack or Discord (but where the Slack app's installations are kept,
AppInstallations); takes commands over plain data and owns the database.
This package's names (those in ``__all__``) are its whole public API; every module
behind them is private and may move.

Each name is imported when first used (PEP 562), so that a command loads only the
modules it needs (``stashbird ask`` never imports the audit, consolidation or
communities code): ``__getattr__`` finds each name's module in ``_WHERE``, a plain
table, so that nothing reads this file's source at run time. The imports under
``TYPE_CHECKING`` say the same for type checkers; tests/architecture/test_public_imports.py holds
them, ``_WHERE`` and ``__all__`` to one another.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.api import (
        IngestReport,
        Rejected,
        ask,
        conversations,
        drop_conversation,
        edit,
        forget,
        ingest,
        resolve_conversation,
        stored_messages,
    )
    from memory.audit.about import About
    from memory.audit.explain import Explanation
    from memory.audit.forgotten import DeletionLog
    from memory.audit.overview import ConversationSummary, Overview
    from memory.audit.provenance import Provenance
    from memory.audit.stats import Stats
    from memory.audit.store_log import StoreAuditLog, StoreAuditRow
    from memory.commands.audit import (
        about,
        audit_conversations,
        explain,
        facts,
        forgotten,
        list_communities,
        messages,
        overview,
        provenance,
        stats,
        store_audit,
        usage,
    )
    from memory.commands.claims import claim_work, last_runs, release_claim, renew_claim
    from memory.commands.inbox import (
        database_unreachable,
        inbox_backlog,
        inbox_claim,
        inbox_conversations,
        inbox_entry,
        inbox_prune,
        inbox_put,
        outbox_settle,
        outbox_take,
        read_cursor,
        save_cursor,
    )
    from memory.commands.presence import set_bot_present
    from memory.commands.work import (
        backlog,
        build_communities,
        citus_plan,
        consolidate,
        defer_backlog,
        due_backlog,
        erase,
        index_conversation,
        pending,
        prepare_consolidation,
        regenerate_communities,
        regenerate_summary,
        reindex,
        update_communities,
        vacuum,
        waiting_backlog,
    )
    from memory.communities.run import CommunityReport
    from memory.consolidation.extraction import (
        Extractor,
        LLMExtractor,
        OfflineExtractor,
        ReplayExtractor,
    )
    from memory.consolidation.run import ConsolidationReport
    from memory.core import Memory, open_memory
    from memory.episodes.append import AppendResult, Message, validate_message
    from memory.episodes.listing import StoredMessage
    from memory.errors import (
        AccessDenied,
        ConfigurationError,
        LLMError,
        ModelUnavailable,
        StashbirdError,
        UnknownConversation,
        ValidationError,
    )
    from memory.forgetting.deletion import DeletionReport, EditReport
    from memory.models.embedder import Embedder, LocalEmbedder, OpenAIEmbedder
    from memory.models.llm import LLMClient
    from memory.params import MemoryParams
    from memory.principal import Principal
    from memory.privacy.commands import (
        RetentionReport,
        apply_retention,
        forget_author,
        optout_status,
        retention,
        set_optout,
        set_retention,
        watch_retention_default,
    )
    from memory.privacy.person import PersonFact, PersonForgetting
    from memory.privacy.retention import Retention, parse_days
    from memory.retrieval.answering import Answer, AnswerReply, Citation, QuotedMessage
    from memory.store.backlog import Backlog, Waiting
    from memory.store.citus import CitusPlan
    from memory.store.claims import Claim, RunRecord
    from memory.store.conversations import ConversationRef, Workspace
    from memory.store.embedded import default_data_dir, start_embedded
    from memory.store.erasure import MaintenanceReport
    from memory.store.inbox import InboxBacklog, InboxClaim, InboxEntry, InboxItem, OutboxItem
    from memory.store.installations import AppInstallations
    from memory.store.vector_indexes import IndexReport
    from memory.validation import check_text, normalize_id, parse_time

__all__ = [
    "About",
    "AccessDenied",
    "Answer",
    "AnswerReply",
    "AppInstallations",
    "AppendResult",
    "Backlog",
    "Citation",
    "CitusPlan",
    "Claim",
    "CommunityReport",
    "ConfigurationError",
    "ConsolidationReport",
    "ConversationRef",
    "ConversationSummary",
    "DeletionLog",
    "DeletionReport",
    "EditReport",
    "Embedder",
    "Explanation",
    "Extractor",
    "InboxBacklog",
    "InboxClaim",
    "InboxEntry",
    "InboxItem",
    "IndexReport",
    "IngestReport",
    "LLMClient",
    "LLMError",
    "LLMExtractor",
    "LocalEmbedder",
    "MaintenanceReport",
    "Memory",
    "MemoryParams",
    "Message",
    "ModelUnavailable",
    "OfflineExtractor",
    "OpenAIEmbedder",
    "OutboxItem",
    "Overview",
    "PersonFact",
    "PersonForgetting",
    "Principal",
    "Provenance",
    "QuotedMessage",
    "Rejected",
    "ReplayExtractor",
    "Retention",
    "RetentionReport",
    "RunRecord",
    "StashbirdError",
    "Stats",
    "StoreAuditLog",
    "StoreAuditRow",
    "StoredMessage",
    "UnknownConversation",
    "ValidationError",
    "Waiting",
    "Workspace",
    "about",
    "apply_retention",
    "ask",
    "audit_conversations",
    "backlog",
    "build_communities",
    "check_text",
    "citus_plan",
    "claim_work",
    "consolidate",
    "conversations",
    "database_unreachable",
    "default_data_dir",
    "defer_backlog",
    "drop_conversation",
    "due_backlog",
    "edit",
    "erase",
    "explain",
    "facts",
    "forget",
    "forget_author",
    "forgotten",
    "inbox_backlog",
    "inbox_claim",
    "inbox_conversations",
    "inbox_entry",
    "inbox_prune",
    "inbox_put",
    "index_conversation",
    "ingest",
    "last_runs",
    "list_communities",
    "messages",
    "normalize_id",
    "open_memory",
    "optout_status",
    "outbox_settle",
    "outbox_take",
    "overview",
    "parse_days",
    "parse_time",
    "pending",
    "prepare_consolidation",
    "provenance",
    "read_cursor",
    "regenerate_communities",
    "regenerate_summary",
    "reindex",
    "release_claim",
    "renew_claim",
    "resolve_conversation",
    "retention",
    "save_cursor",
    "set_bot_present",
    "set_optout",
    "set_retention",
    "start_embedded",
    "stats",
    "store_audit",
    "stored_messages",
    "update_communities",
    "usage",
    "vacuum",
    "validate_message",
    "waiting_backlog",
    "watch_retention_default",
]


# Public name -> the module that defines it.
_WHERE: dict[str, str] = {
    "About": "memory.audit.about",
    "AccessDenied": "memory.errors",
    "Answer": "memory.retrieval.answering",
    "AnswerReply": "memory.retrieval.answering",
    "AppInstallations": "memory.store.installations",
    "AppendResult": "memory.episodes.append",
    "Backlog": "memory.store.backlog",
    "Citation": "memory.retrieval.answering",
    "CitusPlan": "memory.store.citus",
    "Claim": "memory.store.claims",
    "CommunityReport": "memory.communities.run",
    "ConfigurationError": "memory.errors",
    "ConsolidationReport": "memory.consolidation.run",
    "ConversationRef": "memory.store.conversations",
    "ConversationSummary": "memory.audit.overview",
    "DeletionLog": "memory.audit.forgotten",
    "DeletionReport": "memory.forgetting.deletion",
    "EditReport": "memory.forgetting.deletion",
    "Embedder": "memory.models.embedder",
    "Explanation": "memory.audit.explain",
    "Extractor": "memory.consolidation.extraction",
    "InboxBacklog": "memory.store.inbox",
    "InboxClaim": "memory.store.inbox",
    "InboxEntry": "memory.store.inbox",
    "InboxItem": "memory.store.inbox",
    "IndexReport": "memory.store.vector_indexes",
    "IngestReport": "memory.api",
    "LLMClient": "memory.models.llm",
    "LLMError": "memory.errors",
    "LLMExtractor": "memory.consolidation.extraction",
    "LocalEmbedder": "memory.models.embedder",
    "MaintenanceReport": "memory.store.erasure",
    "Memory": "memory.core",
    "MemoryParams": "memory.params",
    "Message": "memory.episodes.append",
    "ModelUnavailable": "memory.errors",
    "OfflineExtractor": "memory.consolidation.extraction",
    "OpenAIEmbedder": "memory.models.embedder",
    "OutboxItem": "memory.store.inbox",
    "Overview": "memory.audit.overview",
    "PersonFact": "memory.privacy.person",
    "PersonForgetting": "memory.privacy.person",
    "Principal": "memory.principal",
    "Provenance": "memory.audit.provenance",
    "QuotedMessage": "memory.retrieval.answering",
    "Rejected": "memory.api",
    "ReplayExtractor": "memory.consolidation.extraction",
    "Retention": "memory.privacy.retention",
    "RetentionReport": "memory.privacy.commands",
    "RunRecord": "memory.store.claims",
    "StashbirdError": "memory.errors",
    "Stats": "memory.audit.stats",
    "StoreAuditLog": "memory.audit.store_log",
    "StoreAuditRow": "memory.audit.store_log",
    "StoredMessage": "memory.episodes.listing",
    "UnknownConversation": "memory.errors",
    "ValidationError": "memory.errors",
    "Waiting": "memory.store.backlog",
    "Workspace": "memory.store.conversations",
    "about": "memory.commands.audit",
    "apply_retention": "memory.privacy.commands",
    "ask": "memory.api",
    "audit_conversations": "memory.commands.audit",
    "backlog": "memory.commands.work",
    "build_communities": "memory.commands.work",
    "check_text": "memory.validation",
    "citus_plan": "memory.commands.work",
    "claim_work": "memory.commands.claims",
    "consolidate": "memory.commands.work",
    "conversations": "memory.api",
    "database_unreachable": "memory.commands.inbox",
    "default_data_dir": "memory.store.embedded",
    "defer_backlog": "memory.commands.work",
    "drop_conversation": "memory.api",
    "due_backlog": "memory.commands.work",
    "edit": "memory.api",
    "erase": "memory.commands.work",
    "explain": "memory.commands.audit",
    "facts": "memory.commands.audit",
    "forget": "memory.api",
    "forget_author": "memory.privacy.commands",
    "forgotten": "memory.commands.audit",
    "inbox_backlog": "memory.commands.inbox",
    "inbox_claim": "memory.commands.inbox",
    "inbox_conversations": "memory.commands.inbox",
    "inbox_entry": "memory.commands.inbox",
    "inbox_prune": "memory.commands.inbox",
    "inbox_put": "memory.commands.inbox",
    "index_conversation": "memory.commands.work",
    "ingest": "memory.api",
    "last_runs": "memory.commands.claims",
    "list_communities": "memory.commands.audit",
    "messages": "memory.commands.audit",
    "normalize_id": "memory.validation",
    "open_memory": "memory.core",
    "optout_status": "memory.privacy.commands",
    "outbox_settle": "memory.commands.inbox",
    "outbox_take": "memory.commands.inbox",
    "overview": "memory.commands.audit",
    "parse_days": "memory.privacy.retention",
    "parse_time": "memory.validation",
    "pending": "memory.commands.work",
    "prepare_consolidation": "memory.commands.work",
    "provenance": "memory.commands.audit",
    "read_cursor": "memory.commands.inbox",
    "regenerate_communities": "memory.commands.work",
    "regenerate_summary": "memory.commands.work",
    "reindex": "memory.commands.work",
    "release_claim": "memory.commands.claims",
    "renew_claim": "memory.commands.claims",
    "resolve_conversation": "memory.api",
    "retention": "memory.privacy.commands",
    "save_cursor": "memory.commands.inbox",
    "set_bot_present": "memory.commands.presence",
    "set_optout": "memory.privacy.commands",
    "set_retention": "memory.privacy.commands",
    "start_embedded": "memory.store.embedded",
    "stats": "memory.commands.audit",
    "store_audit": "memory.commands.audit",
    "stored_messages": "memory.api",
    "update_communities": "memory.commands.work",
    "usage": "memory.commands.audit",
    "vacuum": "memory.commands.work",
    "validate_message": "memory.episodes.append",
    "waiting_backlog": "memory.commands.work",
    "watch_retention_default": "memory.privacy.commands",
}


def __getattr__(name: str) -> object:
    if name not in _WHERE:
        raise AttributeError(f"module 'memory' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value  # found at once from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
