"""Stashbird's memory core: episodes, the provenance graph, search and lifecycle rules.

Knows nothing of Slack or Discord; takes commands over plain data and owns the database.
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
        about,
        ask,
        audit_conversations,
        backlog,
        build_communities,
        citus_plan,
        communities,
        consolidate,
        conversations,
        drop_conversation,
        edit,
        erase,
        explain,
        facts,
        forget,
        forgotten,
        inbox_backlog,
        inbox_claim,
        inbox_conversations,
        inbox_entry,
        inbox_prune,
        inbox_put,
        ingest,
        integrity,
        load_bulk_graph,
        load_bulk_messages,
        load_supplied,
        messages,
        overview,
        pending,
        prepare_consolidation,
        provenance,
        read_cursor,
        recall,
        regenerate_communities,
        regenerate_summary,
        reindex,
        residue,
        resolve_conversation,
        save_cursor,
        search_vector,
        stats,
        stored_messages,
        update_communities,
        usage,
        vacuum,
        word_residue,
    )
    from memory.audit.about import About
    from memory.audit.explain import Explanation
    from memory.audit.forgotten import DeletionLog
    from memory.audit.overview import ConversationSummary, Overview
    from memory.audit.provenance import Provenance
    from memory.audit.stats import Stats
    from memory.communities.run import CommunityReport
    from memory.consolidation.extraction import (
        Extractor,
        LLMExtractor,
        OfflineExtractor,
        ReplayExtractor,
    )
    from memory.consolidation.extraction.offline import analyse as offline_findings
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
    from memory.forgetting.commands import DeletionReport, EditReport
    from memory.forgetting.policies import ForgettingPolicy
    from memory.graph.reconcile import name_ratio, normalize_name, normalize_predicate
    from memory.models.embedder import Embedder, LocalEmbedder, OpenAIEmbedder
    from memory.models.llm import OPERATION_HEADER, LLMClient
    from memory.models.tokens import count_tokens
    from memory.params import MemoryParams
    from memory.principal import Principal
    from memory.retrieval.answering import NOT_IN_MEMORY, Answer, AnswerReply, Citation, QuotedMessage, baseline_reply
    from memory.retrieval.calibration import Labelled, calibrate
    from memory.retrieval.recall import Recall
    from memory.retrieval.search import SearchResult
    from memory.retrieval.selection import AbstentionRule, SelectionWeights
    from memory.store.backlog import Backlog
    from memory.store.citus import CitusPlan
    from memory.store.conversations import ConversationRef
    from memory.store.embedded import (
        default_data_dir,
        drop_embedded_database,
        start_embedded,
    )
    from memory.store.erasure import MaintenanceReport
    from memory.store.inbox import InboxBacklog, InboxClaim, InboxEntry, InboxItem
    from memory.store.integrity import Integrity
    from memory.store.residue import WordResidue
    from memory.synthetic import (
        SuppliedCommunity,
        SuppliedEntity,
        SuppliedGraph,
        SuppliedIds,
        SuppliedRelation,
    )
    from memory.validation import check_text, normalize_id, parse_time

__all__ = [
    "About",
    "AbstentionRule",
    "AccessDenied",
    "Answer",
    "AnswerReply",
    "AppendResult",
    "Backlog",
    "Citation",
    "CitusPlan",
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
    "ForgettingPolicy",
    "InboxBacklog",
    "InboxClaim",
    "InboxEntry",
    "InboxItem",
    "IngestReport",
    "Integrity",
    "LLMClient",
    "LLMError",
    "LLMExtractor",
    "Labelled",
    "LocalEmbedder",
    "MaintenanceReport",
    "Memory",
    "MemoryParams",
    "Message",
    "ModelUnavailable",
    "NOT_IN_MEMORY",
    "OPERATION_HEADER",
    "OfflineExtractor",
    "OpenAIEmbedder",
    "Overview",
    "Principal",
    "Provenance",
    "QuotedMessage",
    "Recall",
    "Rejected",
    "ReplayExtractor",
    "SearchResult",
    "SelectionWeights",
    "StashbirdError",
    "Stats",
    "StoredMessage",
    "SuppliedCommunity",
    "SuppliedEntity",
    "SuppliedGraph",
    "SuppliedIds",
    "SuppliedRelation",
    "UnknownConversation",
    "ValidationError",
    "WordResidue",
    "about",
    "ask",
    "audit_conversations",
    "backlog",
    "baseline_reply",
    "build_communities",
    "calibrate",
    "check_text",
    "citus_plan",
    "communities",
    "consolidate",
    "conversations",
    "count_tokens",
    "default_data_dir",
    "drop_conversation",
    "drop_embedded_database",
    "edit",
    "erase",
    "explain",
    "facts",
    "forget",
    "forgotten",
    "inbox_backlog",
    "inbox_claim",
    "inbox_conversations",
    "inbox_entry",
    "inbox_prune",
    "inbox_put",
    "ingest",
    "integrity",
    "load_bulk_graph",
    "load_bulk_messages",
    "load_supplied",
    "messages",
    "name_ratio",
    "normalize_id",
    "normalize_name",
    "normalize_predicate",
    "offline_findings",
    "open_memory",
    "overview",
    "parse_time",
    "pending",
    "prepare_consolidation",
    "provenance",
    "read_cursor",
    "recall",
    "regenerate_communities",
    "regenerate_summary",
    "reindex",
    "residue",
    "resolve_conversation",
    "save_cursor",
    "search_vector",
    "start_embedded",
    "stats",
    "stored_messages",
    "update_communities",
    "usage",
    "vacuum",
    "validate_message",
    "word_residue",
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
# ``communities`` names a subpackage and a command. Importing a subpackage binds its name
# here, over the command's, so the subpackage (a docstring) is imported now and its
# binding dropped: the name is the command's.
importlib.import_module("memory.communities")
del globals()["communities"]


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
