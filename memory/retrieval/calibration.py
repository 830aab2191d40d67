"""Choosing answer selection's weights and the abstention rule from labelled questions.

``stashbird bench answers --fit`` runs this on the LoCoMo calibration split; the
defaults in ``selection`` are its output, and the held-out split is only ever reported.
Two fits, both plain gradient descent (Adam) so that the result depends on nothing but
the data:

- the selection weights: a listwise softmax over each answerable question's messages,
  maximising the probability of its evidence messages (L2 ``SELECTION_L2``);
- the doubt's coefficients: a logistic fit of adversarial against answerable questions
  on the ``Doubt`` signals of the choice those weights make, without regularisation;
  then the threshold (see ``threshold``): the one that clears both targets,
  ``REFUSED_AT_MOST`` of the answerable questions refused and ``NOT_IN_MEMORY_AT_LEAST``
  of the adversarial ones, by the same margin, counted in how much a split's figure
  moves from one set of conversations to another, so that another split meets both as
  surely. Questions refused before the doubt (someone never mentioned, nothing related)
  count as refused.

Pure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memory.retrieval.selection import (
    DEFAULT_WEIGHTS,
    FEATURES,
    AbstentionRule,
    Choice,
    SelectionWeights,
    choose,
)

SELECTION_L2 = 0.01
SELECTION_STEPS = 1500
ABSTENTION_STEPS = 8000
# The abstention targets: at most this share of answerable questions refused, at least
# this share of adversarial ones ("not in memory").
REFUSED_AT_MOST = 0.10
NOT_IN_MEMORY_AT_LEAST = 0.50
DOUBT_SIGNALS = ("mismatch", "exchange_gap", "personal_gap", "meaning_gap", "named")


@dataclass(frozen=True)
class Labelled:
    """A question's offline choice (made with any weights: it keeps what it read) and
    what the benchmark knows of it."""

    choice: Choice
    evidence: frozenset[str]  # platform ids of the messages that answer it
    adversarial: bool = False
    conversation: str = ""  # the conversation asked: the threshold reads how figures vary between them


def _adam(gradient: Callable[[np.ndarray], np.ndarray], size: int, steps: int, rate: float = 0.05) -> np.ndarray:
    """Minimise with Adam from zero; ``gradient(w)`` returns the gradient at ``w``."""
    weights, first, second = np.zeros(size), np.zeros(size), np.zeros(size)
    for step in range(1, steps + 1):
        grad = gradient(weights)
        first = 0.9 * first + 0.1 * grad
        second = 0.999 * second + 0.001 * grad * grad
        weights -= rate * (first / (1 - 0.9**step)) / (np.sqrt(second / (1 - 0.999**step)) + 1e-8)
    return weights


def _lists(questions: Sequence[Labelled]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per answerable question with evidence among its messages: the feature matrix and
    which rows are evidence."""
    lists = []
    for question in questions:
        ranked = question.choice.ranked
        if question.adversarial or not ranked:
            continue
        table = question.choice.features
        rows = np.array([[table[seen.episode.episode_id][name] for name in FEATURES] for seen, _ in ranked])
        gold = np.array([seen.episode.platform_message_id in question.evidence for seen, _ in ranked], dtype=float)
        if gold.any():
            lists.append((rows, gold))
    return lists


def fit_selection(questions: Sequence[Labelled], l2: float = SELECTION_L2, steps: int = SELECTION_STEPS) -> SelectionWeights:
    """The weights under which each question's evidence messages are the likeliest
    first (a softmax over its messages), rounded to two decimals."""
    lists = _lists(questions)
    if not lists:
        raise ValueError("no answerable question has an evidence message among its messages")

    def gradient(weights: np.ndarray) -> np.ndarray:
        total = l2 * weights
        for rows, gold in lists:
            scores = rows @ weights
            p = np.exp(scores - scores.max())
            p /= p.sum()
            on_gold = p * gold
            total = total + rows.T @ (p - on_gold / on_gold.sum()) / len(lists)
        return total

    fitted = _adam(gradient, len(FEATURES), steps)
    values: dict[str, Any] = {n: round(float(w), 2) for n, w in zip(FEATURES, fitted, strict=True)}
    return dataclasses.replace(DEFAULT_WEIGHTS, **values)


def _rechosen(questions: Sequence[Labelled], weights: SelectionWeights) -> list[Choice]:
    """Each question chosen again under ``weights`` with no doubt threshold."""
    open_rule = dataclasses.replace(weights, abstention=dataclasses.replace(weights.abstention, refuse_above=math.inf))
    return [choose(q.choice.cues, [s for s, _ in q.choice.ranked], q.choice.speakers, open_rule) for q in questions]


