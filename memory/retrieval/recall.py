"""Recall: the evidence a question brings back, without answering it.

``hybrid`` is what the answerer sees (the retrieval pipeline without its LLM steps,
then evidence assembly); a named search preset (``full_text``, ``vector``) is one plain
search of the messages, assembled without chain surroundings: the raw-turn baselines
the retrieval benchmark compares with.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from memory.core import Memory
from memory.models.tokens import count_tokens
from memory.retrieval.evidence import EvidenceItem, assemble, format_evidence, leading
from memory.retrieval.pipeline import retrieve, service_configs, speaker_names
from memory.retrieval.search import PRESETS, QueryVariant, SearchResult, search
from memory.store.documents import KINDS

RECALL_SEARCHES = ("hybrid", *PRESETS)


@dataclass(frozen=True)
class Recall:
    question: str
    items: list[EvidenceItem]
    search_ms: float  # the search alone, without assembly (what the retrieval benchmark times)

    def first(self, k: int | None = None) -> list[EvidenceItem]:
        """The first ``k`` items as ``assemble`` chooses them (all of them without ``k``)."""
        return self.items if k is None else self.items[: leading([item.kind for item in self.items], k)]

    def message_ids(self, k: int | None = None) -> set[str]:
        """The messages the first ``k`` items show (all of them without ``k``)."""
        return {episode.platform_message_id for item in self.first(k) for episode in item.episodes}

    def tokens(self, k: int | None = None) -> int:
        """The size of the first ``k`` items as the answerer's prompt shows them."""
        return count_tokens(format_evidence(self.first(k)))


async def recall(
    memory: Memory,
    conversation_id: int,
    question: str,
    question_date: datetime,
    k: int,
    searched: str = "hybrid",
    kinds: Sequence[str] | None = None,
    thread: str | None = None,
) -> Recall:
    """The first ``k`` evidence items for ``question`` by the ``searched`` search (the
    hybrid one over ``kinds`` of documents, all by default, asked in ``thread`` if given)."""
    if searched == "hybrid":
        began = time.perf_counter()
        retrieval = await retrieve(memory, conversation_id, question, question_date, kinds=kinds or KINDS, thread=thread)
        elapsed = (time.perf_counter() - began) * 1000
        async with memory._sessions() as session:
            items = await assemble(session, conversation_id, retrieval.candidates, k)
        return Recall(question, items, elapsed)
    config = replace(PRESETS[searched], top=k)
    # A full-text search needs no query vector: none is computed for it.
    vector = (await memory.embedder.embed([question])).vectors[0] if "vector" in config.methods else []
    async with memory._sessions.begin() as session:
        began = time.perf_counter()
        found = await search(session, conversation_id, [QueryVariant(question, vector)], config)
        elapsed = (time.perf_counter() - began) * 1000
        items = await assemble(session, conversation_id, found.candidates, k, context_items=0)
    return Recall(question, items, elapsed)


async def search_with_vector(memory: Memory, conversation_id: int, question: str, vector: list[float]) -> SearchResult:
    """The service's hybrid search (no time or speaker hints; the neighbours' share as
    the conversation's speakers allow, as ``retrieve`` reads them) for a query whose
    vector is given: what the retrieval benchmark times on its synthetic conversation,
    whose documents carry random vectors, and ``bench scale`` on its store."""
    async with memory._sessions.begin() as session, memory._sessions() as text_session:
        hybrid, _ = service_configs(memory.params, len(await speaker_names(session, conversation_id)))
        return await search(session, conversation_id, [QueryVariant(question, vector)], hybrid, text_session=text_session)
