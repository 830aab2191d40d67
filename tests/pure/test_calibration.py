"""Choosing selection's weights and the abstention rule from labelled questions."""

from __future__ import annotations

import math
import random

from hypothesis import given
from hypothesis import strategies as st

from memory.retrieval.calibration import Labelled, calibrate, fit_selection, threshold
from memory.retrieval.selection import FEATURES, AbstentionRule, Choice, Cues, SelectionWeights, choose
from tests.pure.test_selection import SPEAKERS, seen

OPEN = SelectionWeights(abstention=AbstentionRule(refuse_above=math.inf))


def _planted(rng: random.Random, truth: dict[str, float], size: int) -> Labelled:
    """A question whose evidence is the message the planted weights score best."""
    rows = [{name: rng.uniform(0, 1) for name in FEATURES} for _ in range(size)]
    best = max(range(size), key=lambda i: sum(truth.get(n, 0.0) * rows[i][n] for n in FEATURES))
    ranked = tuple((seen(i, "Tom", f"message {i}"), 0.0) for i in range(size))
    return Labelled(Choice(ranked, features=dict(enumerate(rows))), frozenset({f"m{best}"}))


def test_the_fitted_weights_find_what_the_planted_ones_chose() -> None:
    rng = random.Random(7)
    truth = {"coverage": 3.0, "lead": 2.0, "similarity": -1.5}
    train = [_planted(rng, truth, 8) for _ in range(120)]
    test = [_planted(rng, truth, 8) for _ in range(200)]
    weights = fit_selection(train)
    assert weights.coverage > 0 and weights.lead > 0 and weights.similarity < 0

    def first(question: Labelled) -> bool:
        table = question.choice.features
        best = max(table, key=lambda i: sum(getattr(weights, n) * table[i][n] for n in FEATURES))
        return f"m{best}" in question.evidence

    assert sum(map(first, test)) / len(test) > 0.8


def _rated(doubt: float, refused_first: bool = False) -> Choice:
    return Choice(((seen(0, "Tom", "A message."), 0.0),), doubt=doubt, unknown=refused_first)


@given(
    st.lists(st.integers(-200, 200), min_size=1, max_size=60, unique=True),
    st.integers(0, 5),
    st.sampled_from([0.05, 0.08, 0.2]),
)
def test_the_threshold_is_the_lowest_that_refuses_at_most_the_share(points, hard, share) -> None:
    doubts = [p * 0.05 + 0.0123 for p in points]  # apart by more than the grid
    answerable = [_rated(d) for d in doubts] + [_rated(0.0, refused_first=True) for _ in range(hard)]
    value = threshold(answerable, share)

    def refused(at: float) -> int:
        return hard + sum(d > at for d in doubts)

    allowed = math.floor(share * len(answerable))
    if hard <= allowed:
        assert refused(value) <= allowed
        assert refused(value - 0.05) > allowed or refused(value - 0.05) == len(answerable)
    else:  # refused before the doubt already: the doubt refuses nobody
        assert refused(value) == hard


def test_calibration_refuses_the_swapped_person_and_keeps_the_answerable_ones() -> None:
    """Questions in LoCoMo's adversarial form (Priya's race given to Tom) against the
    same questions asked of Priya, in chats that vary: the fitted rule refuses more of
    the former, and at most its share of the latter."""
    rng = random.Random(3)
    questions = []
    for i in range(60):
        chat = [
            seen(
                1,
                "Priya",
                "I ran a charity race last Sunday!",
                terms={"charity", "race"},
                similarity=rng.uniform(0.5, 0.9),
                rank=1.0,
            ),
            seen(2, "Tom", "Nice, well done.", similarity=rng.uniform(0.1, 0.4), rank=rng.uniform(0.3, 0.7)),
            seen(3, "Tom", "I like races too.", terms={"race"}, similarity=rng.uniform(0.2, 0.6), rank=rng.uniform(0.3, 0.9)),
        ]
        named = "Tom" if i % 2 else "Priya"
        cues = Cues({"charity": 1.0, "race": 1.0}, named=named, name_forms=(named,))
        questions.append(Labelled(choose(cues, chat, SPEAKERS, OPEN), frozenset({"m1"}), adversarial=named == "Tom"))
    weights = calibrate(questions)
    chosen = [choose(q.choice.cues, [s for s, _ in q.choice.ranked], SPEAKERS, weights) for q in questions]
    adversarial = [not c.in_memory for q, c in zip(questions, chosen, strict=True) if q.adversarial]
    answerable = [not c.in_memory for q, c in zip(questions, chosen, strict=True) if not q.adversarial]
    assert sum(answerable) <= math.floor(0.08 * len(answerable))
    assert sum(adversarial) > sum(answerable)
