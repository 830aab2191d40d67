"""Group channels built from LoCoMo conversations (lab/group_channels.py): every turn once
and in time order, evidence that still names the same turns, a cast where each person
talks in several threads, no renamed name left, the same channel every time; on small
generated conversations and on the calibration split when the shared data is there."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot import locomo
from bot.locomo import Conversation, Question, Turn
from lab.bench.common import SPLITS, ratios
from lab.group_channels import Channel, build_channel, rewrite, split_channels, years_later
from memory import Message, ValidationError
from tests.shared_data import shared_file

POOL = ("Ann", "Bob", "Cleo", "Dan", "Eve", "Finn", "Gus", "Ivy")
# Words that look like names or years but are not whole ones, beside plain words and years.
WORDS = ("hi", "went", "to", "the", "sea", "anna", "Bobby", "1000", "2019", "2023", "1990s", "21000")


def _forms(name: str) -> list[str]:
    return [name, name.upper(), name.lower(), f"{name}'s"]


@st.composite
def conversations(draw: st.DrawFn) -> list[Conversation]:
    """One to five small conversations, distinct first speakers, texts made of words,
    names in several cases (theirs and others') and years; evidence ids that name turns,
    and one that names none."""
    firsts = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=5, unique=True))
    word = st.one_of(st.sampled_from(WORDS), st.sampled_from(POOL).flatmap(lambda name: st.sampled_from(_forms(name))))
    text = st.lists(word, min_size=1, max_size=8).map(" ".join)
    made = []
    for index, first in enumerate(firsts):
        speakers = (first, draw(st.sampled_from([p for p in POOL if p != first])))
        at = draw(st.datetimes(datetime(2019, 1, 1), datetime(2024, 12, 31), timezones=st.just(UTC)))
        turns: list[Turn] = []
        dates: dict[int, datetime] = {}
        for number in range(1, draw(st.integers(1, 4)) + 1):
            dates[number] = at
            for i in range(draw(st.integers(0, 4))):
                dia, speaker = f"D{number}:{i + 1}", speakers[i % 2]
                turns.append(Turn(dia, number, Message(dia, speaker, speaker, draw(text), at + timedelta(seconds=i))))
            at += timedelta(days=draw(st.integers(1, 60)), hours=draw(st.integers(0, 23)))
        ids = [t.dia_id for t in turns] + ["D99:1"]
        questions = [
            Question(draw(text), draw(text), tuple(draw(st.lists(st.sampled_from(ids), max_size=3, unique=True))), category)
            for category in draw(st.lists(st.integers(1, 5), max_size=3))
        ]
        made.append(Conversation(str(26 + index), speakers, turns, questions, dates))
    return made


def expected_text(text: str, names: dict[str, str], years: int) -> str:
    """The renaming, word by word (the generated texts are words joined by spaces)."""
    changed = {old.lower(): new for old, new in names.items() if old != new}
    words = []
    for word in text.split(" "):
        base, suffix = (word[:-2], "'s") if word.endswith("'s") else (word, "")
        if base.lower() in changed:
            new = changed[base.lower()]
            base = new.upper() if base.isupper() else new.lower() if base.islower() else new
        elif len(base) == 4 and base.isdigit() and 1900 <= int(base) < 2100:
            base = str(int(base) + years)
        words.append(base + suffix)
    return " ".join(words)


def _thread_turns(channel: Channel, source: str) -> list[Turn]:
    return [t for t in channel.conversation.turns if t.dia_id.split(":", 1)[0] == source]


def check_every_turn_once_in_time_order(originals: Sequence[Conversation], channel: Channel) -> None:
    turns = channel.conversation.turns
    assert sorted(t.dia_id for t in turns) == sorted(f"{c.name}:{t.dia_id}" for c in originals for t in c.turns)
    assert all(t.dia_id == t.message.platform_message_id for t in turns)
    times = [t.message.message_time for t in turns]
    assert times == sorted(times)
    for conversation, thread in zip(originals, channel.threads, strict=True):
        mine = _thread_turns(channel, conversation.name)
        assert [t.dia_id for t in mine] == [f"{conversation.name}:{t.dia_id}" for t in conversation.turns]
        # One shift for the whole thread, by whole years from its first session date.
        shifts = {m.message.message_time - t.message.message_time for m, t in zip(mine, conversation.turns, strict=True)}
        first = min(conversation.session_dates.values())
        assert shifts <= {years_later(first, thread.years) - first}
        assert {t.message.thread_id for t in mine} <= {thread.root}
        assert [t.message.reply_to for t in mine] == [None, *[thread.root] * (len(mine) - 1)][: len(mine)]
        assert thread.root == (mine[0].dia_id if mine else None)
    dates = channel.conversation.session_dates
    assert sorted(dates) == list(range(1, sum(len(c.session_dates) for c in originals) + 1))
    assert [dates[n] for n in sorted(dates)] == sorted(dates.values())
    assert all(t.message.message_time >= dates[t.session] for t in turns)


def check_evidence_names_the_same_turns(originals: Sequence[Conversation], channel: Channel) -> None:
    by_id = {t.dia_id: t for t in channel.conversation.turns}
    asked = iter(channel.conversation.questions)
    for conversation, thread in zip(originals, channel.threads, strict=True):
        turns = {t.dia_id: t for t in conversation.turns}
        for question in conversation.questions:
            moved = next(asked)
            assert moved.category == question.category
            assert moved.evidence == tuple(f"{conversation.name}:{e}" for e in question.evidence)
            for original, renamed in zip(question.evidence, moved.evidence, strict=True):
                if original in turns:
                    message = turns[original].message
                    assert by_id[renamed].message.text == rewrite(message.text, thread.names, thread.years)
                    assert by_id[renamed].message.speaker_name == thread.names[message.speaker_name]
                else:
                    assert renamed not in by_id  # still a miss
    assert next(asked, None) is None


def check_cast(originals: Sequence[Conversation], channel: Channel) -> None:
    """The ring: person i is conversation i's first speaker and conversation i-1's second."""
    cast = channel.conversation.speakers
    n = len(originals)
    assert cast == (tuple(c.speakers[0] for c in originals) if n > 1 else originals[0].speakers)
    for i, (conversation, thread) in enumerate(zip(originals, channel.threads, strict=True)):
        assert thread.source == conversation.name
        if n > 1:
            assert thread.names == {conversation.speakers[0]: cast[i], conversation.speakers[1]: cast[(i + 1) % n]}
        spoke = {t.message.speaker_name for t in _thread_turns(channel, conversation.name)}
        assert spoke <= set(thread.names.values())
    if n >= 3:
        for person in cast:
            threads = [set(t.names.values()) for t in channel.threads if person in t.names.values()]
            assert len(threads) >= 2
            assert len(set().union(*threads) - {person}) >= 2


def check_no_renamed_name_left(originals: Sequence[Conversation], channel: Channel) -> None:
    questions = iter(channel.conversation.questions)
    for conversation, thread in zip(originals, channel.threads, strict=True):
        asked = [next(questions) for _ in conversation.questions]
        texts = [t.message.text for t in _thread_turns(channel, conversation.name)]
        texts += [q.question for q in asked] + [q.answer for q in asked]
        for old, new in thread.names.items():
            if old != new:
                left = re.compile(rf"(?<!\w){re.escape(old)}(?!\w)", re.I)
                assert not [text for text in texts if left.search(text)], old


def check_all(originals: Sequence[Conversation], channel: Channel) -> None:
    check_every_turn_once_in_time_order(originals, channel)
    check_evidence_names_the_same_turns(originals, channel)
    check_cast(originals, channel)
    check_no_renamed_name_left(originals, channel)
    assert build_channel(originals) == channel


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_a_channel_of_generated_conversations_keeps_every_turn_and_question(originals: list[Conversation]) -> None:
    channel = build_channel(originals)
    check_all(originals, channel)
    assert channel.conversation.name == "group-" + "-".join(c.name for c in originals)
    anchor = min(originals[0].session_dates.values())
    for conversation, thread in zip(originals, channel.threads, strict=True):
        moved = years_later(min(conversation.session_dates.values()), thread.years)
        assert abs(moved - anchor) <= timedelta(days=185)  # the nearest whole year
        for turn in _thread_turns(channel, conversation.name):
            original = next(t for t in conversation.turns if f"{conversation.name}:{t.dia_id}" == turn.dia_id)
            assert turn.message.text == expected_text(original.message.text, thread.names, thread.years)


def test_names_are_whole_words_in_any_case_and_years_move() -> None:
    assert rewrite("Mel met MELANIE, melanie's dog and Melanies in 2022 (1990s, 12023)", {"Melanie": "Jon"}, 1) == (
        "Mel met JON, jon's dog and Melanies in 2023 (1990s, 12023)"
    )
    # Simultaneous: a name given to one speaker is not renamed again.
    assert rewrite("Ann and Bob", {"Ann": "Bob", "Bob": "Cleo"}, 0) == "Bob and Cleo"


def _conversation(name: str, speakers: tuple[str, str], start: datetime, texts: Sequence[str]) -> Conversation:
    turns = [
        Turn(f"D1:{i + 1}", 1, Message(f"D1:{i + 1}", speakers[i % 2], speakers[i % 2], text, start + timedelta(seconds=i)))
        for i, text in enumerate(texts)
    ]
    question = Question(f"What did {speakers[1]} say in 2023?", f"{speakers[1]}'s hello", ("D1:2", "D7:1"), 1)
    return Conversation(name, speakers, turns, [question], {1: start})


def test_three_conversations_form_a_ring_in_one_overlapping_channel() -> None:
    one = _conversation("1", ("Ann", "Bob"), datetime(2023, 5, 8, 13, tzinfo=UTC), ["Hi Bob", "Hi Ann, it is 2023"])
    two = _conversation("2", ("Cleo", "Dan"), datetime(2022, 1, 21, 9, tzinfo=UTC), ["Hey Dan", "Hey Cleo"])
    three = _conversation("3", ("Eve", "Ann"), datetime(2023, 5, 8, 13, tzinfo=UTC), ["Yo Ann", "Yo Eve"])
    channel = build_channel([one, two, three])
    assert channel.conversation.speakers == ("Ann", "Cleo", "Eve")
    assert [(t.source, t.names, t.years) for t in channel.threads] == [
        ("1", {"Ann": "Ann", "Bob": "Cleo"}, 0),
        ("2", {"Cleo": "Cleo", "Dan": "Eve"}, 1),
        ("3", {"Eve": "Eve", "Ann": "Ann"}, 0),
    ]
    # Same start: the earlier thread first; conversation 2 moved to 21 January 2023.
    assert [(t.dia_id, t.message.speaker_name, t.message.text) for t in channel.conversation.turns] == [
        ("2:D1:1", "Cleo", "Hey Eve"),
        ("2:D1:2", "Eve", "Hey Cleo"),
        ("1:D1:1", "Ann", "Hi Cleo"),
        ("3:D1:1", "Eve", "Yo Ann"),
        ("1:D1:2", "Cleo", "Hi Ann, it is 2023"),
        ("3:D1:2", "Ann", "Yo Eve"),
    ]
    assert channel.conversation.turns[0].message.message_time == datetime(2023, 1, 21, 9, tzinfo=UTC)
    assert channel.conversation.session_dates == {
        1: datetime(2023, 1, 21, 9, tzinfo=UTC),
        2: datetime(2023, 5, 8, 13, tzinfo=UTC),
        3: datetime(2023, 5, 8, 13, tzinfo=UTC),
    }
    assert [(q.question, q.answer, q.evidence) for q in channel.conversation.questions] == [
        ("What did Cleo say in 2023?", "Cleo's hello", ("1:D1:2", "1:D7:1")),
        ("What did Eve say in 2024?", "Eve's hello", ("2:D1:2", "2:D7:1")),
        ("What did Ann say in 2023?", "Ann's hello", ("3:D1:2", "3:D7:1")),
    ]
    check_all([one, two, three], channel)


def test_the_cast_needs_distinct_first_speakers() -> None:
    start = datetime(2023, 1, 1, tzinfo=UTC)
    with pytest.raises(ValidationError, match="must differ"):
        build_channel([_conversation("1", ("Ann", "Bob"), start, ["x"]), _conversation("2", ("Ann", "Cleo"), start, ["y"])])


def test_ratios_divide_the_shares_not_the_counts() -> None:
    channel = {"10": {"questions": 4, "all_evidence": 0.25, "tokens_per_question": 300.0, "by_category": {"1": 0.5, "2": 0.0}}}
    alone = {"10": {"questions": 4, "all_evidence": 0.5, "tokens_per_question": 200.0, "by_category": {"1": 0.25, "2": 0.0}}}
    assert ratios(channel, alone) == {
        "10": {"all_evidence": 0.5, "tokens_per_question": 1.5, "by_category": {"1": 2.0, "2": None}}
    }


@pytest.fixture(scope="module")
def calibration() -> list[Conversation]:
    folder: Path = shared_file("locomo/26.json").parent
    return [locomo.load(folder / f"{name}.json") for name in SPLITS["calibration"]]


def test_the_calibration_channel(calibration: list[Conversation]) -> None:
    channels = split_channels(calibration, SPLITS)
    assert list(channels) == ["calibration"]
    channel = channels["calibration"]
    check_all(calibration, channel)
    assert channel.conversation.name == "group-26-30-41-42-43"
    assert channel.conversation.speakers == ("Caroline", "Jon", "John", "Joanna", "Tim")
    assert [t.years for t in channel.threads] == [0, 0, 0, 1, 0]  # 42 ran in 2022
    assert len(channel.conversation.turns) == sum(len(c.turns) for c in calibration)
    assert len(channel.conversation.questions) == sum(len(c.questions) for c in calibration)
    # Threads interleave: no thread's messages all come before another's.
    spans = {
        t.source: (min(times), max(times))
        for t in channel.threads
        if (times := [m.message.message_time for m in _thread_turns(channel, t.source)])
    }
    assert all(a[0] < b[1] and b[0] < a[1] for a in spans.values() for b in spans.values())
