"""Answering a question from one conversation's memory, with citations and a trace.

With an LLM: decompose (multi-entity, temporal, compound questions), hybrid search,
rerank the best fused candidates, answer from the evidence only, citing it, or say
plainly that memory does not hold the answer. Without an LLM: no decomposition or
rerank; the answer is the best evidence itself, quoted with speaker and date, or "not
in memory" when nothing relevant scores above the relevance floor.

Every answer stores its trace (question, sub-queries, answer, usage) in
``answer_traces``, the episodes its evidence showed in ``answer_evidence`` (so deleting
a message withdraws the answers that used it), an ``answer`` entry in the audit log and
its usage in the ledger (phase ``retrieval``), all in one transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import insert

from memory.core import Memory
from memory.errors import StashbirdError, ValidationError
from memory.retrieval.evidence import (
    EvidenceItem,
    assemble,
    format_evidence,
    labelled_episodes,
)
from memory.retrieval.llm_steps import decompose, needs_decomposition, rerank
from memory.retrieval.pipeline import retrieve
from memory.store.conversations import ConversationRef, find_conversation
from memory.store.ledger import Usage, record_usage
from memory.store.schema import AnswerEvidence, AnswerTrace, AuditEntry

log = logging.getLogger(__name__)

NOT_IN_MEMORY = "I don't have that in memory: nothing stored in this conversation answers it."
# Offline relevance floor: the best evidence must reach this cosine similarity
# (all-MiniLM-L6-v2; unrelated sentences sit around 0-0.25, paraphrases above 0.5), or
# match the question's words in full text at this ts_rank_cd (two or more query words
# close together).
RELEVANCE_SIMILARITY = 0.40
RELEVANCE_TEXT_RANK = 0.2
# Offline answers quote this many of the best relevant items: without a model to read
# them, the second and third best are often what the question was about.
EXTRACTIVE_QUOTES = 3

ANSWER_SYSTEM = (
    "You answer questions about a group conversation using only the memory items given. "
    "Messages are listed in time order under their date, each with a label like [E3] or "
    "[E3.1] and who said it; facts carry the date of the messages they come from. Use the question date to "
    "turn relative times into dates. Cite the labels of the items your answer rests on. "
    "Items marked superseded are no longer true, and bot messages are not evidence. If "
    "the items do not contain the answer, set in_memory to false and say plainly that "
    "memory does not hold it; never guess. Answer briefly."
)


class GroundedAnswer(BaseModel):
    answer: str
    citations: list[str] = Field(default_factory=list, description="labels such as E3 of the items used")
    in_memory: bool = True


@dataclass(frozen=True)
class Citation:
    label: str
    episode_id: int
    platform_message_id: str
    speaker: str
    message_time: datetime


@dataclass
class Answer:
    question: str
    question_date: datetime
    answer: str
    in_memory: bool
    mode: str  # llm | extractive
    citations: list[Citation]
    evidence: list[EvidenceItem]
    sub_queries: list[str]
    time_ranges: list[tuple[datetime, datetime, str]]
    usage: list[Usage]
    trace_id: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "question_date": self.question_date.isoformat(),
            "answer": self.answer,
            "in_memory": self.in_memory,
            "mode": self.mode,
            "citations": [asdict(c) for c in self.citations],
            "evidence": [
                {
                    "label": item.label,
                    "kind": item.kind,
                    "text": item.text,
                    "score": round(item.score, 5),
                    "is_current": item.is_current,
                    "episodes": [asdict(e) for e in item.episodes],
                }
                for item in self.evidence
            ],
            "sub_queries": self.sub_queries,
            "time_ranges": [{"start": s.isoformat(), "end": e.isoformat(), "expression": x} for s, e, x in self.time_ranges],
            "usage": [asdict(u) for u in self.usage],
            "trace_id": self.trace_id,
            "notes": self.notes,
        }


def is_relevant(item: EvidenceItem) -> bool:
    """Offline: does this evidence plausibly bear on the question at all?"""
    return item.similarity >= RELEVANCE_SIMILARITY or item.text_rank >= RELEVANCE_TEXT_RANK


def cite(items: Sequence[EvidenceItem], labels: Sequence[str]) -> list[Citation]:
    """The non-bot messages behind the cited labels, each once, in citation order. Pure."""
    by_label = labelled_episodes(items)
    seen: set[int] = set()
    citations: list[Citation] = []
    for label in labels:
        label = label.strip().strip("[]")
        for episode in by_label.get(label, ()):
            if episode.is_bot or episode.episode_id in seen:
                continue
            seen.add(episode.episode_id)
            citations.append(
                Citation(label, episode.episode_id, episode.platform_message_id, episode.speaker, episode.message_time)
            )
    return citations


def _quote(item: EvidenceItem) -> str:
    if item.episode is not None:
        e = item.episode
        return f'{e.speaker} said on {e.message_time:%d %B %Y}: "{e.text}" [{item.label}]'
    sources = ", ".join(f"{s.speaker} on {s.message_time:%d %B %Y}" for s in item.supporting)
    status = "" if item.is_current else " (this has since been superseded)"
    return f"{item.text}{status} (from what {sources} said) [{item.label}]"


def extractive_answer(items: Sequence[EvidenceItem], relevant: set[str]) -> tuple[str, list[str]]:
    """The best relevant non-bot evidence quoted with speaker and date (the best one,
    then up to ``EXTRACTIVE_QUOTES - 1`` more), or not in memory. Returns the answer
    text and the labels it cites. Pure."""
    best = [i for i in items if i.label in relevant and not i.is_bot and i.episodes][:EXTRACTIVE_QUOTES]
    if not best:
        return NOT_IN_MEMORY, []
    lines = [_quote(best[0])] + [f"Also: {_quote(item)}" for item in best[1:]]
    return "\n".join(lines), [item.label for item in best]


async def _conversation_id(memory: Memory, conversation: ConversationRef | str | int) -> int:
    if isinstance(conversation, int):
        return conversation
    ref = conversation if isinstance(conversation, ConversationRef) else ConversationRef.parse(conversation)
    async with memory.sessions() as session:
        found = await find_conversation(session, ref)
    if found is None:
        raise ValidationError("conversation", f"no conversation {str(ref)!r} in memory")
    return found


async def _guarded(step: str, notes: list[str], usages: list[Usage], call):
    """Run an optional LLM step; on failure keep going without it and say so."""
    try:
        value, usage = await call
    except StashbirdError as error:
        notes.append(f"{step} skipped: {error}")
        failed = getattr(error, "usage", None)
        if failed is not None:
            usages.append(failed)
        log.warning("%s skipped: %s", step, error)
        return None
    usages.append(usage)
    return value


async def answer(
    memory: Memory,
    conversation: ConversationRef | str | int,
    question: str,
    question_date: datetime | None = None,
    principal: str = "cli",
    k: int | None = None,
) -> Answer:
    """Answer ``question`` from the memory of one conversation (see the module doc)."""
    if not question or not question.strip():
        raise ValidationError("question", "is empty")
    k = k or memory.params.evidence_k
    if k < 1:
        raise ValidationError("k", "must be at least 1")
    conversation_id = await _conversation_id(memory, conversation)
    question_date = question_date or datetime.now(timezone.utc)
    if question_date.tzinfo is None:
        question_date = question_date.replace(tzinfo=timezone.utc)
    llm = memory.llm
    usages: list[Usage] = []
    notes: list[str] = []
    sub_queries: list[str] = []
    if llm is not None and needs_decomposition(question, question_date):
        sub_queries = await _guarded(
            "decompose", notes, usages, decompose(llm, question, question_date, memory.params.max_subqueries)
        ) or []
    retrieval = await retrieve(memory, conversation_id, question, question_date, sub_queries)
    usages += retrieval.usages
    candidates = retrieval.candidates
    if llm is not None and candidates:
        head = candidates[: memory.params.rerank_top]
        reranked = await _guarded("rerank", notes, usages, rerank(llm, question, question_date, head, k))
        candidates = reranked if reranked is not None else candidates
    async with memory.sessions() as session:
        items = await assemble(session, conversation_id, candidates, k)
    if llm is not None:
        result = await llm.complete_json(
            system=ANSWER_SYSTEM,
            user=f"Question date: {question_date:%Y-%m-%d (%A)}\nQuestion: {question}\n\nMemory items:\n"
            + (format_evidence(items) or "(none)"),
            schema=GroundedAnswer,
            phase="retrieval",
            operation="answer",
        )
        usages.append(result.usage)
        grounded = result.value
        in_memory = grounded.in_memory and bool(items)
        text = grounded.answer.strip() if grounded.answer.strip() else NOT_IN_MEMORY
        citations = cite(items, grounded.citations) if in_memory else []
        mode = "llm"
    else:
        relevant = {item.label for item in items if is_relevant(item)}
        text, labels = extractive_answer(items, relevant)
        in_memory = bool(labels)
        citations = cite(items, labels)
        mode = "extractive"
    reply = Answer(
        question=question,
        question_date=question_date,
        answer=text,
        in_memory=in_memory,
        mode=mode,
        citations=citations,
        evidence=items,
        sub_queries=sub_queries,
        time_ranges=[(r.start, r.end, r.expression) for r in retrieval.time_ranges],
        usage=usages,
        trace_id=0,
        notes=notes,
    )
    reply.trace_id = await _store_trace(memory, conversation_id, principal, reply)
    return reply


def usage_summary(usages: Sequence[Usage]) -> dict[str, dict[str, Any]]:
    """Calls and tokens by operation, as the trace stores them. Pure."""
    summary: dict[str, dict[str, Any]] = {}
    for usage in usages:
        entry = summary.setdefault(
            usage.operation, {"model": usage.model, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )
        entry["calls"] += usage.calls
        entry["prompt_tokens"] += usage.prompt_tokens
        entry["completion_tokens"] += usage.completion_tokens
    return summary


def trace_retrieval(result: Answer) -> dict[str, Any]:
    """How the answer's evidence was found, as its trace keeps it: numbers and ids, no
    text but the question's own time expressions (a deleted message leaves nothing). Pure."""
    return {
        "question_date": result.question_date.isoformat(),
        "mode": result.mode,
        "in_memory": result.in_memory,
        "time_ranges": [{"start": s.isoformat(), "end": e.isoformat(), "expression": x} for s, e, x in result.time_ranges],
        "citations": [c.label for c in result.citations],
        "evidence": [
            {
                "label": item.label,
                "kind": item.kind,
                "ref_id": item.ref_id,
                "score": round(item.score, 5),
                "similarity": round(item.similarity, 4),
                "text_rank": round(item.text_rank, 4),
                "is_current": item.is_current,
                "episode_ids": [e.episode_id for e in item.episodes],
            }
            for item in result.evidence
        ],
    }


async def _store_trace(memory: Memory, conversation_id: int, principal: str, result: Answer) -> int:
    items, usages = result.evidence, result.usage
    episode_ids = sorted({e.episode_id for item in items for e in item.episodes})
    async with memory.sessions.begin() as session:
        trace_id = (
            await session.execute(
                insert(AnswerTrace)
                .values(
                    conversation_id=conversation_id,
                    principal=principal,
                    question=result.question,
                    sub_queries=result.sub_queries,
                    answer=result.answer,
                    usage=usage_summary(usages),
                    retrieval=trace_retrieval(result),
                )
                .returning(AnswerTrace.id)
            )
        ).scalar_one()
        if episode_ids:
            await session.execute(
                insert(AnswerEvidence).values(
                    [{"trace_id": trace_id, "episode_id": e, "conversation_id": conversation_id} for e in episode_ids]
                )
            )
        await session.execute(
            insert(AuditEntry).values(
                conversation_id=conversation_id,
                principal=principal,
                action="answer",
                details={"trace_id": trace_id, "evidence_items": len(items), "evidence_episodes": len(episode_ids)},
            )
        )
        for usage in usages:
            await record_usage(session, conversation_id, usage)
    return trace_id
