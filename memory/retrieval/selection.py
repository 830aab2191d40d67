"""Offline answer selection: which of the retrieved messages answers the question.

Retrieval ranks messages by how much they resemble the question; a person wants the
message that *answers* it. Every message the evidence shows (a hit, its chain
surroundings, the messages behind a retrieved fact) is scored on what can be read
without a model:

- ``similarity``: cosine of its own vector with the question's, ``exchange`` that of
  its searched vector (its own plus half the previous message's: an answer is often
  found by the question before it);
- ``coverage``: the idf-weighted share of the question's content terms it holds
  (speaker names left out: who is asked about is the next feature), ``stated`` the
  same in the sentences that ask nothing;
- ``rank``: the fused retrieval score of the item that brought it, relative to the best;
  ``hit``: it was retrieved itself, not only shown around a hit or behind a fact;
- ``about``: when the question names one speaker, +1 for a message by that person or
  naming them, -1 otherwise (the speaker's name no longer decides the match alone);
- ``answer_type``: a time for "when", a number for "how many/long/much", a name for
  "who", a place for "where";
- ``fact``: a relation fact retrieved for the question rests on this message (its
  weight came out near zero on LoCoMo, where the offline extractor finds few facts);
- ``asks``: it asks something itself (then it rarely holds the answer), and
  ``after_question``: the question's share of terms the message before it holds, when
  that one asks something (the answer follows the question it answers);
- ``length``: its length in words (up to 60), a longer message says more;
- ``lead`` and ``follow``: the question's coverage by the exchange the message ends or
  opens: its own terms with those of its exchange's messages (in a channel, its thread's
  or its speaker's and partners', ``exchange.in_exchange``) back to (``lead``) or on to
  (``follow``) the same speaker's previous or next message, when that is at most
  ``EXCHANGE_SPAN`` messages away with no lull over ``EXCHANGE_GAP`` (see
  ``exchange_terms``). One
  speaker's statement is often split by the other's question: "I took my family camping
  last week" / "How was it?" / "We roasted marshmallows..." answers "What did Melanie do
  camping?" in its third message, which holds none of the question's words;
- ``lead_similarity``, ``follow_similarity``, ``lead_personal``, ``follow_personal``: the
  meaning counterpart of ``lead`` and ``follow``: the best ``similarity`` and
  ``personal`` cosine among the messages of that exchange the evidence shows (the
  message itself included). A question in other words than the exchange loses its word
  coverage, not its meaning (first citation, calibration 54.6 -> 55.1%, held-out
  50.1 -> 50.9%, its reworded questions 39.2 -> 40.0% against 49.6 -> 50.4% as
  written; held-out answerable refused 10.6 -> 9.9%);
- ``time``: +1 when the question names a time (resolved by retrieval) and the message
  was said within it, -1 when it names one and the message was not, 0 otherwise;
- ``earliest``: the question asks when, and the message is the first shown that holds
  its weightiest term any shown message holds: something is told when it happens and
  spoken of again later ("meet Toby, my puppy" before "Toby loves the park" answers
  "When did Andrew adopt Toby?"; first citation, calibration 56.0 -> 56.6%, its "when"
  questions 71 -> 72%; held-out 51.3 -> 51.8%, 51 -> 54%);
- ``question``: the message only asks something: it is never quoted as the answer.

The score is a weighted sum (``SelectionWeights``, chosen on the LoCoMo calibration
split, conversations 26, 30, 41, 42, 43; ``stashbird bench answers`` reports the held-out
split). A message whose every fact has been superseded is never quoted first.

"Not in memory" (calibrated abstention): the answer is refused when the question names a
person who is neither a speaker nor named anywhere in the conversation (a run of
capitalised words outside quotes, none of them in any message or entity), when neither
the best message nor its exchanges hold any of the question's terms and no message shown
by or about the person the question names (any message when it names no one) is close
in meaning to it (see ``close``), or when the
*doubt* is above ``AbstentionRule.refuse_above``. The doubt is a logistic score over what
tells LoCoMo's adversarial questions (one speaker's experience given to the other, or an
attribute swapped) from answerable ones (see ``Doubt``): how far the best match, scored
without regard to who it is about, by someone other than the speaker the question names
beats the best message by or about that speaker (``mismatch``), the same gap in the
similarities alone (as asked, as exchanges, in the first person, and their weighted sum:
meaning, not words), and whether the question names one speaker at all. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from memory.retrieval.evidence import EpisodeRef
from memory.retrieval.timeparse import TimeRange
from memory.retrieval.wording import asks, has_answer_type, is_question, mentions

# An exchange (see ``exchange_terms``): at most this many messages on either side, and
# no lull longer than this between two of them.
EXCHANGE_SPAN = 3
EXCHANGE_GAP = timedelta(hours=1)


@dataclass(frozen=True)
class AbstentionRule:
    """The doubt's coefficients (an unregularised logistic fit, adversarial against answerable, on the
    LoCoMo calibration split: conversations 26, 30, 41, 42, 43) and the threshold above
    which the answer is "not in memory": the one that clears both targets (at most 10% of
    answerable questions refused, at least 50% of adversarial ones) by the same margin in
    how much the figures differ between conversations (``calibration.threshold``). There:
    61.2% of adversarial questions refused, 5.8% of answerable ones, unknown people and
    unrelated matches included; the calibration conversations' own figures ran 2.2-9.1%
    and 53-65% (at -0.02), so a split of others moves by a few points. The meaning
    gap's negative weight offsets the similarities inside ``mismatch``, which alone also
    counts the question's words (see ``Doubt``): of 125 answerable calibration questions
    asked in other words (``lab/data/locomo_paraphrases.json``), 5.6% are refused
    against 4.8% as written (at the earlier threshold, 8.0% against 7.2%, and 10.4%
    without the meaning gap). Fitted on the calibration
    questions as written and reworded. ``stashbird bench answers`` reports the held-out
    split."""

    mismatch: float = 1.147
    exchange_gap: float = -1.122
    personal_gap: float = 3.015
    meaning_gap: float = -4.189
    named: float = 3.653
    bias: float = -3.85
    refuse_above: float = -0.05


@dataclass(frozen=True)
class SelectionWeights:
    """Weights of the features (see the module doc) and the abstention rule.

    The weights were chosen on the LoCoMo calibration split (conversations 26, 30, 41,
    42, 43) only, by a listwise softmax fit (L2 0.01) of "the first message is an
    evidence turn" over its answerable questions, as written and reworded
    (``calibration``; ``stashbird bench answers --fit`` prints what it chooses).
    ``stashbird bench answers`` reports the held-out split."""

    similarity: float = 0.21
    exchange: float = 0.55
    coverage: float = 0.25
    stated: float = 0.79
    hit: float = 0.53
    rank: float = 1.54
    about: float = 1.02
    answer_type: float = 1.04
    fact: float = 0.0
    asks: float = -0.45
    after_question: float = 1.67
    length: float = 0.72
    lead: float = 2.85
    follow: float = 0.94
    time: float = 1.12
    earliest: float = 0.65
    personal: float = 0.9
    lead_similarity: float = 0.99
    follow_similarity: float = 0.86
    lead_personal: float = 1.67
    follow_personal: float = 1.21
    # Neither the best message nor the exchange it ends or opens holds any of the
    # question's terms, and no message by or about the person it names is a paraphrase
    # of it (all-MiniLM-L6-v2: unrelated sentences around 0-0.25, paraphrases above 0.5;
    # see ``close``). For questions about what was never discussed (the demo's deleted
    # message); LoCoMo's adversarial questions are on topic, and on its calibration
    # split this refuses none of the answerable ones (0.7% when the best message alone
    # was read for its meaning).
    unrelated_below: float = 0.5
    # The same for the question asked in the first person by the speaker it names (see
    # ``wording.first_person``): a question and the statement answering it score lower than two
    # paraphrases; the named speaker's other messages score 0-0.15.
    personal_below: float = 0.25
    abstention: AbstentionRule = AbstentionRule()


DEFAULT_WEIGHTS = SelectionWeights()


@dataclass(frozen=True)
class Cues:
    """What the question asks, read once: its content terms with their weights, the
    one speaker it names (with the name forms to look for), the answer type it wants,
    and people it names that the conversation does not know."""

    terms: Mapping[str, float]
    named: str | None = None
    name_forms: tuple[str, ...] = ()
    answer_type: str | None = None
    unknown_people: tuple[str, ...] = ()
    time_ranges: tuple[TimeRange, ...] = ()
    first_person: str = ""  # the question as the speaker it names would ask it (see ``wording.first_person``)


@dataclass(frozen=True)
class Turn:
    """A message next to a seen one in the chain, as far as selection reads it."""

    speaker: str
    message_time: datetime
    terms: frozenset[str]


@dataclass(frozen=True)
class Seen:
    """One message as the evidence shows it, with what selection needs to know of it."""

    episode: EpisodeRef
    rank: float  # the fused score of the item that brought it, relative to the best item
    similarity: float
    terms: frozenset[str]
    exchange: float = 0.0  # cosine of its searched (exchange) vector with the question's
    personal: float = 0.0  # cosine of its own vector with that of the question in the first person
    hit: bool = True  # retrieved itself, not only shown around a hit or behind a fact
    stated_terms: frozenset[str] = frozenset()  # the terms of its sentences that ask nothing
    previous: str = ""  # the message before it in the chain
    previous_terms: frozenset[str] = frozenset()
    fact: float = 0.0  # the best relative score of a retrieved relation resting on it
    outdated: bool = False  # every relation it supports has been superseded
    correction: EpisodeRef | None = None  # a message that superseded it
    before: tuple[Turn, ...] = ()  # its exchange's messages before it, nearest first (evidence.in_exchange)
    after: tuple[Turn, ...] = ()  # and after it


@dataclass(frozen=True)
class Choice:
    """The ranked messages (best first) with their scores and, when the answer is
    refused, why; with what it was chosen from (``cues``, ``speakers``), so that it can
    be chosen again under other weights (``calibration``)."""

    ranked: tuple[tuple[Seen, float], ...]
    refusal: str | None = None
    features: Mapping[int, Mapping[str, float]] = field(default_factory=dict)

    unknown: bool = False  # refused because the question names someone never mentioned
    unrelated: bool = False  # the best message and its exchanges hold nothing of the question
    doubt: float = 0.0  # see ``Doubt``: above the rule's threshold, "not in memory"
    signals: Doubt | None = None  # what the doubt was scored from (None: nothing ranked)
    cues: Cues = Cues({})
    speakers: tuple[str, ...] = ()

    @property
    def in_memory(self) -> bool:
        return self.refusal is None and bool(self.ranked)

    @property
    def support(self) -> float:
        """The best message's score (0 when nothing is ranked)."""
        return self.ranked[0][1] if self.ranked else 0.0

    @property
    def mismatch(self) -> float:
        """See ``_mismatch`` (0 when nothing is ranked)."""
        return self.signals.mismatch if self.signals else 0.0