def _refused_first(choice: Choice) -> bool:
    """Refused before the doubt is read: nothing shown, someone never mentioned, or
    nothing related."""
    return not choice.ranked or choice.unknown or choice.unrelated


def fit_abstention(
    questions: Sequence[Labelled],
    weights: SelectionWeights,
    refused_at_most: float = REFUSED_AT_MOST,
    not_in_memory_at_least: float = NOT_IN_MEMORY_AT_LEAST,
) -> AbstentionRule:
    """The doubt's coefficients and threshold for choices made with ``weights`` (see the
    module doc)."""
    choices = _rechosen(questions, weights)
    signals, adversarial = [], []
    for question, choice in zip(questions, choices, strict=True):
        if _refused_first(choice) or choice.signals is None:
            continue
        signals.append([float(getattr(choice.signals, name)) for name in DOUBT_SIGNALS] + [1.0])
        adversarial.append(float(question.adversarial))
    x, y = np.array(signals), np.array(adversarial)
    if not len(y) or y.min() == y.max():
        raise ValueError("the abstention fit needs both adversarial and answerable questions")

    def gradient(w: np.ndarray) -> np.ndarray:
        p = 1 / (1 + np.exp(-(x @ w)))
        return np.asarray(x.T @ (p - y) / len(y))

    fitted = _adam(gradient, x.shape[1], ABSTENTION_STEPS)
    rule = dataclasses.replace(
        weights.abstention,
        **{n: round(float(w), 3) for n, w in zip(DOUBT_SIGNALS, fitted[:-1], strict=True)},
        bias=round(float(fitted[-1]), 3),
    )
    # The rule changes only the doubt's score, not what it is scored from.
    rated = [
        Rated(q.conversation, q.adversarial, math.inf if _refused_first(c) or c.signals is None else c.signals.score(rule))
        for q, c in zip(questions, choices, strict=True)
    ]
    return dataclasses.replace(rule, refuse_above=threshold(rated, refused_at_most, not_in_memory_at_least))


@dataclass(frozen=True)
class Rated:
    """A question's doubt under a rule (infinite: refused before the doubt is read)."""

    conversation: str
    adversarial: bool
    doubt: float


def margins(rated: Sequence[Rated], at: float, refused_at_most: float, not_in_memory_at_least: float) -> tuple[float, float]:
    """How far the figures at threshold ``at`` clear the two targets (answerable refused,
    adversarial refused), each in standard errors of the difference between this split's
    figure and another split's of as many conversations: the spread of the conversations'
    own figures times sqrt(2 / n). Questions of one conversation vary together (its
    people, its topics), so the spread is between conversations, not between questions.
    Pure."""

    def refused(rows: Sequence[Rated]) -> float:
        return sum(r.doubt > at for r in rows) / len(rows)

    def margin(adversarial: bool, cleared: Callable[[float], float]) -> float:
        asked = [r for r in rated if r.adversarial == adversarial]
        by_conversation: dict[str, list[Rated]] = {}
        for r in asked:
            by_conversation.setdefault(r.conversation, []).append(r)
        if len(by_conversation) < 2:
            raise ValueError("the abstention threshold needs questions of two conversations or more")
        own = [refused(mine) for mine in by_conversation.values()]
        lead = cleared(refused(asked))
        spread = float(np.std(own, ddof=1)) * math.sqrt(2 / len(own))
        if not spread:  # every conversation alike: the target is met or missed for certain
            return math.copysign(math.inf, lead) if lead else 0.0
        return lead / spread

    return (
        margin(False, lambda share: refused_at_most - share),
        margin(True, lambda share: share - not_in_memory_at_least),
    )


def threshold(rated: Sequence[Rated], refused_at_most: float, not_in_memory_at_least: float) -> float:
    """The doubt threshold (on a grid of 0.01) whose smaller margin (see ``margins``) is
    the largest; the lowest of equals. Pure."""
    doubts = {r.doubt for r in rated if math.isfinite(r.doubt)}
    if not doubts:
        return 0.0
    grid = sorted({round(d + side, 2) for d in doubts for side in (-0.005, 0.005)})
    return max(grid, key=lambda at: (min(margins(rated, at, refused_at_most, not_in_memory_at_least)), -at))


def calibrate(questions: Sequence[Labelled]) -> SelectionWeights:
    """Selection weights and abstention rule chosen on ``questions``."""
    weights = fit_selection(questions)
    return dataclasses.replace(weights, abstention=fit_abstention(questions, weights))
