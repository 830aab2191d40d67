"""Stashbird's memory core: episodes, the provenance graph, search and lifecycle rules.

Knows nothing of Slack or Discord; takes commands over plain data and owns the database.
This package's names (those in ``__all__``) are its whole public API; every module
behind them is private and may move.
"""

from memory.api import (
    IngestReport,
    Principal,
    ask,
    backlog,
    build_communities,
    communities,
    consolidate,
    conversations,
    drop_conversation,
    edit,
    erase,
    facts,
    forget,
    inbox_backlog,
    inbox_claim,
    inbox_conversations,
    inbox_prune,
    inbox_put,
    ingest,
    messages,
    pending,
    read_cursor,
    regenerate_communities,
    regenerate_summary,
    resolve_conversation,
    save_cursor,
    stored_messages,
    update_communities,
    usage,
    vacuum,
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
from memory.episodes.append import AppendResult, Message, parse_time, validate_message
from memory.episodes.listing import StoredMessage
from memory.errors import (
    ConfigurationError,
    StashbirdError,
    UnknownConversation,
    ValidationError,
)
from memory.forgetting.commands import DeletionReport, EditReport
from memory.models.embedder import Embedder, LocalEmbedder, OpenAIEmbedder
from memory.models.llm import LLMClient, LLMError
from memory.params import MemoryParams
from memory.retrieval.answering import Answer, Citation
from memory.store.backlog import Backlog
from memory.store.conversations import ConversationRef
from memory.store.embedded import (
    default_data_dir,
    drop_embedded_database,
    start_embedded,
)
from memory.store.erasure import MaintenanceReport
from memory.store.inbox import InboxBacklog, InboxClaim, InboxItem

__all__ = [
    "Answer",
    "AppendResult",
    "Backlog",
    "Citation",
    "CommunityReport",
    "ConfigurationError",
    "ConsolidationReport",
    "ConversationRef",
    "DeletionReport",
    "EditReport",
    "Embedder",
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
    "OfflineExtractor",
    "OpenAIEmbedder",
    "Principal",
    "ReplayExtractor",
    "StashbirdError",
    "StoredMessage",
    "UnknownConversation",
    "ValidationError",
    "ask",
    "backlog",
    "build_communities",
    "communities",
    "consolidate",
    "conversations",
    "default_data_dir",
    "drop_conversation",
    "drop_embedded_database",
    "edit",
    "erase",
    "facts",
    "forget",
    "inbox_backlog",
    "inbox_claim",
    "inbox_conversations",
    "inbox_prune",
    "inbox_put",
    "ingest",
    "messages",
    "open_memory",
    "parse_time",
    "pending",
    "read_cursor",
    "regenerate_communities",
    "regenerate_summary",
    "resolve_conversation",
    "save_cursor",
    "start_embedded",
    "stored_messages",
    "update_communities",
    "usage",
    "vacuum",
    "validate_message",
]