def coverage(cues: Cues, terms: frozenset[str]) -> float:
    """The idf-weighted share of the question's terms among ``terms``. Pure."""
    total = sum(cues.terms.values())
    return sum(w for t, w in cues.terms.items() if t in terms) / total if total else 0.0


def exchange_terms(speaker: str, said_at: datetime, terms: frozenset[str], turns: Sequence[Turn]) -> frozenset[str]:
    """The message's terms with those of ``turns`` (its neighbours on one side, nearest
    first) up to and including the same speaker's nearest message, when that one is at
    most ``EXCHANGE_SPAN`` away with no lull over ``EXCHANGE_GAP`` between; else its own
    terms alone (what others said after it, with no word from it again, is no exchange
    of its own: a question nobody answered does not lend its words to the message
    before it). Pure."""
    return terms.union(*(t.terms for t in turns[: exchange_span(speaker, said_at, turns)]))


def exchange_span(speaker: str, said_at: datetime, turns: Sequence[Turn]) -> int:
    """How many of ``turns`` (nearest first) belong to the message's exchange on that
    side (see ``exchange_terms``): up to and including the same speaker's nearest
    message, or none. Pure."""
    last = said_at
    for index, turn in enumerate(turns[:EXCHANGE_SPAN]):
        if abs(turn.message_time - last) > EXCHANGE_GAP:
            break
        if turn.speaker == speaker:
            return index + 1
        last = turn.message_time
    return 0


