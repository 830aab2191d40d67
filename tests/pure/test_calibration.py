"""Choosing selection's weights and the abstention rule from labelled questions."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.retrieval.calibration import Labelled, Rated, calibrate, fit_selection, margins, threshold
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


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.booleans(), st.integers(-100, 100) | st.just(None)),
        min_size=4,
        max_size=80,
    ).filter(lambda rows: all(len({c for c, adv, _ in rows if adv == side}) >= 2 for side in (True, False))),
    st.sampled_from([0.05, 0.1, 0.3]),
    st.sampled_from([0.3, 0.5, 0.7]),
)
def test_the_threshold_leaves_both_targets_the_largest_common_margin(rows, refused_at_most, not_in_memory) -> None:
    """No threshold on the grid clears both targets by more; none lower clears them as far."""
    rated = [Rated(c, adv, math.inf if d is None else d * 0.05 + 0.0123) for c, adv, d in rows]
    value = threshold(rated, refused_at_most, not_in_memory)
    best = min(margins(rated, value, refused_at_most, not_in_memory))
    lowest = min((r.doubt for r in rated if math.isfinite(r.doubt)), default=math.inf)
    for step in range(-120, 120):
        at = step * 0.05 + 0.0123
        other = min(margins(rated, at, refused_at_most, not_in_memory))
        assert other <= best
        if lowest <= at < value - 0.01:
            assert other < best or best == -math.inf


def test_the_margins_count_in_how_much_conversations_differ() -> None:
    """Two conversations refusing 0% and 10% of answerable questions (5% pooled) clear a
    10% target by 5 points over a spread of 7.07 points times one: 0.71. The adversarial
    ones are all refused: +inf when they never differ."""
    rated = [Rated("a", False, 0.0) for _ in range(10)]
    rated += [Rated("b", False, 1.0)] + [Rated("b", False, 0.0) for _ in range(9)]
    rated += [Rated(c, True, 2.0) for c in "ab"]
    refused, not_in_memory = margins(rated, 0.5, 0.10, 0.50)
    assert math.isclose(refused, 0.05 / (math.sqrt(0.005) * 1.0))
    assert not_in_memory == math.inf


def test_one_conversation_cannot_say_how_a_split_would_differ() -> None:
    rated = [Rated("a", False, 0.0), Rated("a", True, 1.0)]
    with pytest.raises(ValueError, match="two conversations or more"):
        threshold(rated, 0.10, 0.50)


def test_calibration_refuses_the_swapped_person_and_keeps_the_answerable_ones() -> None:
    """Questions in LoCoMo's adversarial form (Priya's race given to Tom) against the
    same questions asked of Priya, in chats that vary: the fitted rule refuses more of
    the former, and at most the target's share of the latter."""
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
        choice = choose(cues, chat, SPEAKERS, OPEN)
        questions.append(Labelled(choice, frozenset({"m1"}), adversarial=named == "Tom", conversation=f"chat {i % 4}"))
    weights = calibrate(questions)
    chosen = [choose(q.choice.cues, [s for s, _ in q.choice.ranked], SPEAKERS, weights) for q in questions]
    adversarial = [not c.in_memory for q, c in zip(questions, chosen, strict=True) if q.adversarial]
    answerable = [not c.in_memory for q, c in zip(questions, chosen, strict=True) if not q.adversarial]
    assert sum(answerable) <= math.floor(0.10 * len(answerable))
    assert sum(adversarial) > sum(answerable)
