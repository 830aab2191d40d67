"""The paired comparisons of bench answers (questions as written against reworded, or asked in the
first person) and where answers are lost."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from lab.bench.answers import ADVERSARIAL, Changes, Tally, _first_person, first_person_of, mcnemar_p

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


def test_a_question_naming_one_speaker_is_asked_as_they_would_ask_it() -> None:
    speakers = ("Melanie", "Caroline")
    assert first_person_of("What did Melanie paint?", speakers) == ("What did I paint?", "Melanie")
    assert first_person_of("Where did Caroline's family go?", speakers) == ("Where did my family go?", "Caroline")
    assert first_person_of("What do Melanie and Caroline both like?", speakers) is None  # two people
    assert first_person_of("When is the parade?", speakers) is None  # nobody


def test_the_first_person_figures_are_printed_beside_the_questions_as_written() -> None:
    tally = Tally()
    tally.add(1, {"D1:1"}, "a cat", ["D1:1"], False, "a cat", ["D1:1"])
    figures = {"as_written": tally.figures(), "by_them": tally.figures(), "unnamed": Tally().figures()}
    lines = _first_person(figures)
    assert "1 answerable" in lines[0]
    assert [line.split()[0] for line in lines[1:]] == ["as", "by", "unnamed"]
    assert "100.0%" in lines[1] and "0.0%" in lines[3]
