"""The offline extractor: spaCy named entities plus dependency rules for simple
subject-verb-object facts, so a deployment without an LLM still builds a useful graph.

Rules, per clause (a verb that is the root of a sentence or a conjunct):
- subject: ``I`` is the speaker (first-person statements), a named entity or a proper
  noun is itself; any other subject (he, it, this, ...) is skipped: without
  coreference resolution a guess would put facts on the wrong entity.
- object: the direct object, else the attribute of a copula ("I am a teacher"), else
  the object of the first preposition ("I moved to Boston": predicate ``move_to``).
  Pronouns and vague nouns (thing, lot, ...) are skipped.
- predicate: the verb's lemma (``not_`` first when negated) plus the preposition.
- fact: the clause from the verb to the end of the object, with the subject's name
  instead of "I" and the verb as the speaker said it, turned to the third person
  ("I sit on the fourth floor" becomes "Marco sits on the fourth floor", "I have a cat"
  "Alice has a cat"; the tense is kept).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from memory.consolidation.extraction.base import (
    Chunk,
    ExtractedEntity,
    ExtractedRelation,
    Extraction,
)
from memory.consolidation.extraction.nlp import ENTITY_TYPES, parse
from memory.graph.reconcile import normalize_name

if TYPE_CHECKING:
    from spacy.tokens import Doc, Span, Token

FIRST_PERSON = {"i"}
VAGUE = {
    "thing",
    "things",
    "lot",
    "lots",
    "time",
    "times",
    "way",
    "one",
    "bit",
    "kind",
    "sort",
    "something",
    "anything",
    "everything",
    "nothing",
    "fun",
    "idea",
    "day",
    "week",
    "month",
    "year",
    "moment",
    "stuff",
}
_IRREGULAR_THIRD = {"have": "has", "do": "does", "be": "is", "go": "goes"}
_FIRST_PERSON_WORDS = {
    "am": "is",
    "'m": "is",
    "’m": "is",
    "my": "{s}'s",
    "myself": "themself",
    "me": "{s}",
    "'ve": "has",
    "’ve": "has",
}


@dataclass
class LineFindings:
    """What one line states: entities (name, type) and facts (subject, predicate, object, fact)."""

    entities: list[tuple[str, str]] = field(default_factory=list)
    relations: list[tuple[str, str, str, str]] = field(default_factory=list)


def _entity_at(token: Token) -> Span | None:
    for ent in token.doc.ents:
        if ent.start <= token.i < ent.end and ent.label_ in ENTITY_TYPES:
            return ent
    return None


def _phrase(token: Token) -> tuple[str, str] | None:
    """The name and type of the thing a subject/object token refers to, if it is one."""
    ent = _entity_at(token)
    if ent is not None:
        return ent.text, ENTITY_TYPES[ent.label_]
    if token.pos_ == "PROPN":
        words = [t for t in token.lefts if t.dep_ == "compound" and t.pos_ == "PROPN"] + [token]
        return " ".join(t.text for t in words), "thing"
    if token.pos_ == "NOUN" and token.lemma_.lower() not in VAGUE:
        words = [t for t in token.lefts if t.dep_ in ("compound", "amod") and t.is_alpha] + [token]
        return " ".join(t.text.lower() for t in words), "thing"
    return None


def _object(verb: Token) -> tuple[Token, str] | None:
    """The object token and the predicate suffix (a preposition, or empty)."""
    children = list(verb.children)
    for dep in ("dobj", "attr"):
        for child in children:
            if child.dep_ == dep:
                return child, ""
    for child in children:
        if child.dep_ == "prep":
            for grandchild in child.children:
                if grandchild.dep_ == "pobj":
                    return grandchild, child.lemma_.lower()
    return None


def third_person(verb: str) -> str:
    """A present-tense verb as said of someone else: sit -> sits, have -> has,
    do -> does, watch -> watches, try -> tries. Pure."""
    lower = verb.lower()
    if lower in _IRREGULAR_THIRD:
        inflected = _IRREGULAR_THIRD[lower]
    elif lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        inflected = lower + "es"
    elif lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        inflected = lower[:-1] + "ies"
    else:
        inflected = lower + "s"
    return inflected.capitalize() if verb[:1].isupper() else inflected


def _fact(verb: Token, obj: Token, subject: str, first_person: bool) -> str:
    doc = verb.doc
    start = min([verb.i] + [c.i for c in verb.lefts if c.dep_ in ("aux", "auxpass", "neg")])
    end = obj.right_edge.i
    words = []
    for token in doc[start : end + 1]:
        text = token.text
        if first_person and text.lower() in _FIRST_PERSON_WORDS:
            text = _FIRST_PERSON_WORDS[text.lower()].format(s=subject)
        elif first_person and token.i == start and token.tag_ == "VBP":
            text = third_person(text)
        words.append(text + token.whitespace_)
    return f"{subject} {''.join(words).strip()}"


def findings(doc: Doc, speaker: str) -> LineFindings:
    found = LineFindings()
    for ent in doc.ents:
        if ent.label_ in ENTITY_TYPES and (ent.text, ENTITY_TYPES[ent.label_]) not in found.entities:
            found.entities.append((ent.text, ENTITY_TYPES[ent.label_]))
    for verb in doc:
        if verb.pos_ not in ("VERB", "AUX") or verb.dep_ not in ("ROOT", "conj"):
            continue
        subject_token = next((c for c in verb.children if c.dep_ == "nsubj"), None)
        if subject_token is None:
            continue
        subject: tuple[str, str] | None
        first_person = subject_token.lower_ in FIRST_PERSON
        if first_person:
            subject = (speaker, "person")
        elif subject_token.pos_ == "PROPN" or _entity_at(subject_token) is not None:
            subject = _phrase(subject_token)
        else:
            continue
        found_object = _object(verb)
        if subject is None or found_object is None:
            continue
        obj_token, preposition = found_object
        obj = _phrase(obj_token)
        if obj is None or normalize_name(obj[0]) == normalize_name(subject[0]):
            continue
        lemma = "is" if verb.lemma_ == "be" else verb.lemma_.lower()
        negated = any(c.dep_ == "neg" for c in verb.children)
        predicate = "_".join(p for p in ("not" if negated else "", lemma, preposition) if p)
        for item in (subject, obj):
            if item not in found.entities:
                found.entities.append(item)
        found.relations.append((subject[0], predicate, obj[0], _fact(verb, obj_token, subject[0], first_person)))
    return found


def analyse(lines: Sequence[tuple[str, str]]) -> list[LineFindings]:
    """Findings per (speaker, text) line."""
    return [findings(doc, speaker) for doc, (speaker, _) in zip(parse(text for _, text in lines), lines, strict=False)]


class OfflineExtractor:
    """Entities and facts from spaCy, one line at a time; each cites its own episode."""

    async def extract(self, chunk: Chunk) -> Extraction:
        lines = [line for line in chunk.new_lines if line.role != "bot"]
        entities: dict[str, ExtractedEntity] = {}
        relations: list[ExtractedRelation] = []
        for line, found in zip(lines, analyse([(line.speaker, line.text) for line in lines]), strict=False):
            episode = frozenset({line.episode_id})
            for name, type_ in found.entities:
                key = normalize_name(name)
                previous = entities.get(key)
                support = episode | previous.episode_ids if previous else episode
                entities[key] = ExtractedEntity(previous.name if previous else name, type_, "", support)
            relations += [
                ExtractedRelation(subject, predicate, obj, fact, episode, valid_from=line.time)
                for subject, predicate, obj, fact in found.relations
            ]
        return Extraction(list(entities.values()), relations)
