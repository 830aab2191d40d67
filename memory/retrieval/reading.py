"""What offline answer selection reads from the database: the question's cues and every
message the evidence shows, with its own vector's similarity to the question, its
full-text lexemes, the retrieved facts resting on it and whether what it said has been
superseded (and by which message), and its neighbours in the chain (who said them,
when, their lexemes). Five small queries, all on one conversation."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.retrieval.evidence import CONTEXT_WINDOW, EpisodeRef, EvidenceItem, load_episodes
from memory.retrieval.exchange import in_exchange, talks_with
from memory.retrieval.pipeline import named_speaker
from memory.retrieval.search_plan import TERM_SAMPLE
from memory.retrieval.search_sql import term_shares
from memory.retrieval.selection import EXCHANGE_SPAN, Cues, Seen, Turn
from memory.retrieval.timeparse import MONTHS, WEEKDAYS, TimeRange
from memory.retrieval.wording import answer_type, first_person, term_weights
from memory.store.database import custom_plans
from memory.store.schema import Relation, RelationProvenance

_NAME_WORD = re.compile(r"\b[A-Z][a-zA-Z'’-]+\b")
_QUOTED = re.compile(r'"[^"]*"?|“[^”]*”?')
# A capitalised word right after one of these starts a sentence ("Dr. Seuss" does not).
_SENTENCE_END = re.compile(r"([?!]|[a-z]{2,}\.)\s+$")
# Capitalised words of a question that do not name anything.
_NOT_NAMES = {
    "what",
    "when",
    "where",
    "who",
    "whom",
    "whose",
    "why",
    "how",
    "which",
    "did",
    "does",
    "do",
    "is",
    "are",
    "was",
    "were",
    "has",
    "have",
    "had",
    "would",
    "could",
    "can",
    "should",
    "will",
    "the",
    "a",
    "an",
    "in",
    "on",
    "i",
    "if",
    "and",
    "or",
    "according",
    "after",
    "before",
    "since",
    "during",
    "besides",
    "apart",
    "other",
    "dr",
    "mr",
    "mrs",
    "ms",
}


@dataclass
class _Appearance:
    episode: EpisodeRef
    rank: float = 0.0
    fact: float = 0.0
    similarity: float = 0.0
    exchange: float = 0.0
    hit: bool = False


def _appearances(items: Sequence[EvidenceItem]) -> dict[int, _Appearance]:
    """Every message the items show, with the best relative score of an item showing it
    and of a relation item resting on it."""
    best = max((item.score for item in items), default=0.0) or 1.0
    seen: dict[int, _Appearance] = {}
    for item in items:
        relative = item.score / best
        for episode in item.episodes:
            entry = seen.setdefault(episode.episode_id, _Appearance(episode))
            entry.rank = max(entry.rank, relative)
            if item.kind == "relation" and episode in item.supporting:
                entry.fact = max(entry.fact, relative)
        if item.episode is not None:
            entry = seen[item.episode.episode_id]
            entry.similarity = max(entry.similarity, item.similarity)
            entry.hit = True
    return seen


def candidate_names(question: str, speakers: Sequence[str]) -> list[str]:
    """Names the question may mention: runs of capitalised words ("LeBron James" is one
    name), leaving out a sentence's first word, words in quotes (a title names no one),
    the speakers' names, question words, titles such as "Dr" and the names of months and
    weekdays. Pure."""
    excluded = _NOT_NAMES | {w.lower() for s in speakers for w in s.split()} | set(MONTHS) | set(WEEKDAYS)
    unquoted = _QUOTED.sub(lambda quote: " " * len(quote.group(0)), question)
    names: list[list[str]] = []
    end = -1
    for match in _NAME_WORD.finditer(unquoted):
        word = re.sub(r"['’]s$", "", match.group(0).strip("'’"))
        starts = _SENTENCE_END.search(unquoted, max(0, match.start() - 40), match.start())
        if match.start() == 0 or starts or word.lower() in excluded or len(word) < 2:
            end = -1
            continue
        if end >= 0 and not unquoted[end : match.start()].strip():
            names[-1].append(word)
        else:
            names.append([word])
        end = match.end()
    return list(dict.fromkeys(" ".join(name) for name in names))


async def _unknown(session: AsyncSession, conversation_id: int, names: Sequence[str]) -> tuple[str, ...]:
    """Which of ``names`` no stored message or entity of the conversation contains any
    word of."""
    if not names:
        return ()
    rows = await session.execute(
        text(
            "SELECT w FROM unnest(CAST(:names AS text[])) AS w, "
            "LATERAL (SELECT replace(plainto_tsquery('english', w)::text, ' & ', ' | ')::tsquery AS q) AS any_word "
            "WHERE numnode(any_word.q) > 0 "
            "AND NOT EXISTS (SELECT 1 FROM search_documents d WHERE d.conversation_id = :c "
            "AND d.kind IN ('episode', 'entity') AND d.tsv @@ any_word.q)"
        ),
        {"names": list(names), "c": conversation_id},
    )
    return tuple(rows.scalars())


async def question_cues(
    session: AsyncSession, conversation_id: int, question: str, speakers: Sequence[str], time_ranges: Sequence[TimeRange] = ()
) -> Cues:
    shares, sampled = await term_shares(session, conversation_id, question, TERM_SAMPLE)
    name_terms = (
        await session.execute(
            text("SELECT unnest(tsvector_to_array(to_tsvector('english', :names)))"), {"names": " ".join(speakers)}
        )
    ).scalars()
    named = named_speaker(question, speakers)
    forms = (named, named.split()[0]) if named and named.split() else ()
    return Cues(
        terms=term_weights(shares, sampled, exclude=list(name_terms)),
        named=named,
        name_forms=tuple(dict.fromkeys(forms)),
        answer_type=answer_type(question),
        unknown_people=await _unknown(session, conversation_id, candidate_names(question, speakers)),
        time_ranges=tuple(time_ranges),
        first_person=first_person(question, forms),
    )


async def corrections_of(
    session: AsyncSession, conversation_id: int, episode_ids: Sequence[int]
) -> dict[int, tuple[bool, EpisodeRef | None]]:
    """For each message that supports relations: whether all of them are superseded,
    and a message supporting what superseded one of them."""
    rows = (
        await session.execute(
            select(RelationProvenance.episode_id, Relation.status, Relation.superseded_by)
            .join(Relation, (Relation.conversation_id == conversation_id) & (Relation.id == RelationProvenance.relation_id))
            .where(RelationProvenance.conversation_id == conversation_id, RelationProvenance.episode_id.in_(episode_ids))
        )
    ).all()
    status: dict[int, list[tuple[str, int | None]]] = {}
    for episode_id, relation_status, superseded_by in rows:
        status.setdefault(episode_id, []).append((relation_status, superseded_by))
    newer = {s for entries in status.values() for _, s in entries if s is not None}
    witness: dict[int, int] = {}
    if newer:
        for relation_id, episode_id in await session.execute(
            select(RelationProvenance.relation_id, RelationProvenance.episode_id).where(
                RelationProvenance.conversation_id == conversation_id, RelationProvenance.relation_id.in_(newer)
            )
        ):
            witness.setdefault(relation_id, episode_id)
    result: dict[int, tuple[bool, int | None]] = {}
    for episode_id, entries in status.items():
        outdated = all(s == "superseded" for s, _ in entries)
        correction = next((witness[s] for _, s in entries if s in witness and witness[s] != episode_id), None)
        result[episode_id] = (outdated, correction)
    corrections = await load_episodes(session, conversation_id, [c for _, c in result.values() if c is not None])
    return {e: (outdated, corrections.get(c) if c is not None else None) for e, (outdated, c) in result.items()}


# Each message's chain neighbours up to CONTEXT_WINDOW steps on either side (side -1:
# before, 1: after), nearest first, with speaker, time, thread and lexemes.
_NEIGHBOURS = text(
    "WITH RECURSIVE walk(origin, side, step, id) AS ("
    " SELECT e.id, s.side, 0, e.id FROM episodes e CROSS JOIN (VALUES (-1), (1)) AS s(side)"
    " WHERE e.conversation_id = :c AND e.id = ANY(:ids)"
    " UNION ALL"
    " SELECT w.origin, w.side, w.step + 1, CASE WHEN w.side < 0 THEN e.prev_id ELSE e.next_id END"
    " FROM walk w JOIN episodes e ON e.conversation_id = :c AND e.id = w.id"
    " WHERE w.step < :span AND CASE WHEN w.side < 0 THEN e.prev_id ELSE e.next_id END IS NOT NULL)"
    " SELECT w.origin, w.side, e.id, e.platform_message_id, e.thread_id, sp.display_name, e.message_time,"
    " tsvector_to_array(d.tsv)"
    " FROM walk w JOIN episodes e ON e.conversation_id = :c AND e.id = w.id"
    " JOIN speakers sp ON sp.conversation_id = :c AND sp.id = e.speaker_id"
    " LEFT JOIN search_documents d ON d.conversation_id = :c AND d.kind = 'episode' AND d.ref_id = e.id"
    " WHERE w.step > 0 ORDER BY w.origin, w.side, w.step"
)


async def _neighbours(
    session: AsyncSession, conversation_id: int, shown: dict[int, EpisodeRef]
) -> dict[tuple[int, int], list[Turn]]:
    """(message, side) -> the messages of its exchange on that side (``in_exchange``, the
    evidence's surroundings' rule), nearest first, at most ``EXCHANGE_SPAN``."""
    rows = await session.execute(_NEIGHBOURS, {"c": conversation_id, "ids": list(shown), "span": CONTEXT_WINDOW})
    around = [
        (origin, side, EpisodeRef(episode_id, message_id, who, "user", at, "", thread), Turn(who, at, frozenset(terms or ())))
        for origin, side, episode_id, message_id, thread, who, at, terms in rows
    ]
    seen = [*shown.values(), *(other for _, _, other, _ in around)]
    partnered = talks_with({e.speaker for e in shown.values()}, seen)
    found: dict[tuple[int, int], list[Turn]] = {}
    for origin, side, other, turn in around:
        hit, turns = shown[origin], found.setdefault((origin, side), [])
        if len(turns) < EXCHANGE_SPAN and in_exchange(hit, other, partnered[hit.speaker]):
            turns.append(turn)
    return found


def _cosine(vector_text: str, query: np.ndarray | None) -> float:
    """Cosine of a vector in pgvector's text form with the query (0 without a query)."""
    if query is None:
        return 0.0
    vector = np.asarray(vector_text.strip("[]").split(","), dtype=np.float64)
    return float(vector @ query / ((np.linalg.norm(vector) * np.linalg.norm(query)) or 1.0))