Shown = Mapping[tuple[str, datetime], "Seen"]


def exchange_meaning(seen: Seen, turns: Sequence[Turn], shown: Shown) -> tuple[float, float]:
    """The best ``similarity`` and ``personal`` cosine in the exchange the message opens
    or ends (``turns``: one side), itself included, over the messages of it that the
    evidence shows: the meaning counterpart of ``lead`` and ``follow``, which a question
    in other words than the exchange no longer finds by its words. Pure."""
    others = [
        shown.get((t.speaker, t.message_time))
        for t in turns[: exchange_span(seen.episode.speaker, seen.episode.message_time, turns)]
    ]
    members = [seen, *(o for o in others if o is not None)]
    return max(m.similarity for m in members), max(m.personal for m in members)


def in_named_time(ranges: Sequence[TimeRange], said_at: datetime) -> float:
    """+1 inside one of the question's times, -1 outside all, 0 when it names none. Pure."""
    if not ranges:
        return 0.0
    return 1.0 if any(r.contains(said_at) for r in ranges) else -1.0


def first_told(cues: Cues, shown: Sequence[Seen]) -> tuple[str, datetime] | None:
    """For a question asking when: its weightiest term that a shown message holds, and
    when it was first said among them (None for other questions or no such term). Pure."""
    if cues.answer_type != "time":
        return None
    held = [(weight, term) for term, weight in cues.terms.items() if any(term in s.terms for s in shown)]
    if not held:
        return None
    term = max(held)[1]
    return term, min(s.episode.message_time for s in shown if term in s.terms)


