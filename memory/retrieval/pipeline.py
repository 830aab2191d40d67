"""Retrieval without the LLM steps: resolve time expressions, embed the query variants,
find the anchors of anchored expressions, run the hybrid search.

The LLM steps (decomposition before, reranking after) live in ``memory.retrieval.answering``;
this part is what runs offline and what the retrieval benchmark times.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.core import Memory
from memory.episodes.exchange_vectors import EXCHANGE_SPEAKERS
from memory.params import MemoryParams
from memory.principal import Principal
from memory.retrieval.lending import lend_to_exchanges
from memory.retrieval.search import Candidate, QueryVariant, SearchConfig, SearchHints, search
from memory.retrieval.search_plan import VectorPlan
from memory.retrieval.timeparse import (
    AnchoredOffset,
    TimeRange,
    asks_about_past,
    asks_when,
    resolve_anchor,
    resolve_times,
)
from memory.retrieval.wording import asks_about_asker, third_person
from memory.store.documents import KINDS
from memory.store.ledger import Usage
from memory.store.schema import Speaker

ANCHOR_KINDS = ("episode", "relation")


def service_configs(params: MemoryParams, speakers: int) -> tuple[SearchConfig, SearchConfig]:
    """The service's two searches in a conversation where ``speakers`` people talk: the
    hybrid search of every kind (with the chain spread ``chain_share`` allows), and the
    search for an anchor event's time (messages and facts)."""
    hybrid = SearchConfig(
        top=params.search_top,
        message_vector_top=params.message_vector_top,
        rrf_k=params.rrf_k,
        chain_share=chain_share(params.chain_share, speakers),
        anchors=params.anchor_entities,
        anchor_supports=params.anchor_supports,
    )
    return hybrid, SearchConfig(top=params.search_top, message_vector_top=params.message_vector_top, kinds=ANCHOR_KINDS)


@dataclass
class Retrieval:
    question: str
    sub_queries: list[str]
    time_ranges: list[TimeRange]
    prefer_current: bool
    candidates: list[Candidate]
    plan: VectorPlan
    usages: list[Usage] = field(default_factory=list)
    question_vector: list[float] = field(default_factory=list)


def named_speakers(question: str, speakers: Sequence[str]) -> list[str]:
    """The speakers the question names (by full name or first name, possessive
    included), in the order of ``speakers``. A name counts where the question writes it
    capitalised or as the speaker spells it ("What is the code name?" names no speaker
    called "Name U1"), anywhere in a question all in lower case, as chat questions
    often are. Pure."""
    any_case = question == question.lower()

    def names(name: str) -> bool:
        pattern = rf"\b({re.escape(name)}|{re.escape(name.split()[0])})\b"
        return any(
            any_case or m.group(0)[0].isupper() or m.group(0) in (name, name.split()[0])
            for m in re.finditer(pattern, question, re.IGNORECASE)
        )

    return [name for name in speakers if name.split() and names(name)]


def named_speaker(question: str, speakers: Sequence[str]) -> str | None:
    """The one speaker the question names, or None when it names none or several. Pure."""
    named = named_speakers(question, speakers)
    return named[0] if len(named) == 1 else None


def without_names(question: str, names: Sequence[str]) -> str:
    """What the question asks of the people it names: the question without their names
    (full or first, possessive included), or the question itself when nothing else is
    left. Its vector is the one searched: with the name in it, the nearest messages are
    those that greet the person ("Hey Melanie! Just wanted to say hi!"), not what they
    did; whose messages they are is said by the named speakers' own lists. Pure."""
    forms = sorted({form for name in names if name.split() for form in (name, name.split()[0])}, key=len, reverse=True)
    if not forms:
        return question
    pattern = re.compile(rf"\b(?:{'|'.join(re.escape(f) for f in forms)})(?:'s|’s)?(?!\w)", re.IGNORECASE)
    rest = " ".join(pattern.sub(" ", question).split())
    return rest if re.search(r"\w", rest) else question


def chain_share(share: float, speakers: int) -> float:
    """The share of a found message's score lent to the messages next to it in the
    conversation: ``share`` where at most two people talk, none in a channel of more,
    where the message before or after a hit is most often someone else's conversation
    (its exchange is shown around the hit instead: memory.retrieval.evidence). On the
    LoCoMo calibration split's ring channel, all evidence at K = 30 75.7 -> 76.8%, the
    threaded channel's asked in their threads 82.2 -> 82.8%, pairs unchanged
    (held-out 70.9 -> 71.3%, 76.9 -> 77.8%). The same count decides whether a message
    is searched with its predecessor's vector (memory.episodes.exchange_vectors). Pure."""
    return share if speakers <= EXCHANGE_SPEAKERS else 0.0