async def read_seen(
    session: AsyncSession,
    conversation_id: int,
    items: Sequence[EvidenceItem],
    question_vector: Sequence[float],
    personal_vector: Sequence[float] = (),
) -> list[Seen]:
    """Every message the evidence shows, as selection sees it (``personal_vector``: the
    embedding of ``Cues.first_person`` when it differs from the question)."""
    appearances = _appearances(items)
    ids = list(appearances)
    if not ids:
        return []
    # Planned with their values: a generic plan, kept after five runs, costs the
    # conversation as an average one and scanned all of the largest's relation provenance
    # for the messages' corrections (55 ms a question at 1M messages, 0.9 ms planned
    # with its values; read_seen 77 -> 17.5 ms in all, bench scale's store, 2026-12-06).
    await custom_plans(session)
    rows = await session.execute(
        text(
            "SELECT e.id, e.embedding::text, d.embedding::text, tsvector_to_array(d.tsv), p.text, "
            "tsvector_to_array(pd.tsv), (SELECT array_agg(DISTINCT lexeme) FROM "
            "regexp_split_to_table(e.text, '(?<=[.!?])\\s+') AS part, "
            "unnest(tsvector_to_array(to_tsvector('english', part))) AS lexeme WHERE part !~ '[?]\\s*$') "
            "FROM episodes e "
            "LEFT JOIN search_documents d ON d.conversation_id = :c AND d.kind = 'episode' AND d.ref_id = e.id "
            "LEFT JOIN episodes p ON p.conversation_id = :c AND p.id = e.prev_id "
            "LEFT JOIN search_documents pd ON pd.conversation_id = :c AND pd.kind = 'episode' AND pd.ref_id = p.id "
            "WHERE e.conversation_id = :c AND e.id = ANY(:ids)"
        ),
        {"c": conversation_id, "ids": ids},
    )
    query = np.asarray(question_vector, dtype=np.float64) if len(question_vector) else None
    personal = np.asarray(personal_vector, dtype=np.float64) if len(personal_vector) else query
    personals: dict[int, float] = {}
    lexemes: dict[int, frozenset[str]] = {}
    previous: dict[int, tuple[str, frozenset[str]]] = {}
    stated: dict[int, frozenset[str]] = {}
    for episode_id, own, searched, terms, previous_text, previous_terms, stated_terms in rows:
        lexemes[episode_id] = frozenset(terms or ())
        stated[episode_id] = frozenset(stated_terms or ())
        previous[episode_id] = (previous_text or "", frozenset(previous_terms or ()))
        entry = appearances[episode_id]
        entry.similarity = _cosine(own, query) if own else entry.similarity
        personals[episode_id] = _cosine(own, personal) if own else entry.similarity
        entry.exchange = _cosine(searched, query) if searched else entry.similarity
    corrections = await corrections_of(session, conversation_id, ids)
    neighbours = await _neighbours(session, conversation_id, {e: entry.episode for e, entry in appearances.items()})
    seen = []
    for episode_id, entry in appearances.items():
        outdated, correction = corrections.get(episode_id, (False, None))
        seen.append(
            Seen(
                episode=entry.episode,
                rank=entry.rank,
                similarity=entry.similarity,
                terms=lexemes.get(episode_id, frozenset()),
                stated_terms=stated.get(episode_id, frozenset()),
                fact=entry.fact,
                exchange=entry.exchange,
                personal=personals.get(episode_id, entry.similarity),
                hit=entry.hit,
                previous=previous.get(episode_id, ("", frozenset()))[0],
                previous_terms=previous.get(episode_id, ("", frozenset()))[1],
                outdated=outdated,
                correction=correction,
                before=tuple(neighbours.get((episode_id, -1), ())),
                after=tuple(neighbours.get((episode_id, 1), ())),
            )
        )
    return seen
