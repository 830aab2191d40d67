"""Stashbird's memory core: episodes, the provenance graph, search and lifecycle rules.

Knows nothing of Slack or Discord; takes commands over plain data and owns the database.
This package's names (those in ``__all__``) are its whole public API; every module
behind them is private and may move.
"""

from memory.api import (
    IngestReport,
    Principal,
    Rejected,
    about,
    ask,
    audit_conversations,
    backlog,
    build_communities,
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
    inbox_prune,
    inbox_put,
    ingest,
    messages,
    overview,
    pending,
    provenance,
    read_cursor,
    regenerate_communities,
    regenerate_summary,
    reindex,
    resolve_conversation,
    save_cursor,
    stats,
    stored_messages,
    update_communities,
    usage,
    vacuum,
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
from memory.consolidation.run import ConsolidationReport
from memory.core import Memory, open_memory
from memory.episodes.append import AppendResult, Message, validate_message
from memory.episodes.listing import StoredMessage
from memory.errors import (
    AccessDenied,
    ConfigurationError,
    ModelUnavailable,
    StashbirdError,
    UnknownConversation,
    ValidationError,
)
from memory.forgetting.commands import DeletionReport, EditReport
from memory.models.embedder import Embedder, LocalEmbedder, OpenAIEmbedder
from memory.models.llm import LLMClient, LLMError
from memory.params import MemoryParams
from memory.retrieval.answering import Answer, AnswerReply, Citation, QuotedMessage
from memory.store.backlog import Backlog
from memory.store.conversations import ConversationRef
from memory.store.embedded import (
    default_data_dir,
    drop_embedded_database,
    start_embedded,
)
from memory.store.erasure import MaintenanceReport
from memory.store.inbox import InboxBacklog, InboxClaim, InboxItem
from memory.validation import check_text, normalize_id, parse_time

__all__ = [
    "About",
    "AccessDenied",
    "Answer",
    "AnswerReply",
    "AppendResult",
    "Backlog",
    "Citation",
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
    "InboxItem",
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
    "Overview",
    "Principal",
    "Provenance",
    "QuotedMessage",
    "Rejected",
    "ReplayExtractor",
    "StashbirdError",
    "Stats",
    "StoredMessage",
    "UnknownConversation",
    "ValidationError",
    "about",
    "ask",
    "audit_conversations",
    "backlog",
    "build_communities",
    "check_text",
    "communities",
    "consolidate",
    "conversations",
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
    "inbox_prune",
    "inbox_put",
    "ingest",
    "messages",
    "normalize_id",
    "open_memory",
    "overview",
    "parse_time",
    "pending",
    "provenance",
    "read_cursor",
    "regenerate_communities",
    "regenerate_summary",
    "reindex",
    "resolve_conversation",
    "save_cursor",
    "start_embedded",
    "stats",
    "stored_messages",
    "update_communities",
    "usage",
    "vacuum",
    "validate_message",
]
