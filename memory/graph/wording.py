"""Per-witness wording, and how a record's text is rendered from it (pure functions).

Every provenance link keeps what its own message said: for a relation, the fact
sentence, valid-from and the sentence's vector; for an entity, the name form and type
the message used and its summary contribution. An extraction may draw one sentence from
several messages (its ``sources``): that wording is all of theirs, and it goes as soon
as any of them goes, since which words came from which message cannot be told.

The rendering rule, and why:

- A relation shows the wording of its earliest witness (lowest episode id, that is
  arrival order) that still has one. Earliest, because it is stable: a message that
  repeats a fact later joins the provenance without changing what the record says (no
  re-embedding, no churn in the search index), and it is the wording consolidation gave
  the record when it created it, so creation and deletion follow one rule. When no
  witness has wording left, the relation is rendered from its structure ("Yara lives in
  Brindlemere", from the subject's and object's names and the predicate) and has no
  valid-from: no surviving message dates it.
- An entity shows its earliest witness's name form and type (for the same reason) and
  the summary of its latest witness that has one: consolidation replaces an entity's
  summary with the newest extraction's, which was written knowing the most.

So a kept record never shows a word that only a deleted message said, and whoever a
fact is attributed to said it (memory.retrieval.evidence cites the surviving witnesses).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime


@dataclass(frozen=True)
class FactWording:
    """What one extraction said of a relation, and the episodes it drew that from."""

    fact: str
    valid_from: datetime | None
    sources: frozenset[int]
    embedding: Sequence[float] | None = None


@dataclass(frozen=True)
class RelationWitness:
    episode_id: int
    wording: FactWording | None  # None: its wording drew on a message that is gone


@dataclass(frozen=True)
class EntityWitness:
    """One message's mention of an entity: the name form and type it used, and the
    summary an extraction wrote from ``summary_sources`` ("" when none or gone)."""

    episode_id: int
    name: str
    type: str
    summary: str = ""
    summary_sources: frozenset[int] = frozenset()


@dataclass(frozen=True)
class EntityText:
    name: str
    type: str
    summary: str
    summary_sources: frozenset[int]


def retract_relation_witness(witnesses: Iterable[RelationWitness], episode_id: int) -> list[RelationWitness]:
    """The witnesses left when ``episode_id`` goes: its own link, and every wording
    drawn from it."""
    return [
        w if w.wording is None or episode_id not in w.wording.sources else replace(w, wording=None)
        for w in witnesses
        if w.episode_id != episode_id
    ]


def retract_entity_witness(witnesses: Iterable[EntityWitness], episode_id: int) -> list[EntityWitness]:
    """As ``retract_relation_witness``: a name form is its own message's; a summary goes
    with any of its sources."""
    return [
        w if episode_id not in w.summary_sources else replace(w, summary="", summary_sources=frozenset())
        for w in witnesses
        if w.episode_id != episode_id
    ]


def render_fact(witnesses: Iterable[RelationWitness]) -> RelationWitness | None:
    """The witness whose wording the relation shows: the earliest that has one."""
    worded = [w for w in witnesses if w.wording is not None and w.wording.fact]
    return min(worded, key=lambda w: w.episode_id, default=None)


def structural_fact(subject: str, predicate: str, object_: str) -> str:
    """A relation's text when no witness's wording is left."""
    return f"{subject} {' '.join(predicate.replace('_', ' ').split())} {object_}"


def render_entity(witnesses: Iterable[EntityWitness]) -> EntityText | None:
    """Name form and type of the earliest witness, summary of the latest with one;
    None without witnesses (the entity is then removed or anchored, never rendered)."""
    ordered = sorted(witnesses, key=lambda w: w.episode_id)
    if not ordered:
        return None
    summarised = [w for w in ordered if w.summary]
    latest = summarised[-1] if summarised else None
    return EntityText(
        ordered[0].name,
        ordered[0].type,
        latest.summary if latest else "",
        latest.summary_sources if latest else frozenset(),
    )
