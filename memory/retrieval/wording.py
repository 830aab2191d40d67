"""What the words of a question or a message say, read by rule (no model, no vectors):
the kind of answer a question asks for and whether a message holds one, whether a
message asks something or speaks of someone, the question as the person it names would
ask it, and the weight of each of its terms. Apart from answer selection
(memory.retrieval.selection), which scores messages on these among other features,
because reading the question's cues (memory.retrieval.reading) needs them as well. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from memory.retrieval.search_plan import term_weight
from memory.retrieval.timeparse import asks_when, states_time

_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|hundred|thousand|"
    "once|twice|couple|few|several|dozen|first|second|third"
)
_HAS_NUMBER = re.compile(rf"\b(\d+|{_NUMBER_WORDS})\b", re.IGNORECASE)
_ASKS_NUMBER = re.compile(r"^\W*how (many|much|long|often|old|far)\b", re.IGNORECASE)
_ASKS_PERSON = re.compile(r"^\W*(who|whom|whose)\b", re.IGNORECASE)
_ASKS_PLACE = re.compile(r"^\W*where\b", re.IGNORECASE)
_CAPITALISED = re.compile(r"\b[A-Z][a-z]{2,}\b")
# Capitalised words that start sentences rather than name someone.
_STARTERS = set(
    "The This That These Those There Then They Their She Her His Him Its It's We Our You Your Yes Yeah Not "
    "And But Also Thanks Thank Sure Sounds Great Good Nice Wow Hey Hi Hello What When Where Who Why How Which "
    "Did Does Can Could Would Should Will Just Really Oh Well Let Lol Haha Correction Reminder Noted Welcome".split()
)
_PLACE = re.compile(r"\b(in|at|to|from|near|visit(?:ed|ing)?)\s+(the\s+)?[A-Z][a-z]+", re.UNICODE)
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")


def answer_type(question: str) -> str | None:
    """The kind of answer the question asks for, if its form says. Pure."""
    if asks_when(question):
        return "time"
    if _ASKS_NUMBER.search(question):
        return "number"
    if _ASKS_PERSON.search(question):
        return "person"
    if _ASKS_PLACE.search(question):
        return "place"
    return None


def has_answer_type(kind: str | None, text: str, said_at: datetime, speakers: Sequence[str]) -> bool:
    """Does the message hold the kind of thing asked for? Pure."""
    if kind == "time":
        return states_time(text, said_at)
    if kind == "number":
        return bool(_HAS_NUMBER.search(text))
    if kind == "person":
        first_names = {s.split()[0] for s in speakers if s.split()} | _STARTERS
        return any(word not in first_names for word in _CAPITALISED.findall(text))
    if kind == "place":
        return bool(_PLACE.search(text))
    return False


_AUXILIARY = {"is": "am", "was": "was", "does": "do", "has": "have"}
_SUBJECT_BEFORE = re.compile(
    r"(^|[.?!]\s*|\b(?:(?:is|was|does|did|do|has|have|had|would|could|should|might|must|ca|wo)(?:n['’]t)?|can|will|may|"
    r"and|or|when|where|why|how|what|which|who|that|if|since|after|before|while)\s+)$",
    re.IGNORECASE,
)
_THIRD_PERSON_AUXILIARY = re.compile(r"\b(is|was|does|has)\s+I\b", re.IGNORECASE)
_AFTER_I = {"is": "am", "has": "have", "does": "do"}
# The named speaker's pronouns ("her" is left: it is as often someone else's).
_PRONOUNS = {"he": "I", "she": "I", "his": "my", "him": "me", "himself": "myself", "herself": "myself"}


def first_person(question: str, forms: Sequence[str]) -> str:
    """The question as the speaker it names would ask it of themselves ("Where is Omar
    based now?" becomes "Where am I based now?"): a message says "I moved to Rotterdam",
    never its speaker's name, and the name dominates the question's embedding (all-MiniLM-L6-v2:
    0.12 between those two, 0.40 once the question says "I"), their pronouns too. The
    question as it is when it names nobody. Pure."""
    names = sorted((f for f in forms if f), key=len, reverse=True)
    if not names:
        return question
    alternatives = "|".join(re.escape(n) for n in names)

    def person(match: re.Match[str]) -> str:
        if match.group(2):
            return "my"
        return "I" if _SUBJECT_BEFORE.search(question[: match.start()]) else "me"

    rewritten = re.sub(rf"\b({alternatives})(['’]s\b)?", person, question)
    rewritten = re.sub(r"\b(he|she|his|him|himself|herself)\b", lambda m: _PRONOUNS[m.group(1)], rewritten)

    def agree(match: re.Match[str]) -> str:
        verb = _AUXILIARY[match.group(1).lower()]
        return f"{verb.capitalize() if match.group(1)[0].isupper() else verb} I"

    rewritten = _THIRD_PERSON_AUXILIARY.sub(agree, rewritten)
    return re.sub(r"\bI\s+(is|has|does)\b", lambda m: f"I {_AFTER_I[m.group(1)]}", rewritten)


# "Tell me", "remind me": the asker asks the bot, not about themselves.
_ASKED_OF_THE_BOT = re.compile(r"\b(?:tell|remind|show|give|send|let|help|get|find|ask|answer|update)\s+me\b", re.IGNORECASE)
_ASKER = re.compile(r"(?<![\w'’])(i|me|my|mine|myself)(?![\w'’])|(?<![\w'’])i['’](m|ve|ll|d)\b", re.IGNORECASE)
_ASKER_CONTRACTED = {"m": "is", "ve": "has", "ll": "will", "d": "had"}
# Agreement with a name: "do I" -> "does Ann", "I have" -> "Ann has".
_BEFORE_ASKER = {"am": "is", "do": "does", "have": "has"}
_AFTER_ASKER = {"am": "is", "do": "does", "have": "has", "don't": "doesn't", "don’t": "doesn’t", "haven't": "hasn't"}


def asks_about_asker(question: str) -> bool:
    """Whether the question asks about the person asking it ("What did I say about the
    launch?", "when is my flight?"), not only asks them something ("remind me what Bo
    said"). Pure."""
    return bool(_ASKER.search(_ASKED_OF_THE_BOT.sub(" ", question)))


def third_person(question: str, name: str) -> str:
    """The question the person called ``name`` asks about themselves, as anyone would ask
    it about them ("What did I say about the launch?" asked by Ann becomes "What did Ann
    say about the launch?"): messages say "Ann", the speakers' lists and selection look
    for who a question names, and the bot is "I" to a model reading it. "Tell me" and
    "remind me" stay (they ask the bot); the inverse of ``first_person``. Pure."""
    kept: list[tuple[int, int]] = [m.span() for m in _ASKED_OF_THE_BOT.finditer(question)]

    def person(match: re.Match[str]) -> str:
        if any(start <= match.start() < end for start, end in kept):
            return match.group(0)
        word = (match.group(1) or "").lower()
        if match.group(2):
            return f"{name} {_ASKER_CONTRACTED[match.group(2).lower()]}"
        return f"{name}'s" if word in ("my", "mine") else name

    rewritten = _ASKER.sub(person, question)
    named = re.escape(name)
    rewritten = re.sub(
        rf"\b(am|do|have)\s+{named}\b",
        lambda m: f"{_match_case(_BEFORE_ASKER[m.group(1).lower()], m.group(1))} {name}",
        rewritten,
        flags=re.IGNORECASE,
    )
    return re.sub(
        rf"\b{named}\s+(am|do|have|don['’]t|haven't)\b",
        lambda m: f"{name} {_AFTER_ASKER[m.group(1).lower()]}",
        rewritten,
        flags=re.IGNORECASE,
    )


def _match_case(word: str, like: str) -> str:
    return word.capitalize() if like[:1].isupper() else word


def is_question(text: str) -> bool:
    """Every sentence of the message asks something. Pure."""
    sentences = [s.strip() for s in _SENTENCE.findall(text) if s.strip()]
    return bool(sentences) and all(s.endswith("?") for s in sentences)


_INTERJECTION = r"(?:hey|hi|hello|thanks|thank you|wow|oh|yeah|yes|aw+|omg|congrats|congratulations|sure|great|nice|ok|okay)"


def mentions(text: str, forms: Sequence[str]) -> bool:
    """Does the message speak *of* someone (not merely *to* them: "Thanks, Mel!" or
    "Hey Caroline, ..." address a person and say nothing about them)? Pure."""
    for form in forms:
        if not form:
            continue
        for match in re.finditer(rf"\b{re.escape(form)}\b", text, re.IGNORECASE):
            before, after = text[: match.start()], text[match.end() :]
            opens = re.search(rf"(^|[.!?]\s*|,\s*|{_INTERJECTION}[\s,]*)$", before, re.IGNORECASE)
            closes = re.match(r"\s*([,!?.]|$)", after)
            if not (opens and closes):
                return True
    return False


def term_weights(shares: Mapping[str, float], sampled: int, exclude: Sequence[str] = ()) -> dict[str, float]:
    """BM25 idf of each question term from its share of the conversation's messages (the
    full-text search's ``term_weight``), without the terms in ``exclude`` (speaker names). Pure."""
    return {term: term_weight(share, sampled) for term, share in shares.items() if term not in exclude}


def asks(text: str) -> bool:
    """Some sentence of the message asks something. Pure."""
    return any(s.strip().endswith("?") for s in _SENTENCE.findall(text))
