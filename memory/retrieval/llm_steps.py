"""The LLM steps of retrieval: decomposing a question into focused sub-queries, and
reranking the fused candidates in one batched call. Each returns its value and the
usage to record; the pure parts (when to decompose, how scores reorder) are apart."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from memory.models.tokens import truncate_tokens
from memory.prompts import DECOMPOSE_SYSTEM, RERANK_SYSTEM
from memory.retrieval.search import Candidate
from memory.retrieval.timeparse import resolve_times
from memory.store.ledger import Usage

RERANK_TEXT_TOKENS = 120

_COMPOUND = re.compile(
    r"\b(and|or|both|between|compare|compared|than|after|before|since|during|while|first|last|"
    r"when|how long|how many|which|who else|what else|in common|same)\b",
    re.IGNORECASE,
)
_NAME = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")
_QUESTION_WORDS = {
    "What",
    "When",
    "Where",
    "Who",
    "Why",
    "How",
    "Which",
    "Did",
    "Does",
    "Do",
    "Is",
    "Are",
    "Was",
    "Were",
    "Has",
    "Have",
    "Would",
    "Could",
    "Can",
    "Should",
    "Will",
    "The",
    "A",
    "An",
    "In",
    "On",
    "I",
}


class SubQueries(BaseModel):
    queries: list[str] = Field(
        default_factory=list, description="focused search queries; empty when the question is already focused"
    )


class ScoredCandidate(BaseModel):
    id: int = Field(description="the candidate number")
    score: float = Field(description="0 (useless) to 10 (answers the question)")


class RerankScores(BaseModel):
    scores: list[ScoredCandidate] = Field(default_factory=list)


def needs_decomposition(question: str, question_date: datetime) -> bool:
    """Multi-entity, temporal or compound questions (a cheap test: simple questions do
    not pay for a decomposition call)."""
    names = {m.group(0) for m in _NAME.finditer(question) if m.group(0).split()[0] not in _QUESTION_WORDS}
    return len(names) > 1 or bool(_COMPOUND.search(question)) or bool(resolve_times(question, question_date))


def clean_sub_queries(question: str, queries: Sequence[str], limit: int) -> list[str]:
    """At most ``limit`` distinct non-empty sub-queries that differ from the question."""
    seen = {question.strip().lower()}
    kept: list[str] = []
    for query in queries:
        text = " ".join(query.split())
        if text and text.lower() not in seen:
            seen.add(text.lower())
            kept.append(text)
    return kept[:limit]


def apply_scores(candidates: Sequence[Candidate], scores: dict[int, float], keep: int) -> list[Candidate]:
    """Candidates by LLM score (an unscored one counts 0), fused order breaking ties;
    the ``keep`` best. Pure."""
    order = sorted(range(len(candidates)), key=lambda i: (-scores.get(i + 1, 0.0), i))
    return [candidates[i] for i in order[:keep]]


async def decompose(llm: Any, question: str, question_date: datetime, limit: int) -> tuple[list[str], Usage]:
    result = await llm.complete_json(
        system=DECOMPOSE_SYSTEM.format(limit=limit),
        user=f"Question date: {question_date:%Y-%m-%d (%A)}\nQuestion: {question}",
        schema=SubQueries,
        phase="retrieval",
        operation="decompose",
    )
    return clean_sub_queries(question, result.value.queries, limit), result.usage


def _candidate_line(number: int, candidate: Candidate) -> str:
    when = f" ({candidate.message_time:%Y-%m-%d})" if candidate.message_time else ""
    status = "" if candidate.is_current else " [superseded]"
    body = truncate_tokens(" ".join(candidate.text.split()), RERANK_TEXT_TOKENS)
    return f"{number}. {candidate.kind}{when}{status}: {body}"


async def rerank(
    llm: Any, question: str, question_date: datetime, candidates: Sequence[Candidate], keep: int
) -> tuple[list[Candidate], Usage]:
    lines = "\n".join(_candidate_line(i + 1, c) for i, c in enumerate(candidates))
    result = await llm.complete_json(
        system=RERANK_SYSTEM,
        user=f"Question date: {question_date:%Y-%m-%d}\nQuestion: {question}\n\nItems:\n{lines}",
        schema=RerankScores,
        phase="retrieval",
        operation="rerank",
    )
    scores = {s.id: s.score for s in result.value.scores if 1 <= s.id <= len(candidates)}
    return apply_scores(candidates, scores, keep), result.usage
