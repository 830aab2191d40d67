"""Answering a question from one conversation's memory, with citations and a trace.

With an LLM: decompose (multi-entity, temporal or compound questions), hybrid search,
rerank the best fused candidates, answer from the evidence only, citing it, or say
plainly that memory does not hold the answer. Without an LLM: no decomposition or
rerank; the message that best answers the question is chosen among everything the
evidence shows (``memory.retrieval.selection``) and quoted with speaker and date, or the
answer is "not in memory" when the calibrated rule says nothing stored answers it.

A failed model call never loses the answer: a failed decomposition searches the
question as asked, a failed rerank keeps the fused order, a failed final answer is
answered offline; each says so in one short note.

The reply is data for a chat (``AnswerReply``): one short answer line, then the cited
messages (speaker, date, link when the platform gives one), an outdated one marked with
the message that corrected it. Connectors render it per platform.

Every answer stores its trace (question, sub-queries, answer, usage) in
``answer_traces``, the episodes its evidence showed in ``answer_evidence`` (so deleting
a message withdraws the answers that used it), an ``answer`` entry in the audit log and
its usage in the ledger (phase ``retrieval``) and one use of each community its evidence
came from (the order dirty communities are regenerated in: memory/communities/use.py),
all in one transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from memory.core import Memory
from memory.errors import StashbirdError
from memory.models.llm import LLMClient
from memory.principal import Principal
from memory.prompts import ANSWER_SYSTEM
from memory.retrieval.evidence import (
    EpisodeRef,
    EvidenceItem,
    assemble,
    format_evidence,
    labelled_episodes,
)
from memory.retrieval.llm_steps import decompose, needs_decomposition, rerank
from memory.retrieval.pipeline import Retrieval, as_asked, retrieve, speaker_names
from memory.retrieval.reading import corrections_of, question_cues, read_seen
from memory.retrieval.selection import DEFAULT_WEIGHTS, Choice, SelectionWeights, choose
from memory.store.answers import store_trace
from memory.store.audit import write_audit
from memory.store.communities import record_use
from memory.store.conversations import ConversationRef
from memory.store.ledger import Usage, record_usage

log = logging.getLogger(__name__)

NOT_IN_MEMORY = "I don't have that in memory: nothing stored in this conversation answers it."
# The baseline the answers benchmark compares against (the extractive answer before
# answer selection): items in fused order above a relevance floor (cosine 0.40, or
# ts_rank_cd 0.2), the best three quoted.
BASELINE_SIMILARITY = 0.40
BASELINE_TEXT_RANK = 0.2
BASELINE_QUOTES = 3
# Besides the best message, a reply cites at most this many more, and only those whose
# selection score is within CITE_WITHIN of the best: a second quote that is only loosely
# related costs more trust than it adds (on the calibration split, 0.5 cites a second
# message in 26% of answers and an evidence turn among the cited in 3 points more).
MORE_CITATIONS = 1
CITE_WITHIN = 0.5

NOTES = {
    "decompose": "decomposition unavailable (model error): searched the question as asked",
    "rerank": "rerank unavailable (model error): kept the search order",
    "answer": "answer model unavailable: answered offline from the best matching message",
}

T = TypeVar("T")


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


@dataclass(frozen=True)
class QuotedMessage:
    """One message a reply cites, as a connector shows it."""

    platform_message_id: str
    speaker: str
    message_time: datetime
    text: str
    link: str | None = None
    outdated: bool = False
    correction: QuotedMessage | None = None  # the message that corrected an outdated one


@dataclass(frozen=True)
class AnswerReply:
    """What a chat shows: one short answer line, then the cited messages, then notes."""

    line: str
    messages: tuple[QuotedMessage, ...] = ()
    notes: tuple[str, ...] = ()


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
    reply: AnswerReply = field(default_factory=lambda: AnswerReply(""))
    refusal: str | None = None  # why the answer is "not in memory", when it is
    # Offline selection's confidence: the best message's score, how far someone else's
    # statement beats the named speaker's and the doubt the abstention rule compares.
    confidence: dict[str, float] = field(default_factory=dict)
    selection: Choice | None = None  # the offline choice, made for every answer

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "question_date": self.question_date.isoformat(),
            "answer": self.answer,
            "in_memory": self.in_memory,
            "refusal": self.refusal,
            "confidence": self.confidence,
            "mode": self.mode,
            "reply": asdict(self.reply),
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


@dataclass(frozen=True)
class Drafted:
    """An answer before it is stored: its text, the episodes it cites (best first) and
    the reply a chat shows."""

    text: str
    in_memory: bool
    cited: tuple[EpisodeRef, ...]
    messages: tuple[QuotedMessage, ...]
    refusal: str | None = None


def baseline_quotes(items: Sequence[EvidenceItem]) -> list[EvidenceItem]:
    """The baseline's choice (see ``BASELINE_QUOTES``): up to three relevant non-bot
    items in fused order. Pure."""
    relevant = [
        i
        for i in items
        if (i.similarity >= BASELINE_SIMILARITY or i.text_rank >= BASELINE_TEXT_RANK) and not i.is_bot and i.episodes
    ]
    return relevant[:BASELINE_QUOTES]


def baseline_reply(items: Sequence[EvidenceItem]) -> tuple[str, list[str]]:
    """The baseline's answer text and the platform ids of the messages it cites: the
    items ``baseline_quotes`` chooses, each quoted with its label. Pure."""
    lines = []
    cited: list[str] = []
    for index, item in enumerate(baseline_quotes(items)):
        shown = [e for e in (((item.episode,) if item.episode else ()) + item.supporting) if not e.is_bot]
        cited += [e.platform_message_id for e in shown if e.platform_message_id not in cited]
        quote = said(item.episode) if item.episode else item.text
        lines.append(("Also: " if index else "") + f"{quote} [{item.label}]")
    return ("\n".join(lines) if lines else NOT_IN_MEMORY), cited


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


def citations_of(items: Sequence[EvidenceItem], episodes: Sequence[EpisodeRef]) -> list[Citation]:
    """Citations of chosen messages, each under the first label that shows it. Pure."""
    label_of: dict[int, str] = {}
    for label, shown in labelled_episodes(items).items():
        for episode in shown:
            label_of.setdefault(episode.episode_id, label)
    return [
        Citation(label_of.get(e.episode_id, ""), e.episode_id, e.platform_message_id, e.speaker, e.message_time) for e in episodes
    ]


def message_link(platform: str, workspace_id: str, channel_id: str, platform_message_id: str) -> str | None:
    """A link to the message when the platform's ids alone make one (Discord); Slack's
    needs the workspace's domain, which the connector asks the platform for. Pure."""
    if platform == "discord" and workspace_id and channel_id:
        return f"https://discord.com/channels/{workspace_id}/{channel_id}/{platform_message_id}"
    return None