async def speaker_names(session: AsyncSession, conversation_id: int) -> list[str]:
    rows = await session.execute(select(Speaker.display_name).where(Speaker.conversation_id == conversation_id))
    return list(rows.scalars())


async def speaker_name(session: AsyncSession, conversation_id: int, platform_user_id: str) -> str | None:
    """The display name of the person with this platform id in the conversation (None
    when they have written nothing there)."""
    found = select(Speaker.display_name).where(
        Speaker.conversation_id == conversation_id, Speaker.platform_user_id == platform_user_id
    )
    return (await session.execute(found)).scalar()


async def as_asked(memory: Memory, conversation_id: int, question: str, principal: Principal) -> str:
    """The question with its asker named where it says "I", "me" or "my" about them
    (``wording.third_person``), when a person of the conversation asks it: "What did I
    say about the launch?" is about the asker's messages, which say their name, not "I",
    to the search and to a model reading the question. As it is otherwise."""
    if principal.kind != "user" or not asks_about_asker(question):
        return question
    async with memory._sessions() as session:
        name = await speaker_name(session, conversation_id, principal.id)
    return third_person(question, name) if name else question


async def retrieve(
    memory: Memory,
    conversation_id: int,
    question: str,
    question_date: datetime,
    sub_queries: Sequence[str] = (),
    kinds: Sequence[str] = KINDS,
    thread: str | None = None,
) -> Retrieval:
    """Fused candidates for the question and its sub-queries, in one conversation
    (``kinds``: the document kinds searched, all by default; ``thread``: the thread it
    was asked in, whose messages are searched apart)."""
    parsed = resolve_times(question, question_date)
    ranges = [r for r in parsed if isinstance(r, TimeRange)]
    anchors = [r for r in parsed if isinstance(r, AnchoredOffset)]
    texts = [question, *sub_queries, *(a.anchor for a in anchors)]
    # A second connection reads the full-text lists while the first reads the vector ones.
    async with memory._sessions.begin() as session, memory._sessions() as text_session:
        everyone = await speaker_names(session, conversation_id)
        hybrid, anchor = service_configs(memory.params, len(everyone))
        hybrid = replace(hybrid, kinds=tuple(kinds))
        speakers = named_speakers(question, everyone)
        asked = without_names(question, speakers)
        # The question's own vector is kept for the answer steps; its name-free one is
        # what the question's variant searches with (its text still goes to full text).
        batch = await memory.embedder.embed([*texts, asked] if asked != question else texts)
        usage = Usage.embedding("retrieval", "embed_query", batch)
        variants = [QueryVariant(t, v) for t, v in zip(texts, batch.vectors, strict=False)]
        variants[0] = QueryVariant(question, batch.vectors[-1] if asked != question else batch.vectors[0])
        for offset, variant in zip(anchors, variants[len(texts) - len(anchors) :], strict=False):
            # When did the anchor event happen? The best dated match says; if nothing
            # matches, the anchor phrase is still searched but there is no time boost.
            found = await search(session, conversation_id, [variant], anchor, text_session=text_session)
            dated = next((c.message_time for c in found.candidates if c.message_time is not None), None)
            anchored = resolve_anchor(offset, dated) if dated is not None else None
            if anchored is not None:
                ranges.append(anchored)
        prefer_current = not asks_about_past(question, parsed, question_date)
        hints = SearchHints(
            time_ranges=tuple(ranges),
            prefer_current=prefer_current,
            asks_when=asks_when(question),
            named_speakers=tuple(speakers),
            thread=thread,
        )
        result = await search(session, conversation_id, variants, hybrid, hints, text_session=text_session)
        candidates = result.candidates
        if len(everyone) > EXCHANGE_SPEAKERS:
            share, lenders = memory.params.chain_share, memory.params.search_top
            candidates = await lend_to_exchanges(session, conversation_id, candidates, share, lenders)
    return Retrieval(
        question,
        list(sub_queries),
        ranges,
        prefer_current,
        candidates,
        result.plan,
        [usage],
        list(batch.vectors[0]),
    )
