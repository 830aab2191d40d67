"""Reconciliation rules as pure functions over plain values (no database).

Entities: a mention is compared with its nearest existing entities (cosine of the name
embeddings and rapidfuzz Levenshtein ratio of the names). Both at least
``merge_threshold`` merges; either at least ``adjudicate_threshold`` asks the LLM
(offline: no merge, a new entity); else a new entity. Names with different numbers in
them ("28 January 2023" / "January 2023") are never merged: alike as strings, they
name different values.

Relations, judged against the active relations of the same subject (the loader gives
all of them) and applied to a ``RelationBook``, which the consolidation layer then
writes:

- duplicate: an active relation of the same entity pair with the same normalised
  predicate and a similar fact (rapidfuzz token-set ratio at least
  ``adjudicate_threshold``; for a functional predicate, below, the same value is the
  same fact whatever the wording), or with the same normalised fact. Its episodes are added
  to the relation's provenance; no second active relation is created.
- contradiction: an active relation of the same subject with the same *functional*
  predicate (one that holds a single value at a time: ``FUNCTIONAL_PREDICATES`` after
  the aliases of ``PREDICATE_ALIASES``, e.g. ``moved_to`` is ``lives_in``) but another
  object. The old relation is superseded (kept, invalid from the new fact's
  ``valid_from``, linked to it) and the new one is inserted active.
- new: anything else.

An extractor may supply a decision (the LLM, replayed extractions). It is honoured
with the same target search, relaxed: a ``duplicate`` may target any active relation of
the pair (the most similar fact), a ``contradiction`` any active relation of the subject
with the same predicate, or else the most similar fact of the pair. A hint whose
target cannot be found falls back to ``new``, and a ``new`` that restates an active fact
word for word is still a duplicate, so no hint can create two identical active facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Iterable, Literal, Sequence

from rapidfuzz import fuzz

from memory.params import MemoryParams

FactDecision = Literal["new", "duplicate", "contradiction"]
DECISIONS: tuple[str, ...] = ("new", "duplicate", "contradiction")

PREDICATE_ALIASES = {
    "move_to": "lives_in",
    "moved_to": "lives_in",
    "relocate_to": "lives_in",
    "relocated_to": "lives_in",
    "live_in": "lives_in",
    "lived_in": "lives_in",
    "live_at": "lives_in",
    "resides_in": "lives_in",
    "reside_in": "lives_in",
    "work_at": "works_at",
    "worked_at": "works_at",
    "work_for": "works_at",
    "works_for": "works_at",
    "employed_by": "works_at",
    "work_as": "works_as",
    "worked_as": "works_as",
    "job": "works_as",
    "has_job": "works_as",
    "marry": "married_to",
    "married": "married_to",
    "is_married_to": "married_to",
    "age": "has_age",
    "is_aged": "has_age",
    "born_in": "born_in",
}

FUNCTIONAL_PREDICATES = frozenset(
    {"lives_in", "works_at", "works_as", "married_to", "has_age", "born_in", "favorite", "studies_at", "owns_car", "has_name"}
)

_NON_WORD = re.compile(r"[^a-z0-9]+")


def normalize_name(name: str) -> str:
    """Case, spacing and punctuation do not make a different entity."""
    return " ".join(_NON_WORD.sub(" ", name.casefold()).split())


def normalize_predicate(predicate: str) -> str:
    """snake_case, with aliases of the same relation folded together."""
    key = "_".join(_NON_WORD.sub(" ", predicate.casefold()).split())
    return PREDICATE_ALIASES.get(key, key)


def is_functional(predicate: str) -> bool:
    key = normalize_predicate(predicate)
    return key in FUNCTIONAL_PREDICATES or key.startswith("favorite_")


def name_ratio(a: str, b: str) -> float:
    """Levenshtein similarity of two names in [0, 1] (rapidfuzz ``fuzz.ratio``)."""
    return fuzz.ratio(normalize_name(a), normalize_name(b)) / 100


def fact_similarity(a: str, b: str) -> float:
    return fuzz.token_set_ratio(normalize_name(a), normalize_name(b)) / 100


# --- entities ------------------------------------------------------------------------


@dataclass(frozen=True)
class EntityCandidate:
    entity_id: int
    name: str
    cosine: float


@dataclass(frozen=True)
class EntityDecision:
    kind: Literal["merge", "adjudicate", "new"]
    entity_id: int | None = None  # merge target
    candidates: tuple[EntityCandidate, ...] = ()  # for adjudication


_NUMBER = re.compile(r"\d+")


def numbers_differ(a: str, b: str) -> bool:
    """ "28 January 2023" and "January 2023", or "Apollo 11" and "Apollo 13", are
    different things however alike their names look."""
    return _NUMBER.findall(a) != _NUMBER.findall(b)


def entity_decision(name: str, candidates: Sequence[EntityCandidate], params: MemoryParams) -> EntityDecision:
    """Merge, adjudicate or new, from the nearest existing entities. Candidates whose
    names carry other numbers (dates, ages, versions) are never the same entity."""
    scored = [(c, c.cosine, name_ratio(name, c.name)) for c in candidates if not numbers_differ(name, c.name)]
    merges = [(min(cos, lev), c) for c, cos, lev in scored if cos >= params.merge_threshold and lev >= params.merge_threshold]
    if merges:
        return EntityDecision("merge", max(merges, key=lambda pair: (pair[0], -pair[1].entity_id))[1].entity_id)
    doubtful = tuple(c for c, cos, lev in scored if cos >= params.adjudicate_threshold or lev >= params.adjudicate_threshold)
    if doubtful:
        return EntityDecision("adjudicate", candidates=doubtful)
    return EntityDecision("new")


# --- relations -----------------------------------------------------------------------


@dataclass(frozen=True)
class RelationState:
    """A relation as the rules see it. Relations not yet written have negative ids."""

    relation_id: int
    subject_id: int
    object_id: int
    predicate: str
    fact: str
    provenance: frozenset[int]
    status: str = "active"
    superseded_by: int | None = None
    valid_from: datetime | None = None
    invalid_at: datetime | None = None


@dataclass(frozen=True)
class NewFact:
    subject_id: int
    object_id: int
    predicate: str
    fact: str
    episodes: frozenset[int]
    valid_from: datetime | None = None
    decision: FactDecision | None = None


@dataclass(frozen=True)
class RelationDecision:
    kind: FactDecision
    target_id: int | None = None  # the duplicate or the superseded relation


@dataclass
class RelationBook:
    """The relations a chunk can touch, and the changes the rules made to them."""

    relations: dict[int, RelationState] = field(default_factory=dict)
    inserted: list[int] = field(default_factory=list)  # new ids, in insertion order
    supported: dict[int, set[int]] = field(default_factory=dict)  # existing id -> episodes added
    superseded: list[int] = field(default_factory=list)
    _next_id: int = -1

    @classmethod
    def of(cls, relations: Iterable[RelationState]) -> "RelationBook":
        return cls({r.relation_id: r for r in relations})

    def active_of_subject(self, subject_id: int) -> list[RelationState]:
        return [r for r in self.relations.values() if r.status == "active" and r.subject_id == subject_id]


def _same_fact(a: RelationState, fact: NewFact) -> bool:
    return (
        a.object_id == fact.object_id
        and normalize_predicate(a.predicate) == normalize_predicate(fact.predicate)
        and normalize_name(a.fact) == normalize_name(fact.fact)
    )


def relation_decision(fact: NewFact, active: Sequence[RelationState], params: MemoryParams) -> RelationDecision:
    """Decide for one new fact against the active relations of its subject."""
    predicate = normalize_predicate(fact.predicate)
    pair = [r for r in active if r.object_id == fact.object_id and r.subject_id == fact.subject_id]
    exact = [r for r in pair if _same_fact(r, fact)]
    if exact:
        return RelationDecision("duplicate", exact[0].relation_id)
    same_predicate = [r for r in active if r.subject_id == fact.subject_id and normalize_predicate(r.predicate) == predicate]

    def most_similar(relations: Sequence[RelationState]) -> RelationState:
        return max(relations, key=lambda r: (fact_similarity(r.fact, fact.fact), r.relation_id))

    if fact.decision == "duplicate" and pair:
        in_pair = [r for r in pair if normalize_predicate(r.predicate) == predicate] or pair
        return RelationDecision("duplicate", most_similar(in_pair).relation_id)
    if fact.decision == "contradiction":
        other = [r for r in same_predicate if r.object_id != fact.object_id or not _same_fact(r, fact)] or pair
        if other:
            return RelationDecision("contradiction", most_similar(other).relation_id)
    if fact.decision is None:
        functional = is_functional(predicate)
        similar = [
            r
            for r in pair
            if normalize_predicate(r.predicate) == predicate
            and (functional or fact_similarity(r.fact, fact.fact) >= params.adjudicate_threshold)
        ]
        if similar:
            return RelationDecision("duplicate", most_similar(similar).relation_id)
        if functional:
            other = [r for r in same_predicate if r.object_id != fact.object_id]
            if other:
                return RelationDecision("contradiction", most_similar(other).relation_id)
    return RelationDecision("new")


def apply_relation(book: RelationBook, fact: NewFact, params: MemoryParams, reconcile: bool = True) -> RelationDecision:
    """Decide for ``fact`` and record the outcome in ``book``.

    ``reconcile=False`` inserts every fact as new: the append-only baseline that the
    update benchmark compares against.
    """
    decision = relation_decision(fact, book.active_of_subject(fact.subject_id), params) if reconcile else RelationDecision("new")
    if decision.kind == "duplicate":
        assert decision.target_id is not None
        target = book.relations[decision.target_id]
        book.relations[target.relation_id] = replace(target, provenance=target.provenance | fact.episodes)
        if target.relation_id > 0:
            book.supported.setdefault(target.relation_id, set()).update(fact.episodes)
        return decision
    new_id = book._next_id
    book._next_id -= 1
    book.relations[new_id] = RelationState(
        new_id, fact.subject_id, fact.object_id, fact.predicate, fact.fact, fact.episodes, valid_from=fact.valid_from
    )
    book.inserted.append(new_id)
    if decision.kind == "contradiction":
        assert decision.target_id is not None
        old = book.relations[decision.target_id]
        book.relations[old.relation_id] = replace(old, status="superseded", superseded_by=new_id, invalid_at=fact.valid_from)
        book.superseded.append(old.relation_id)
    return RelationDecision(decision.kind, decision.target_id)