def said(episode: EpisodeRef) -> str:
    return f'{episode.speaker} said on {episode.message_time:%d %B %Y}: "{episode.text}"'


def _cited(episode: EpisodeRef, outdated: bool, correction: EpisodeRef | None, link: Any) -> QuotedMessage:
    fixed = _cited(correction, False, None, link) if outdated and correction is not None else None
    return QuotedMessage(
        episode.platform_message_id,
        episode.speaker,
        episode.message_time,
        episode.text,
        link(episode.platform_message_id),
        outdated,
        fixed,
    )


def draft_offline(choice: Choice, link: Any = lambda _: None) -> Drafted:
    """The reply to a selection: not in memory, or the best message (its correction
    first when what it said was superseded) and at most ``MORE_CITATIONS`` more that
    score nearly as well. Pure."""
    if not choice.in_memory:
        return Drafted(NOT_IN_MEMORY, False, (), (), choice.refusal or "nothing stored answers it")
    best, best_score = choice.ranked[0]
    chosen = [best]
    for seen, value in choice.ranked[1:]:
        if len(chosen) > MORE_CITATIONS or best_score - value > CITE_WITHIN:
            break
        if not seen.outdated:
            chosen.append(seen)
    lead = best.correction if best.outdated and best.correction is not None else best.episode
    text = said(lead)
    if best.outdated:
        text += " (what it replaced is marked outdated below)" if lead is not best.episode else " (since superseded)"
    cited = tuple(dict.fromkeys([lead] + [s.episode for s in chosen]))
    outdated = {s.episode.episode_id: (s.outdated, s.correction) for s in chosen}
    messages = tuple(_cited(e, *outdated.get(e.episode_id, (False, None)), link) for e in cited)
    return Drafted(text, True, cited, messages)


