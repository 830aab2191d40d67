"""The paired comparison of questions asked as written and reworded, and where answers are lost (bench answers)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from lab.bench.answers import ADVERSARIAL, Changes, Tally, mcnemar_p

counts = st.integers(min_value=0, max_value=60)


def test_mcnemar_p_known_values() -> None:
    assert mcnemar_p(0, 0) == 1.0
    # 13 against 5 changed pairs: 2 * P(X <= 5), X ~ Binomial(18, 1/2).
    assert math.isclose(mcnemar_p(13, 5), 2 * sum(math.comb(18, i) for i in range(6)) / 2**18)
    assert math.isclose(mcnemar_p(13, 5), 0.0963, abs_tol=1e-4)
    assert mcnemar_p(10, 0) < 0.01


@given(counts, counts)
def test_mcnemar_p_is_symmetric_and_a_probability(one: int, other: int) -> None:
    p = mcnemar_p(one, other)
    assert p == mcnemar_p(other, one)
    assert 0 < p <= 1
    if one == other:
        assert p == 1.0


@given(counts, counts)
def test_more_lopsided_changes_are_less_likely(one: int, other: int) -> None:
    if one >= other:
        assert mcnemar_p(one + 1, other) <= mcnemar_p(one, other)


def test_changes_count_each_way_and_skip_adversarial_questions() -> None:
    changes = Changes()
    gold = {"D1:3"}
    changes.add(1, gold, (["D1:3"], False), ([], True))  # refused and lost only reworded
    changes.add(2, gold, ([], True), (["D1:3"], False))  # refused as written only, gained
    changes.add(4, gold, (["D1:3"], False), (["D2:1", "D1:3"], False))  # evidence no longer first
    changes.add(ADVERSARIAL, set(), ([], True), (["D9:9"], False))
    figures = changes.figures()
    assert (figures["refused_reworded_only"], figures["refused_as_written_only"]) == (1, 1)
    assert (figures["first_lost"], figures["first_gained"]) == (2, 1)
    assert figures["refused_p"] == 1.0


def test_tally_tells_retrieval_losses_from_selection_losses() -> None:
    tally, gold = Tally(), {"D1:3"}
    tally.add(1, gold, "x", ["D1:3"], False, "r", ["D1:3", "D1:4"])  # read, ranked first, cited
    tally.add(1, gold, "x", [], True, "r", ["D1:3"])  # read, ranked first, then refused
    tally.add(1, gold, "x", ["D1:4"], False, "r", ["D1:4", "D1:3"])  # read, ranked second
    tally.add(1, gold, "x", ["D1:4"], False, "r", ["D1:4"])  # never retrieved
    tally.add(5, set(), "x", [], True, "r", ["D1:3"])  # adversarial: not counted
    figures = tally.figures()
    assert (figures["evidence_read"], figures["ranked_first_evidence"], figures["first_citation_evidence"]) == (0.75, 0.5, 0.25)