def features(
    cues: Cues, seen: Seen, speakers: Sequence[str], shown: Shown | None = None, first: tuple[str, datetime] | None = None
) -> dict[str, float]:
    """The feature values of one message (see the module doc); ``shown``: every message
    the evidence shows by speaker and time (default: this one alone); ``first``: the
    question's ``first_told`` among them. Pure."""
    shown = shown if shown is not None else {}
    lead_similarity, lead_personal = exchange_meaning(seen, seen.before, shown)
    follow_similarity, follow_personal = exchange_meaning(seen, seen.after, shown)
    about = 0.0
    if cues.named is not None:
        by_named = seen.episode.speaker == cues.named
        about = 1.0 if by_named or mentions(seen.episode.text, cues.name_forms) else -1.0
    return {
        "similarity": seen.similarity,
        "exchange": seen.exchange,
        "coverage": coverage(cues, seen.terms),
        "stated": coverage(cues, seen.stated_terms),
        "hit": float(seen.hit),
        "asks": float(asks(seen.episode.text)),
        "after_question": coverage(cues, seen.previous_terms) if asks(seen.previous) else 0.0,
        "length": min(len(seen.episode.text.split()), 60) / 60,
        "rank": seen.rank,
        "about": about,
        "answer_type": float(has_answer_type(cues.answer_type, seen.episode.text, seen.episode.message_time, speakers)),
        "fact": seen.fact,
        "lead": coverage(cues, exchange_terms(seen.episode.speaker, seen.episode.message_time, seen.terms, seen.before)),
        "follow": coverage(cues, exchange_terms(seen.episode.speaker, seen.episode.message_time, seen.terms, seen.after)),
        "time": in_named_time(cues.time_ranges, seen.episode.message_time),
        "earliest": float(first is not None and first[0] in seen.terms and seen.episode.message_time == first[1]),
        "personal": seen.personal,
        "lead_similarity": lead_similarity,
        "follow_similarity": follow_similarity,
        "lead_personal": lead_personal,
        "follow_personal": follow_personal,
        "question": float(is_question(seen.episode.text)),
    }


# The features that read meaning only (vectors, not words): ``Doubt.meaning_gap``.
MEANING = ("similarity", "exchange", "personal")
FEATURES = (
    "similarity",
    "exchange",
    "coverage",
    "stated",
    "hit",
    "rank",
    "about",
    "answer_type",
    "fact",
    "asks",
    "after_question",
    "length",
    "lead",
    "follow",
    "time",
    "earliest",
    "personal",
    "lead_similarity",
    "follow_similarity",
    "lead_personal",
    "follow_personal",
)


def score(values: Mapping[str, float], weights: SelectionWeights) -> float:
    """The weighted sum of the features. Pure."""
    return sum(float(getattr(weights, name)) * values[name] for name in FEATURES)


Scored = tuple[Seen, float, Mapping[str, float]]


def _best(scored: Sequence[Scored], side: float, value: Callable[[Scored], float]) -> float:
    """The best ``value`` among messages about the named speaker (``side`` 1) or not
    (``side`` -1); 0 when there is none."""
    return max((value(row) for row in scored if row[2]["about"] * side > 0), default=0.0)


def _mismatch(cues: Cues, scored: Sequence[Scored], weights: SelectionWeights) -> float:
    """How far the best message of someone other than the named speaker (not speaking
    of them) beats the best message by or about the named speaker, both scored without
    the ``about`` term: LoCoMo's adversarial questions give one speaker's experience to
    the other, and the message that matches best is then the other one's."""
    if cues.named is None or not any(values["about"] < 0 for _, _, values in scored):
        return 0.0

    def neutral(row: Scored) -> float:
        return row[1] - weights.about * row[2]["about"]

    return _best(scored, -1, neutral) - _best(scored, 1, neutral)