async def _guarded(step: str, notes: list[str], usages: list[Usage], call: Awaitable[tuple[T, Usage]]) -> T | None:
    """Run an LLM step; on failure go on with its offline stand-in and say so."""
    try:
        value, usage = await call
    except StashbirdError as error:
        notes.append(NOTES[step])
        failed = getattr(error, "usage", None)
        if failed is not None:
            usages.append(failed)
        log.warning("%s failed, falling back: %s", step, error)
        return None
    usages.append(usage)
    return value


async def _grounded(
    llm: LLMClient, question: str, question_date: datetime, items: list[EvidenceItem]
) -> tuple[GroundedAnswer, Usage]:
    result = await llm.complete_json(
        system=ANSWER_SYSTEM,
        user=f"Question date: {question_date:%Y-%m-%d (%A)}\nQuestion: {question}\n\nMemory items:\n"
        + (format_evidence(items) or "(none)"),
        schema=GroundedAnswer,
        phase="retrieval",
        operation="answer",
    )
    return result.value, result.usage


async def _select(
    memory: Memory,
    conversation_id: int,
    question: str,
    retrieval: Retrieval,
    items: Sequence[EvidenceItem],
    weights: SelectionWeights,
    usages: list[Usage],
) -> Choice:
    """The offline choice; embedding the question in the first person is added to ``usages``."""
    async with memory._sessions() as session:
        speakers = await speaker_names(session, conversation_id)
        cues = await question_cues(session, conversation_id, question, speakers, retrieval.time_ranges)
        personal: Sequence[float] = ()
        if cues.first_person != question:
            batch = await memory.embedder.embed([cues.first_person])
            usages.append(Usage.embedding("retrieval", "embed_first_person", batch))
            personal = batch.vectors[0]
        seen = await read_seen(session, conversation_id, items, retrieval.question_vector, personal)
    return choose(cues, seen, speakers, weights)


async def _draft_llm(
    memory: Memory, conversation_id: int, grounded: GroundedAnswer, items: list[EvidenceItem], link: Any
) -> Drafted:
    if not (grounded.in_memory and items and grounded.answer.strip()):
        return Drafted(NOT_IN_MEMORY, False, (), (), "the model found no answer in the evidence")
    citations = cite(items, grounded.citations)
    episodes = {e.episode_id: e for item in items for e in item.episodes}
    cited = tuple(episodes[c.episode_id] for c in citations)
    async with memory._sessions() as session:
        status = await corrections_of(session, conversation_id, [e.episode_id for e in cited])
    messages = tuple(_cited(e, *status.get(e.episode_id, (False, None)), link) for e in cited)
    return Drafted(grounded.answer.strip(), True, cited, messages)


