"""Stashbird's memory core: episodes, the provenance graph, search and lifecycle rules.

Knows nothing of Slack or Discord (but where the Slack app's installations are kept,
AppInstallations); takes commands over plain data and owns the database.
This package's names (those in ``__all__``) are its whole public API; every module
behind them is private and may move.

Each name is imported when first used (PEP 562), so that a command loads only the
modules it needs (``stashbird ask`` never imports the audit, consolidation or
communities code). The imports under ``TYPE_CHECKING`` below are the one list of where
each name lives: type checkers read them, and ``__getattr__`` reads them from this
file's source.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
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


def _where() -> dict[str, tuple[str, str]]:
    """Public name -> (module, attribute), from the ``TYPE_CHECKING`` imports above."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    return {
        alias.asname or alias.name: (node.module, alias.name)
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


_WHERE: dict[str, tuple[str, str]] = {}


def __getattr__(name: str) -> object:
    if not _WHERE:
        _WHERE.update(_where())
    if name not in _WHERE:
        raise AttributeError(f"module 'memory' has no attribute {name!r}")
    module, attribute = _WHERE[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # found at once from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
