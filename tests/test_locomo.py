"""Reading LoCoMo's evidence annotations (pure)."""

from __future__ import annotations

from bot.locomo import evidence_ids


def test_evidence_ids_are_read_as_the_turns_spell_them() -> None:
    assert evidence_ids(["D1:3", "D1:3", "D2:10"]) == ("D1:3", "D2:10")
    assert evidence_ids(["D8:6; D9:17"]) == ("D8:6", "D9:17")
    assert evidence_ids(["D9:1 D4:4 D4:6"]) == ("D9:1", "D4:4", "D4:6")
    assert evidence_ids(["D:11:26", "D30:05"]) == ("D11:26", "D30:5")


def test_unreadable_evidence_is_kept_as_a_miss_or_skipped() -> None:
    assert evidence_ids(["D", "", 7, None]) == ("D",)