async def answer(
    memory: Memory,
    conversation_id: int,
    conversation: ConversationRef,
    question: str,
    *,
    principal: Principal,
    date: datetime | None = None,
    k: int | None = None,
    weights: SelectionWeights | None = None,
    thread: str | None = None,
) -> Answer:
    """Answer ``question`` from the memory of one conversation, resolved by the caller
    (its id and reference; the API checks the question and ``k``; see the module doc).
    ``weights``: answer selection's, the calibrated ``DEFAULT_WEIGHTS`` by default;
    ``thread``: the thread it was asked in, searched first."""
    k = k or memory.params.evidence_k
    question_date = date or datetime.now(timezone.utc)
    if question_date.tzinfo is None:
        question_date = question_date.replace(tzinfo=timezone.utc)
    llm = memory.llm
    usages: list[Usage] = []
    notes: list[str] = []
    sub_queries: list[str] = []
    # The answer is about what the person typed; everything that reads the question reads
    # it with the asker named in place of "I" (``as_asked``).
    typed, question = question, await as_asked(memory, conversation_id, question, principal)
    if llm is not None and needs_decomposition(question, question_date):
        sub_queries = (
            await _guarded("decompose", notes, usages, decompose(llm, question, question_date, memory.params.max_subqueries))
            or []
        )
    retrieval = await retrieve(memory, conversation_id, question, question_date, sub_queries, thread=thread)
    usages += retrieval.usages
    candidates = retrieval.candidates
    if llm is not None and candidates:
        head = candidates[: memory.params.rerank_top]
        reranked = await _guarded("rerank", notes, usages, rerank(llm, question, question_date, head, k))
        candidates = reranked if reranked is not None else candidates
    async with memory._sessions() as session:
        items = await assemble(session, conversation_id, candidates, k)

    def link(message_id: str) -> str | None:
        return message_link(conversation.platform, conversation.workspace_id, conversation.channel_id, message_id)

    # The offline choice is cheap and always made: it is the fallback, and a question
    # about someone the conversation never names needs no model call.
    choice = await _select(memory, conversation_id, question, retrieval, items, weights or DEFAULT_WEIGHTS, usages)
    grounded = None
    if llm is not None and not choice.unknown:
        grounded = await _guarded("answer", notes, usages, _grounded(llm, question, question_date, items))
    if grounded is not None:
        drafted = await _draft_llm(memory, conversation_id, grounded, items, link)
        mode = "llm"
    else:
        drafted = draft_offline(choice, link)
        mode = "extractive"
    result = Answer(
        question=typed,
        question_date=question_date,
        answer=drafted.text,
        in_memory=drafted.in_memory,
        mode=mode,
        citations=citations_of(items, drafted.cited),
        evidence=items,
        sub_queries=sub_queries,
        time_ranges=[(r.start, r.end, r.expression) for r in retrieval.time_ranges],
        usage=usages,
        trace_id=0,
        notes=notes,
        reply=AnswerReply(drafted.text, drafted.messages, tuple(notes)),
        refusal=drafted.refusal,
        confidence={
            "support": choice.support,
            "mismatch": choice.mismatch,
            "doubt": choice.doubt,
            "unknown": float(choice.unknown),
            "unrelated": float(choice.unrelated),
        },
        selection=choice,
    )
    result.trace_id = await _store_trace(memory, conversation_id, principal, result)
    return result


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


async def _store_trace(memory: Memory, conversation_id: int, principal: Principal, result: Answer) -> int:
    items, usages = result.evidence, result.usage
    episode_ids = sorted({e.episode_id for item in items for e in item.episodes})
    trace = {
        "principal": str(principal),
        "question": result.question,
        "sub_queries": result.sub_queries,
        "answer": result.answer,
        "usage": usage_summary(usages),
        "retrieval": trace_retrieval(result),
    }
    async with memory._sessions.begin() as session:
        trace_id = await store_trace(session, conversation_id, trace, episode_ids)
        details = {"trace_id": trace_id, "evidence_items": len(items), "evidence_episodes": len(episode_ids)}
        await write_audit(session, conversation_id, str(principal), "answer", details)
        for usage in usages:
            await record_usage(session, conversation_id, usage)
        refs = {kind: [i.ref_id for i in items if i.kind == kind] for kind in ("community", "entity", "relation", "episode")}
        await record_use(
            session,
            conversation_id,
            communities=refs["community"],
            entities=refs["entity"],
            relations=refs["relation"],
            episodes=refs["episode"],
        )
    return trace_id
