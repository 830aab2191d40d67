"""Reading LoCoMo's evidence annotations (pure), and the hand-written rewordings of its
questions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot import locomo
from bot.locomo import evidence_ids
from lab.bench.common import SPLITS
from lab.bench.rewordings import load_rewordings
from memory import ValidationError
from tests.shared_data import shared_file

LOCOMO = shared_file("locomo/26.json").parent


def test_evidence_ids_are_read_as_the_turns_spell_them() -> None:
    assert evidence_ids(["D1:3", "D1:3", "D2:10"]) == ("D1:3", "D2:10")
    assert evidence_ids(["D8:6; D9:17"]) == ("D8:6", "D9:17")
    assert evidence_ids(["D9:1 D4:4 D4:6"]) == ("D9:1", "D4:4", "D4:6")
    assert evidence_ids(["D:11:26", "D30:05"]) == ("D11:26", "D30:5")


def test_unreadable_evidence_is_kept_as_a_miss_or_skipped() -> None:
    assert evidence_ids(["D", "", 7, None]) == ("D",)


def test_the_rewordings_match_the_questions_they_reword(tmp_path: Path) -> None:
    """The committed set loads against the corpus (on each split, calibration and
    held-out, at least 150 rewordings, category 5 included, each differing from its
    original); one whose original is not the question at its index is refused in one
    line."""
    conversations = {name: locomo.load(LOCOMO / f"{name}.json") for name in SPLITS["calibration"] + SPLITS["held-out"]}
    found = load_rewordings(conversations)
    assert all(r.reworded != r.original for r in found.values())
    for split in SPLITS.values():
        on_split = [(name, index) for name, index in found if name in split]
        assert len(on_split) >= 150
        assert any(conversations[name].questions[index].category == 5 for name, index in on_split)
    wrong = tmp_path / "p.json"
    wrong.write_text(json.dumps({"questions": [{"conversation": "26", "index": 0, "original": "Who?", "reworded": "Whom?"}]}))
    with pytest.raises(ValidationError, match="question 0 of 26 is not"):
        load_rewordings(conversations, wrong)
