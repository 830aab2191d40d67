"""The offline extractor's facts read as sentences: the speaker's verb, in the third
person, tense kept (pure: spaCy only, no database)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.consolidation.extraction.offline import analyse, third_person


@pytest.mark.parametrize(
    ("speaker", "text", "fact"),
    [
        ("Marco", "Hey Tom, I sit on the fourth floor. Lunch on Wednesday?", "Marco sits on the fourth floor"),
        ("Alice", "Biscuit is adorable. I have a cat called Miso.", "Alice has a cat called Miso"),
        ("Tom", "I moved to the Berlin office last week.", "Tom moved to the Berlin office"),
        ("Ann", "I don't like Boston.", "Ann doesn't like Boston"),
        ("Ann", "I watch Netflix.", "Ann watches Netflix"),
        ("Ann", "I will write the rollback plan by Friday.", "Ann will write the rollback plan"),
    ],
)
def test_first_person_facts_keep_the_speakers_verb_and_tense(speaker: str, text: str, fact: str) -> None:
    (found,) = analyse([(speaker, text)])
    assert fact in [relation[3] for relation in found.relations]


@pytest.mark.parametrize(
    ("verb", "inflected"),
    [
        ("sit", "sits"),
        ("have", "has"),
        ("do", "does"),
        ("go", "goes"),
        ("watch", "watches"),
        ("try", "tries"),
        ("play", "plays"),
        ("Fix", "Fixes"),
    ],
)
def test_third_person(verb: str, inflected: str) -> None:
    assert third_person(verb) == inflected


@given(st.from_regex(r"[a-z]{2,10}", fullmatch=True))
def test_third_person_ends_in_s_and_keeps_the_stem(verb: str) -> None:
    inflected = third_person(verb)
    assert inflected.endswith("s") and inflected != verb
    if verb not in ("be", "have"):
        assert inflected.startswith(verb[:-1])