@dataclass(frozen=True)
class Doubt:
    """What the abstention rule reads of a selection: ``mismatch`` (see ``_mismatch``);
    ``exchange_gap`` and ``personal_gap``, the best ``exchange`` and ``personal``
    similarity of messages not about the named speaker minus those about them (0
    without a named speaker or without a message not about them), ``meaning_gap`` the
    same for the weighted sum of the ``MEANING`` features; ``named``, whether the
    question names one speaker and some message shown is not about them (with none,
    there is no one the answer could have been swapped with). Only ``mismatch`` counts
    the question's words a message holds (the best message's coverage, the stated terms'
    gap, the best score were read once): a question in other words than the message
    would be doubted for its wording, and the meaning gap, weighed against it, says
    whether the named person's message is as close in meaning as someone else's."""

    mismatch: float
    exchange_gap: float
    personal_gap: float
    named: bool
    meaning_gap: float = 0.0

    def score(self, rule: AbstentionRule) -> float:
        """The logistic score (log-odds) that memory does not hold the answer. Pure."""
        return (
            rule.mismatch * self.mismatch
            + rule.exchange_gap * self.exchange_gap
            + rule.personal_gap * self.personal_gap
            + rule.meaning_gap * self.meaning_gap
            + rule.named * self.named
            + rule.bias
        )


def doubt_of(cues: Cues, scored: Sequence[Scored], weights: SelectionWeights) -> Doubt:
    """The doubt of a selection, ``scored`` best first (not empty). Pure."""

    # Nobody else's message to compare with: nothing to doubt (as for ``_mismatch``).
    contrast = cues.named is not None and any(values["about"] < 0 for _, _, values in scored)

    def gap(name: str) -> float:
        return _best(scored, -1, lambda row: row[2][name]) - _best(scored, 1, lambda row: row[2][name]) if contrast else 0.0

    def meaning(row: Scored) -> float:
        return sum(float(getattr(weights, name)) * row[2][name] for name in MEANING)

    meaning_gap = _best(scored, -1, meaning) - _best(scored, 1, meaning) if contrast else 0.0
    return Doubt(_mismatch(cues, scored, weights), gap("exchange"), gap("personal"), contrast, meaning_gap)


def close(cues: Cues, values: Mapping[str, float], weights: SelectionWeights) -> bool:
    """Is the message close in meaning to the question, as asked or in the first person
    (see ``SelectionWeights.unrelated_below``), and by or about the person the question
    names when it names one? Then the answer is not refused as unrelated, even when the
    best message holds none of the question's words: a question in other words than the
    message is still answered. Someone else's close message does not count: after the
    demo deletes Marco's "I adopted a dog named Biscuit", Alice's "Biscuit is adorable"
    is close to "What is the name of Marco's dog?" but says nothing of his dog. Pure."""
    if cues.named is not None and values["about"] <= 0:
        return False
    return values["similarity"] >= weights.unrelated_below or values["personal"] >= weights.personal_below


def choose(cues: Cues, seen: Sequence[Seen], speakers: Sequence[str], weights: SelectionWeights = DEFAULT_WEIGHTS) -> Choice:
    """Messages by score, outdated ones after every current one, and whether to refuse.
    Bot messages never count as an answer. Pure."""
    scored = []
    # A bare question resembles the question asked without answering it: not in an exchange's meaning.
    shown = {
        (item.episode.speaker, item.episode.message_time): item
        for item in seen
        if not item.episode.is_bot and not is_question(item.episode.text)
    }
    first = first_told(cues, list(shown.values()))
    for item in seen:
        if item.episode.is_bot:
            continue
        values = features(cues, item, speakers, shown, first)
        scored.append((item, score(values, weights), values))
    # A bare question never answers; an outdated message never leads while a current one is there.
    scored = [row for row in scored if not row[2]["question"]]
    scored.sort(key=lambda row: (row[0].outdated, -row[1], row[0].episode.episode_id))
    ranked = tuple((item, s) for item, s, _ in scored)
    table = {item.episode.episode_id: values for item, _, values in scored}
    if not ranked:
        return Choice((), "nothing stored answers it", table, cues=cues, speakers=tuple(speakers))
    doubt = doubt_of(cues, scored, weights)
    best = scored[0][2]
    held = max(best["coverage"], best["lead"], best["follow"])
    unrelated = held == 0 and not any(close(cues, values, weights) for _, _, values in scored)
    value = doubt.score(weights.abstention)
    reason = refusal(cues, doubt, value, weights.abstention) or ("nothing stored says what is asked" if unrelated else None)
    return Choice(ranked, reason, table, bool(cues.unknown_people), unrelated, value, doubt, cues, tuple(speakers))


def refusal(cues: Cues, doubt: Doubt, value: float, rule: AbstentionRule) -> str | None:
    """Why the answer is "not in memory" (None: it is not refused), given the doubt and
    its score. Pure."""
    if cues.unknown_people:
        return f"{', '.join(cues.unknown_people)} never appears in this conversation"
    if value <= rule.refuse_above:
        return None
    if cues.named is not None and (doubt.mismatch > 0 or doubt.personal_gap > 0):
        return f"what matches was said by someone other than {cues.named}"
    return "nothing stored answers it"
