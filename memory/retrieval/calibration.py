"""Choosing answer selection's weights and the abstention rule from labelled questions.

``stashbird bench answers --fit`` runs this on the LoCoMo calibration split; the
defaults in ``selection`` are its output, and the held-out split is only ever reported.
Two fits, both plain gradient descent (Adam) so that the result depends on nothing but
the data:

- the selection weights: a listwise softmax over each answerable question's messages,
  maximising the probability of its evidence messages (L2 ``SELECTION_L2``);
- the doubt's coefficients: a logistic fit of adversarial against answerable questions
  on the ``Doubt`` signals of the choice those weights make, without regularisation;
  the threshold is the lowest that refuses at most ``REFUSE_SHARE`` of the answerable
  questions, counting those refused before the doubt (someone never mentioned, nothing
  related), on a grid of 0.01.

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
REFUSE_SHARE = 0.08
DOUBT_SIGNALS = ("mismatch", "exchange_gap", "personal_gap", "meaning_gap", "named")


@dataclass(frozen=True)
class Labelled:
    """A question's offline choice (made with any weights: it keeps what it read) and
    what the benchmark knows of it."""

    choice: Choice
    evidence: frozenset[str]  # platform ids of the messages that answer it
    adversarial: bool = False


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


def fit_abstention(questions: Sequence[Labelled], weights: SelectionWeights, share: float = REFUSE_SHARE) -> AbstentionRule:
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
    answerable = [
        dataclasses.replace(c, doubt=c.signals.score(rule)) if c.signals is not None else c
        for q, c in zip(questions, choices, strict=True)
        if not q.adversarial
    ]
    return dataclasses.replace(rule, refuse_above=threshold(answerable, share))


def threshold(answerable: Sequence[Choice], share: float) -> float:
    """The lowest doubt threshold (on a grid of 0.01) above which at most ``share`` of
    the answerable questions are refused, those refused before the doubt included."""
    allowed = math.floor(share * len(answerable)) - sum(_refused_first(c) for c in answerable)
    doubts = sorted((c.doubt for c in answerable if not _refused_first(c)), reverse=True)
    if allowed >= len(doubts):
        return round(doubts[-1] - 0.005, 2) if doubts else 0.0
    return round(doubts[max(allowed, 0)] + 0.005, 2)


def calibrate(questions: Sequence[Labelled]) -> SelectionWeights:
    """Selection weights and abstention rule chosen on ``questions``."""
    weights = fit_selection(questions)
    return dataclasses.replace(weights, abstention=fit_abstention(questions, weights))
