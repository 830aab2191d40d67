"""LoCoMo's observations as replayed extractions (lab/observations.py): every observation
read whatever way it cites its turns, one relation per observation on its speaker, stated
by each turn it cites that exists, and records the replay extractor accepts; `bench retrieval
--extractions observations` builds one extractor per conversation from them."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from bot.settings import Settings
from lab.bench import retrieval
from lab.bench.common import load_locomo
from lab.observations import PROFILE, observations, replay_records
from memory import ReplayExtractor, ValidationError

DATA = {
    "speaker_a": "Melanie",
    "speaker_b": "Caroline",
    "session_2_observation": {
        "Caroline": [["Caroline is excited to create a family for kids who need one.", "D2:1, D2:4"]],
    },
    "session_1_observation": {
        "Melanie": [
            ["Melanie ran a charity race for mental health last Saturday.", "D1:3"],
            ["Melanie painted a lake sunrise last year.", ["D1:5", "D1:7", "D9:99"]],
            ["", "D1:1"],
            "not an observation",
            ["Melanie plays the violin.", "D:1:08"],
        ],
    },
    "session_1_summary": "not read",
}
TURNS = ["D1:3", "D1:5", "D1:7", "D1:8", "D2:1", "D2:4"]


def test_every_observation_is_read_in_session_order_with_its_turns_however_they_are_written() -> None:
    assert observations(DATA) == [
        ("Melanie", "Melanie ran a charity race for mental health last Saturday.", ("D1:3",)),
        ("Melanie", "Melanie painted a lake sunrise last year.", ("D1:5", "D1:7", "D9:99")),
        ("Melanie", "Melanie plays the violin.", ("D1:8",)),
        ("Caroline", "Caroline is excited to create a family for kids who need one.", ("D2:1", "D2:4")),
    ]


def test_each_observation_is_one_relation_on_its_speaker_stated_by_each_turn_it_cites() -> None:
    records = {record["message_id"]: record for record in replay_records(observations(DATA), TURNS)}
    assert sorted(records) == ["D1:3", "D1:5", "D1:7", "D1:8", "D2:1", "D2:4"]  # D9:99 names no turn
    race = records["D1:3"]["relations"]
    assert [(r["subject"], r["predicate"], r["object"], r["decision"]) for r in race] == [
        ("Melanie", "run", "charity race", "new")
    ]
    assert race[0]["fact"] == "Melanie ran a charity race for mental health last Saturday."
    # An observation citing two turns is stated by both: replayed, the second is a word for
    # word restatement, so one relation supported by both.
    assert records["D1:5"]["relations"] == records["D1:7"]["relations"]
    assert records["D2:1"]["relations"] == records["D2:4"]["relations"]
    # The rules find no object in this one: it hangs on the speaker's profile.
    family = records["D2:1"]["relations"][0]
    assert (family["predicate"], family["object"]) == ("noted", PROFILE.format(speaker="Caroline"))
    assert {"name": "Caroline", "type": "person"} in records["D2:1"]["entities"]
    assert {"name": family["object"], "type": "topic"} in records["D2:1"]["entities"]


def test_the_records_are_what_the_replay_extractor_accepts() -> None:
    records = replay_records(observations(DATA), TURNS)
    extractor = ReplayExtractor.from_records(records)
    assert set(extractor.records) == set(TURNS)
    entities, relations = extractor.records["D1:3"]
    assert ("Melanie", "person", "") in entities
    assert [relation["fact"] for relation in relations] == ["Melanie ran a charity race for mental health last Saturday."]


def _args(folder: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    retrieval.configure(parser)
    return parser.parse_args(["--locomo", str(folder), "--synthetic", "0", *extra])


def test_bench_retrieval_replays_each_conversations_observations(tmp_path: Path) -> None:
    turns = [{"speaker": "Melanie", "dia_id": f"D1:{i}", "text": f"turn {i}"} for i in (3, 5, 7, 8)]
    session = {"session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns, "qa": []}
    (tmp_path / "26.json").write_text(json.dumps({**DATA, **session}), encoding="utf-8")
    conversations = load_locomo(tmp_path)
    assert retrieval._extractors(_args(tmp_path), conversations) == {}  # offline by default
    extractors = retrieval._extractors(_args(tmp_path, "--extractions", "observations"), conversations)
    replay = extractors["26"]
    assert isinstance(replay, ReplayExtractor)
    assert set(replay.records) == {"D1:3", "D1:5", "D1:7", "D1:8"}  # session 2's turns are not in this file
    for extra in (["--group"], ["--no-consolidate"]):
        with pytest.raises(ValidationError, match="extractions: observations are replayed on conversations alone"):
            asyncio.run(retrieval.run(_args(tmp_path, "--extractions", "observations", *extra), Settings()))
