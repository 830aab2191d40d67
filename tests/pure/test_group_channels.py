"""Group channels built from LoCoMo conversations (lab/group_channels.py), in both layouts:
every turn once and in time order, evidence that still names the same turns, a ring cast
where each person talks with several others or a pairs cast where one name is one person,
no renamed name left, the same channel every time; threads that keep their days, or days
aligned and turns alternating with dates written in the texts moved with their sessions;
on small generated conversations and on the calibration split when the shared data is
there."""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot import locomo
from bot.locomo import Conversation, Question, Turn
from lab.bench import answers, retrieval
from lab.bench.common import SPLITS, channel_run_id, ratios
from lab.group_channels import (
    FALLBACK_NAMES,
    LAYOUTS,
    Channel,
    Thread,
    build_channel,
    move_dates,
    rewrite,
    split_channels,
    years_later,
)
from memory import Message, ValidationError
from tests.shared_data import shared_file

POOL = ("Ann", "Bob", "Cleo", "Dan", "Eve", "Finn", "Gus", "Ivy")
# Words that look like names or years but are not whole ones, beside plain words and years.
WORDS = ("hi", "went", "to", "the", "sea", "anna", "Bobby", "1000", "2019", "2023", "1990s", "21000")


def _forms(name: str) -> list[str]:
    return [name, name.upper(), name.lower(), f"{name}'s"]


@st.composite
def conversations(draw: st.DrawFn, distinct_firsts: bool = True) -> list[Conversation]:
    """One to five small conversations, distinct first speakers (unless told otherwise),
    texts made of words, names in several cases (theirs and others') and years; evidence
    ids that name turns, and one that names none."""
    firsts = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=5, unique=distinct_firsts))
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


def expected_text(text: str, names: dict[str, str], year: Callable[[int], int]) -> str:
    """The renaming and the years moved by ``year``, word by word (the generated texts are
    words joined by spaces)."""
    changed = {old.lower(): new for old, new in names.items() if old != new}
    words = []
    for word in text.split(" "):
        base, suffix = (word[:-2], "'s") if word.endswith("'s") else (word, "")
        if base.lower() in changed:
            new = changed[base.lower()]
            base = new.upper() if base.isupper() else new.lower() if base.islower() else new
        elif len(base) == 4 and base.isdigit() and 1900 <= int(base) < 2100:
            base = str(year(int(base)))
        words.append(base + suffix)
    return " ".join(words)


def _thread_turns(channel: Channel, source: str) -> list[Turn]:
    return [t for t in channel.conversation.turns if t.dia_id.split(":", 1)[0] == source]


def _in_date_order(conversation: Conversation) -> list[int]:
    return [number for _, number in sorted((d, n) for n, d in conversation.session_dates.items())]


def _written(conversation: Conversation, thread: Thread, text: str, layout: str, evidence: Sequence[str] = ()) -> str:
    """A text of ``conversation`` as the channel should write it: a question's (and its
    answer's, with its ``evidence``) dates move with its evidence's sessions and days."""
    renamed = rewrite(text, thread.names, thread.years)
    if layout == "threads":
        return renamed
    told = [turn for turn in conversation.turns if turn.dia_id in evidence]
    numbers = [n for n in _in_date_order(conversation) if any(turn.session == n for turn in told)] or _in_date_order(conversation)
    sessions = [(conversation.session_dates[n].date(), thread.offsets[n]) for n in numbers]
    return move_dates(renamed, sessions, [turn.message.message_time.date() for turn in told])


def _switches(channel: Channel) -> int:
    """How many times the next message is another conversation's."""
    sources = [t.dia_id.split(":", 1)[0] for t in channel.conversation.turns]
    return sum(a != b for a, b in zip(sources, sources[1:], strict=False))


def check_every_turn_once_in_time_order(originals: Sequence[Conversation], channel: Channel) -> None:
    turns = channel.conversation.turns
    assert sorted(t.dia_id for t in turns) == sorted(f"{c.name}:{t.dia_id}" for c in originals for t in c.turns)
    assert all(t.dia_id == t.message.platform_message_id for t in turns)
    times = [t.message.message_time for t in turns]
    assert times == sorted(times)
    for conversation in originals:
        mine = _thread_turns(channel, conversation.name)
        assert [t.dia_id for t in mine] == [f"{conversation.name}:{t.dia_id}" for t in conversation.turns]
    dates = channel.conversation.session_dates
    assert [dates[n] for n in sorted(dates)] == sorted(dates.values())
    assert all(t.message.message_time >= dates[t.session] for t in turns)


def check_threads(originals: Sequence[Conversation], channel: Channel) -> None:
    """Each conversation one thread, moved by whole years, its sessions its own."""
    for conversation, thread in zip(originals, channel.threads, strict=True):
        mine = _thread_turns(channel, conversation.name)
        # One shift for the whole thread, by whole years from its first session date.
        shifts = {m.message.message_time - t.message.message_time for m, t in zip(mine, conversation.turns, strict=True)}
        first = min(conversation.session_dates.values())
        assert shifts <= {years_later(first, thread.years) - first}
        assert set(thread.offsets.values()) == {(years_later(first, thread.years) - first).days}
    check_thread_roots(originals, channel)
    dates = channel.conversation.session_dates
    assert sorted(dates) == list(range(1, sum(len(c.session_dates) for c in originals) + 1))


def check_thread_roots(originals: Sequence[Conversation], channel: Channel) -> None:
    """Each conversation a thread: its first message's id, every other message a reply to it."""
    for conversation, thread in zip(originals, channel.threads, strict=True):
        mine = _thread_turns(channel, conversation.name)
        assert {t.message.thread_id for t in mine} <= {thread.root}
        assert [t.message.reply_to for t in mine] == [None, *[thread.root] * (len(mine) - 1)][: len(mine)]
        assert thread.root == (mine[0].dia_id if mine else None)


def _day(anchors: Sequence[datetime], k: int) -> date:
    """The channel's day k: conversation 0's session k, then every 14 days."""
    return anchors[k].date() if k < len(anchors) else anchors[-1].date() + timedelta(days=14 * (k - len(anchors) + 1))


def check_interleaved(originals: Sequence[Conversation], channel: Channel, threaded: bool = False) -> None:
    """Session k of every conversation on day k; turn j of conversation i at the day's
    start + j minutes + i seconds; no threads (``threaded``: each conversation a thread);
    times strictly increasing."""
    turns = channel.conversation.turns
    if threaded:
        check_thread_roots(originals, channel)
    else:
        assert all(t.message.thread_id is None and t.message.reply_to is None for t in turns)
    times = [t.message.message_time for t in turns]
    assert all(a < b for a, b in zip(times, times[1:], strict=False))
    dates = channel.conversation.session_dates
    days = max(len(c.session_dates) for c in originals)
    assert sorted(dates) == list(range(1, days + 1))
    anchors = [originals[0].session_dates[n] for n in _in_date_order(originals[0])]
    earliest: dict[int, datetime] = {}
    longest = dict.fromkeys(range(days), 0)
    for i, (conversation, thread) in enumerate(zip(originals, channel.threads, strict=True)):
        assert thread.years == 0 and (threaded or thread.root is None)
        placed = {t.dia_id: t for t in _thread_turns(channel, conversation.name)}
        for k, number in enumerate(_in_date_order(conversation)):
            moved = conversation.session_dates[number] + timedelta(days=thread.offsets[number])
            assert moved.date() == _day(anchors, k)
            earliest[k] = min(earliest.get(k, moved), moved)
            mine = [t for t in conversation.turns if t.session == number]
            longest[k] = max(longest[k], len(mine))
            for j, turn in enumerate(mine):
                there = placed[f"{conversation.name}:{turn.dia_id}"]
                message = there.message
                assert there.session == k + 1
                assert message.message_time == dates[k + 1] + timedelta(minutes=j, seconds=i)
                if turn.message.edited_at:
                    assert message.edited_at == turn.message.edited_at + (message.message_time - turn.message.message_time)
    assert all(offset == 0 for offset in channel.threads[0].offsets.values())
    # A day starts at its earliest moved session, unless the day before still runs then.
    for k in range(days):
        assert dates[k + 1] == max(earliest[k], dates[k] + timedelta(minutes=longest[k - 1]) if k else earliest[k])


def check_evidence_names_the_same_turns(originals: Sequence[Conversation], channel: Channel, layout: str) -> None:
    by_id = {t.dia_id: t for t in channel.conversation.turns}
    asked = iter(channel.conversation.questions)
    for conversation, thread in zip(originals, channel.threads, strict=True):
        turns = {t.dia_id: t for t in conversation.turns}
        for question in conversation.questions:
            moved = next(asked)
            assert moved.category == question.category
            assert moved.evidence == tuple(f"{conversation.name}:{e}" for e in question.evidence)
            assert (moved.question, moved.answer) == tuple(
                _written(conversation, thread, text, layout, question.evidence) for text in (question.question, question.answer)
            )
            for original, renamed in zip(question.evidence, moved.evidence, strict=True):
                if original in turns:
                    message = turns[original].message
                    assert by_id[renamed].message.text == _written(conversation, thread, message.text, layout)
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


def check_pairs(originals: Sequence[Conversation], channel: Channel) -> None:
    """Pairs: a speaker keeps their name unless an earlier conversation's speaker has it;
    the later ones get the free fallback names in channel order; one name is one person."""
    spoken = {name for c in originals for name in c.speakers}
    free = iter(name for name in FALLBACK_NAMES if name not in spoken)
    earlier: set[str] = set()
    for conversation, thread in zip(originals, channel.threads, strict=True):
        assert thread.source == conversation.name
        assert list(thread.names) == list(conversation.speakers)
        for name in conversation.speakers:
            assert thread.names[name] == (next(free) if name in earlier else name)
        earlier.update(conversation.speakers)
        spoke = {t.message.speaker_name for t in _thread_turns(channel, conversation.name)}
        assert spoke <= set(thread.names.values())
    cast = [name for thread in channel.threads for name in thread.names.values()]
    assert channel.conversation.speakers == tuple(cast)
    assert len(set(cast)) == len(cast) == 2 * len(originals)


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


def check_all(originals: Sequence[Conversation], channel: Channel, layout: str, cast: str = "ring") -> None:
    check_every_turn_once_in_time_order(originals, channel)
    if layout == "threads":
        check_threads(originals, channel)
    else:
        check_interleaved(originals, channel, threaded=layout == "threaded")
    check_evidence_names_the_same_turns(originals, channel, layout)
    (check_cast if cast == "ring" else check_pairs)(originals, channel)
    check_no_renamed_name_left(originals, channel)
    assert build_channel(originals, layout=layout, cast=cast) == channel


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_a_threads_channel_of_generated_conversations_keeps_every_turn_and_question(originals: list[Conversation]) -> None:
    channel = build_channel(originals, layout="threads")
    check_all(originals, channel, "threads")
    assert channel.conversation.name == "group-" + "-".join(c.name for c in originals)
    anchor = min(originals[0].session_dates.values())
    for conversation, thread in zip(originals, channel.threads, strict=True):
        moved = years_later(min(conversation.session_dates.values()), thread.years)
        assert abs(moved - anchor) <= timedelta(days=185)  # the nearest whole year
        for turn in _thread_turns(channel, conversation.name):
            original = next(t for t in conversation.turns if f"{conversation.name}:{t.dia_id}" == turn.dia_id)
            assert turn.message.text == expected_text(original.message.text, thread.names, lambda y, k=thread.years: y + k)


def _year_alone(offsets: dict[int, int]) -> Callable[[int], int]:
    """A year alone moves where every session's offset takes its middle, 2 July."""

    def moved(year: int) -> int:
        into = {(date(year, 7, 2) + timedelta(days=offset)).year for offset in offsets.values()}
        return into.pop() if len(into) == 1 else year

    return moved


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_an_interleaved_channel_of_generated_conversations_keeps_every_turn_and_question(originals: list[Conversation]) -> None:
    channel = build_channel(originals)
    check_all(originals, channel, "interleaved")
    for conversation, thread in zip(originals, channel.threads, strict=True):
        for turn in _thread_turns(channel, conversation.name):
            original = next(t for t in conversation.turns if f"{conversation.name}:{t.dia_id}" == turn.dia_id)
            assert turn.message.text == expected_text(original.message.text, thread.names, _year_alone(thread.offsets))


def _placement(channel: Channel) -> list[tuple[object, ...]]:
    """Everything of a channel's turns but who speaks and what is written."""
    return [
        (t.dia_id, t.session, t.message.message_time, t.message.edited_at, t.message.thread_id, t.message.reply_to)
        for t in channel.conversation.turns
    ]


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=100, deadline=None)
@given(originals=conversations(distinct_firsts=False))
def test_a_pairs_channel_of_generated_conversations_gives_each_person_one_name(
    layout: str, originals: list[Conversation]
) -> None:
    channel = build_channel(originals, layout=layout, cast="pairs")
    check_all(originals, channel, layout, "pairs")
    for conversation, thread in zip(originals, channel.threads, strict=True):
        for turn in _thread_turns(channel, conversation.name):
            original = next(t for t in conversation.turns if f"{conversation.name}:{t.dia_id}" == turn.dia_id)
            years = (lambda y, k=thread.years: y + k) if layout == "threads" else _year_alone(thread.offsets)
            assert turn.message.text == expected_text(original.message.text, thread.names, years)
    # The cast changes names only: the ring (where it can be built) places every turn alike.
    if len({c.speakers[0] for c in originals}) == len(originals):
        ring = build_channel(originals, layout=layout)
        assert _placement(ring) == _placement(channel)
        assert [(t.years, t.offsets, t.root) for t in ring.threads] == [(t.years, t.offsets, t.root) for t in channel.threads]


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
    channel = build_channel([one, two, three], layout="threads")
    assert channel.conversation.speakers == ("Ann", "Cleo", "Eve")
    assert [(t.source, t.names, t.years) for t in channel.threads] == [
        ("1", {"Ann": "Ann", "Bob": "Cleo"}, 0),
        ("2", {"Cleo": "Cleo", "Dan": "Eve"}, 1),
        ("3", {"Eve": "Eve", "Ann": "Ann"}, 0),
    ]
    assert [t.offsets for t in channel.threads] == [{1: 0}, {1: 365}, {1: 0}]
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
    check_all([one, two, three], channel, "threads")


def _sessions(
    name: str,
    speakers: tuple[str, str],
    starts: Sequence[datetime],
    turns: int,
    asked: Sequence[str] = (),
    evidence: tuple[str, ...] = ("D1:1",),
) -> Conversation:
    """A conversation of ``turns`` turns per session, one session per start, each session a
    thread whose second turn was edited; each text of ``asked`` a question (and its answer)
    with ``evidence``."""
    made = [
        Turn(
            f"D{n}:{j + 1}",
            n,
            Message(
                f"D{n}:{j + 1}",
                speakers[j % 2],
                speakers[j % 2],
                f"hi {n}.{j}",
                start + timedelta(seconds=j),
                reply_to=f"D{n}:1" if j else None,
                thread_id=f"D{n}:1",
                edited_at=start + timedelta(minutes=5) if j == 1 else None,
            ),
        )
        for n, start in enumerate(starts, start=1)
        for j in range(turns)
    ]
    questions = [Question(text, text, evidence, 2) for text in asked]
    return Conversation(name, speakers, made, questions, dict(enumerate(starts, start=1)))


def _at(day: str, hour: int, minute: int = 0) -> datetime:
    return datetime.fromisoformat(day).replace(hour=hour, minute=minute, tzinfo=UTC)


def test_an_interleaved_channel_alternates_turn_by_turn_on_aligned_days() -> None:
    one = _sessions("1", ("Ann", "Bob"), [_at("2023-05-08", 13), _at("2023-05-20", 18, 30)], 3)
    two = _sessions("2", ("Cleo", "Dan"), [_at("2022-01-21", 9), _at("2022-02-03", 20), _at("2022-03-01", 10)], 2)
    three = _sessions("3", ("Eve", "Ann"), [_at("2023-06-10", 11), _at("2023-07-01", 12)], 3)
    channel = build_channel([one, two, three])
    check_all([one, two, three], channel, "interleaved")
    # Day 0 is one's first session's date, day 1 its second's, day 2 fourteen days later;
    # each day starts at the earliest moved session (two's at 9:00, three's at 12:00).
    assert channel.conversation.session_dates == {1: _at("2023-05-08", 9), 2: _at("2023-05-20", 12), 3: _at("2023-06-03", 10)}
    assert [t.offsets for t in channel.threads] == [{1: 0, 2: 0}, {1: 472, 2: 471, 3: 459}, {1: -33, 2: -42}]
    turns = channel.conversation.turns
    assert [(t.dia_id, t.session, t.message.message_time.strftime("%H:%M:%S")) for t in turns[:8]] == [
        ("1:D1:1", 1, "09:00:00"),
        ("2:D1:1", 1, "09:00:01"),
        ("3:D1:1", 1, "09:00:02"),
        ("1:D1:2", 1, "09:01:00"),
        ("2:D1:2", 1, "09:01:01"),
        ("3:D1:2", 1, "09:01:02"),
        ("1:D1:3", 1, "09:02:00"),
        ("3:D1:3", 1, "09:02:02"),
    ]
    assert [t.dia_id for t in turns[16:]] == ["2:D3:1", "2:D3:2"]
    assert all(t.message.thread_id is None and t.message.reply_to is None for t in turns)
    assert turns[3].message.edited_at == _at("2023-05-08", 9, 1) + timedelta(minutes=5, seconds=-1)  # 1:D1:2, edited 4:59 later
    # 16 switches over 3 days; the same conversations as threads switch twice.
    assert _switches(channel) == 16
    assert _switches(build_channel([one, two, three], layout="threads")) == 2


def test_dates_written_in_questions_move_with_their_nearest_session_in_their_format() -> None:
    one = _sessions(
        "1", ("Ann", "Bob"), [_at("2023-05-08", 13), _at("2023-05-20", 18, 30)], 1, ["What did Bob do on 8 May, 2023?"]
    )
    asked = [
        "What did Dan do on 3 February, 2022?",  # session 2 moved 471 days
        "The week before January 21, 2022",  # session 1, 472 days
        "the 21st of January 2022",
        "What did Dan do in February 2022?",  # the 15th is nearer session 2 (3 February) than 3 (1 March)
        "Feb 3rd",  # no year: the one nearest a session
        "When did Dan go camping in January?",
        "Dan was away February 2-4, 2022",
        "Was 2022 good for Dan?",  # every offset takes 2 July 2022 into 2023
        "The Saturday before 1 March, 2022",  # weekdays stay
        "31 June 2022, the 15th, 2022-02-03, Janury 5",  # no such date, and forms not read
    ]
    # Evidence that names no turn: every session is a question's, as every one is a message's.
    starts = [_at("2022-01-21", 9), _at("2022-02-03", 20), _at("2022-03-01", 10)]
    two = _sessions("2", ("Cleo", "Dan"), starts, 1, asked, evidence=("D9:9",))
    channel = build_channel([one, two])
    check_all([one, two], channel, "interleaved")
    assert [q.question for q in channel.conversation.questions] == [
        "What did Cleo do on 8 May, 2023?",  # conversation 0 does not move
        "What did Ann do on 20 May, 2023?",
        "The week before May 8, 2023",
        "the 8th of May 2023",
        "What did Ann do in June 2023?",  # 15 February moved 471 days
        "May 20th",
        "When did Ann go camping in May?",
        "Ann was away May 19-21, 2023",
        "Was 2023 good for Ann?",
        "The Saturday before 3 June, 2023",
        "31 June 2022, the 15th, 2023-02-03, Janury 5",
    ]


def test_a_questions_dates_move_with_its_evidence_not_the_nearest_session() -> None:
    one = _sessions("1", ("Ann", "Bob"), [_at("2023-05-08", 13), _at("2023-05-20", 18, 30)], 1)
    starts = [_at("2022-01-21", 9), _at("2022-02-03", 20), _at("2022-03-01", 10)]  # moved 472, 471 and 459 days
    asked = ["What did Dan do in February 2022?", "What did Dan do in the week before 20 February, 2022?"]
    told_on_3_february = _sessions("2", ("Cleo", "Dan"), starts, 1, asked, evidence=("D2:1",))
    told_on_1_march = _sessions("2", ("Cleo", "Dan"), starts, 1, asked, evidence=("D3:1",))
    by_nearest = _sessions("2", ("Cleo", "Dan"), starts, 1, asked, evidence=("D9:9",))
    written = {}
    for name, two in (("3 February", told_on_3_february), ("1 March", told_on_1_march), ("nearest", by_nearest)):
        channel = build_channel([one, two])
        check_all([one, two], channel, "interleaved")
        written[name] = [q.question for q in channel.conversation.questions]
        assert written[name] == [q.answer for q in channel.conversation.questions]
    # The evidence of 3 February moved to 20 May 2023: its month is May, although the 15th
    # of February moved by the same 471 days is 1 June.
    assert written["3 February"] == ["What did Ann do in May 2023?", "What did Ann do in the week before 6 June, 2023?"]
    # Evidence of 1 March (moved 459 days): February's dates move with its session.
    assert written["1 March"] == ["What did Ann do in May 2023?", "What did Ann do in the week before 25 May, 2023?"]
    # No evidence turn: the session nearest each date, as in a message's text.
    assert written["nearest"] == ["What did Ann do in June 2023?", "What did Ann do in the week before 25 May, 2023?"]


@pytest.mark.parametrize(
    ("written", "moved"),
    [
        ("on 3 May, 2022", "on 11 August, 2022"),
        ("on 3 May 2022", "on 11 August 2022"),
        ("May 3, 2022", "August 11, 2022"),
        ("October 13th, 2022", "February 10th, 2023"),  # across a year
        ("the 3rd of May 2022", "the 11th of August 2022"),
        ("July 2022", "November 2022"),  # the 15th is nearer 1 August: 120 days
        ("April.2022", "July.2022"),
        ("Jul 28th", "Nov 25th"),
        ("Sept 3, 2022", "Jan 1, 2023"),
        ("Aug. 1st", "Nov. 29th"),
        ("in May, mid-May", "in August, mid-August"),
        ("May 5-6, 2022", "August 13-14, 2022"),
        ("May 20 to 25, 2022", "August 28 to September 2, 2022"),
        ("between 26 April and 20 May 2022", "between 4 August and 28 August 2022"),
        ("in 2022, in 1968", "in 2022, in 1968"),  # offsets keep 2 July in its year
        ("31 June 2022, may 3, May I, 15/05", "31 June 2022, may 3, May I, 15/05"),
    ],
)
def test_move_dates_keeps_each_format(written: str, moved: str) -> None:
    assert move_dates(written, [(date(2022, 5, 1), 100), (date(2022, 8, 1), 120)]) == moved


def test_a_year_alone_moves_only_when_every_offset_moves_it() -> None:
    assert move_dates("in 2022, Cyberpunk 2077", [(date(2022, 5, 1), 400), (date(2022, 8, 1), 420)]) == "in 2023, Cyberpunk 2078"
    assert move_dates("in 2022", [(date(2022, 5, 1), 100), (date(2022, 8, 1), 200)]) == "in 2022"
    assert move_dates("in 2022", []) == "in 2022"


def test_bad_input_is_one_validation_error() -> None:
    one = _sessions("1", ("Ann", "Bob"), [_at("2023-05-08", 13)], 1)
    with pytest.raises(ValidationError, match="layout: must be one of interleaved, threads"):
        build_channel([one], layout="forum")
    with pytest.raises(ValidationError, match="at least one conversation"):
        build_channel([])
    undated = Conversation("2", ("Cleo", "Dan"), one.turns, [], {2: _at("2023-05-08", 13)})
    with pytest.raises(ValidationError, match=r"conversation 2 has turns in sessions without a date: \[1\]"):
        build_channel([one, undated])


def test_the_cast_needs_distinct_first_speakers() -> None:
    start = datetime(2023, 1, 1, tzinfo=UTC)
    with pytest.raises(ValidationError, match="must differ"):
        build_channel([_conversation("1", ("Ann", "Bob"), start, ["x"]), _conversation("2", ("Ann", "Cleo"), start, ["y"])])


def test_the_pairs_cast_keeps_every_speaker_name_when_unique() -> None:
    start = datetime(2023, 5, 8, 13, tzinfo=UTC)
    one = _conversation("1", ("Ann", "Bob"), start, ["Hi Bob", "Hi Ann"])
    two = _conversation("2", ("Cleo", "Dan"), start, ["Hey Dan, Ann says hi", "Hey Cleo"])
    channel = build_channel([one, two], layout="threads", cast="pairs")
    assert channel.conversation.speakers == ("Ann", "Bob", "Cleo", "Dan")
    assert [t.names for t in channel.threads] == [{"Ann": "Ann", "Bob": "Bob"}, {"Cleo": "Cleo", "Dan": "Dan"}]
    # Nobody renamed: the texts, questions and speakers are the originals (the ring would make Dan Ann).
    assert [(t.message.speaker_name, t.message.text) for t in channel.conversation.turns] == [
        ("Ann", "Hi Bob"),
        ("Cleo", "Hey Dan, Ann says hi"),
        ("Bob", "Hi Ann"),
        ("Dan", "Hey Cleo"),
    ]
    assert [q.question for q in channel.conversation.questions] == ["What did Bob say in 2023?", "What did Dan say in 2023?"]
    check_all([one, two], channel, "threads", "pairs")


def test_the_pairs_cast_gives_a_later_duplicate_the_first_free_fallback_name() -> None:
    start = datetime(2023, 5, 8, 13, tzinfo=UTC)
    one = _conversation("1", ("Ann", "Bob"), start, ["Hi Bob", "Hi Ann"])
    two = _conversation("2", ("Cleo", "Avery"), start, ["Hey Avery", "Hey Cleo"])  # Avery is a speaker: not free
    three = _conversation("3", ("Dan", "Bob"), start, ["Hi BOB, bob's here", "Bobby, it is Bob"])
    four = _conversation("4", ("Ann", "Eve"), start, ["Yo Eve", "Yo Ann"])  # a repeated first speaker too
    channel = build_channel([one, two, three, four], layout="threads", cast="pairs")
    assert [t.names for t in channel.threads] == [
        {"Ann": "Ann", "Bob": "Bob"},
        {"Cleo": "Cleo", "Avery": "Avery"},
        {"Dan": "Dan", "Bob": "Blake"},
        {"Ann": "Casey", "Eve": "Eve"},
    ]
    assert channel.conversation.speakers == ("Ann", "Bob", "Cleo", "Avery", "Dan", "Blake", "Casey", "Eve")
    # The renaming reaches the later conversation's turns, questions and answers, case kept; the first keeps its Bob.
    turns = {t.dia_id: (t.message.speaker_name, t.message.text) for t in channel.conversation.turns}
    assert turns["1:D1:1"] == ("Ann", "Hi Bob")
    assert turns["3:D1:1"] == ("Dan", "Hi BLAKE, blake's here")
    assert turns["3:D1:2"] == ("Blake", "Bobby, it is Blake")
    assert turns["4:D1:1"] == ("Casey", "Yo Eve")
    assert turns["4:D1:2"] == ("Eve", "Yo Casey")
    assert [(q.question, q.answer) for q in channel.conversation.questions] == [
        ("What did Bob say in 2023?", "Bob's hello"),
        ("What did Avery say in 2023?", "Avery's hello"),
        ("What did Blake say in 2023?", "Blake's hello"),
        ("What did Eve say in 2023?", "Eve's hello"),
    ]
    check_all([one, two, three, four], channel, "threads", "pairs")
    check_all([one, two, three, four], build_channel([one, two, three, four], cast="pairs"), "interleaved", "pairs")


def test_the_pairs_cast_refuses_more_repeated_names_than_fallback_names() -> None:
    start = datetime(2023, 5, 8, 13, tzinfo=UTC)
    # Four repeats of Ann and Bob take all eight fallback names; a fifth repeat has none left.
    same = [_conversation(str(n), ("Ann", "Bob"), start, ["hi"]) for n in range(5)]
    assert build_channel(same, cast="pairs").threads[-1].names == {"Ann": "Harper", "Bob": "Jordan"}
    with pytest.raises(ValidationError, match="no fallback name left for Ann of conversation 5"):
        build_channel([*same, _conversation("5", ("Ann", "Bob"), start, ["hi"])], cast="pairs")


def test_the_ring_stays_the_default_cast_and_an_unknown_cast_is_one_validation_error() -> None:
    one = _sessions("1", ("Ann", "Bob"), [_at("2023-05-08", 13)], 2, ["Did Bob call?"])
    two = _sessions("2", ("Cleo", "Dan"), [_at("2023-06-01", 9)], 2, ["Did Dan call?"])
    for layout in LAYOUTS:
        ring = build_channel([one, two], layout=layout, cast="ring")
        assert build_channel([one, two], layout=layout) == ring
        assert [t.names for t in ring.threads] == [{"Ann": "Ann", "Bob": "Cleo"}, {"Cleo": "Cleo", "Dan": "Ann"}]
        assert split_channels([one, two], {"s": ("1", "2")}, layout=layout) == {"s": ring}
        assert split_channels([one, two], {"s": ("1", "2")}, layout=layout, cast="pairs") == {
            "s": build_channel([one, two], layout=layout, cast="pairs")
        }
    with pytest.raises(ValidationError, match="cast: must be one of ring, pairs, not 'star'"):
        build_channel([one, two], cast="star")
    with pytest.raises(ValidationError, match="cast: must be one of ring, pairs"):
        split_channels([one, two], {"s": ("1", "2")}, cast="star")


def test_both_benches_take_the_cast_and_keep_the_ring_run_id() -> None:
    for bench in (retrieval, answers):
        parser = argparse.ArgumentParser()
        bench.configure(parser)
        assert (parser.parse_args([]).cast, parser.parse_args(["--group", "--cast", "pairs"]).cast) == ("ring", "pairs")
        with pytest.raises(SystemExit):
            parser.parse_args(["--cast", "star"])
    # A kept database: ring channels keep the id they had before casts, a pairs channel has its own.
    assert channel_run_id("reuse-graph", "interleaved", "ring") == "reuse-graph-interleaved"
    assert channel_run_id("reuse-graph", "interleaved", "pairs") == "reuse-graph-interleaved-pairs"


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


def test_the_calibration_channel_in_threads(calibration: list[Conversation]) -> None:
    channels = split_channels(calibration, SPLITS, layout="threads")
    assert list(channels) == ["calibration"]
    channel = channels["calibration"]
    check_all(calibration, channel, "threads")
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


def test_the_calibration_channel_with_the_pairs_cast(calibration: list[Conversation]) -> None:
    channel = split_channels(calibration, SPLITS, cast="pairs")["calibration"]
    check_all(calibration, channel, "interleaved", "pairs")
    # 43's John is another person than 41's John, so he is Avery.
    cast = ("Caroline", "Melanie", "Jon", "Gina", "John", "Maria", "Joanna", "Nate", "Tim", "Avery")
    assert channel.conversation.speakers == cast
    assert channel.threads[-1].names == {"Tim": "Tim", "John": "Avery"}
    assert _placement(channel) == _placement(split_channels(calibration, SPLITS)["calibration"])


def test_the_calibration_channel_interleaved(calibration: list[Conversation]) -> None:
    channel = split_channels(calibration, SPLITS)["calibration"]
    check_all(calibration, channel, "interleaved")
    assert channel.conversation.speakers == ("Caroline", "Jon", "John", "Joanna", "Tim")
    assert len(channel.conversation.session_dates) == max(len(c.session_dates) for c in calibration) == 32
    # Turn by turn: thousands of switches over 32 days; as threads, about 90.
    assert _switches(channel) > 50 * len(channel.conversation.session_dates)
    assert _switches(split_channels(calibration, SPLITS, layout="threads")["calibration"]) < 100
    # 42 ran in 2022: its dates and years move into 2023, written as they were.
    asked = {q.question for q in channel.conversation.questions}
    assert "What did Tim do for Joanna on 23 August, 2023?" in asked  # 25 May, 2022
    assert "Where did Joanna travel to in October 2023?" in asked  # July 2022


def test_the_threaded_layout_is_the_interleaved_one_with_each_conversation_a_thread() -> None:
    one = _sessions("1", ("Ann", "Bob"), [_at("2023-05-08", 13), _at("2023-05-20", 9)], 3, ["Did Bob call?"])
    two = _sessions("2", ("Cleo", "Dan"), [_at("2023-06-01", 9)], 2, ["Did Dan call on 1 June, 2023?"])
    interleaved = build_channel([one, two], layout="interleaved")
    threaded = build_channel([one, two], layout="threaded")
    check_all([one, two], threaded, "threaded")
    roots = {t.source: t.root for t in threaded.threads}
    assert roots == {"1": "1:D1:1", "2": "2:D1:1"}
    without_threads = [
        dataclasses.replace(t, message=dataclasses.replace(t.message, thread_id=None, reply_to=None))
        for t in threaded.conversation.turns
    ]
    assert without_threads == interleaved.conversation.turns
    assert threaded.conversation.questions == interleaved.conversation.questions


def test_bench_answers_prints_a_channels_first_person_figures_beside_its_ratio() -> None:
    figures = {
        "first_citation_evidence": 0.5,
        "citations_include_evidence": 0.75,
        "answer_holds_gold_words": 0.25,
        "answerable_refused": 0.125,
        "adversarial_not_in_memory": 0.625,
        "tokens_per_answer": 40.0,
    }
    asked = {**figures, "answerable": 8, "adversarial": 2, "evidence_read": 0.875}
    group = {
        "channel_name": "group-1-2",
        "layout": "interleaved",
        "cast_rule": "ring",
        "cast": ["Ann", "Bob"],
        "alone": figures,
        "channel": figures,
        "ratio": {name: 1.0 for name in figures},
    }
    result = {"weights": {"abstention": {"refuse_above": 0.5}}, "splits": {}, "group": {"calibration": group}}
    assert "first person" not in answers.render(result)
    group["first_person"] = {"as_written": asked, "by_them": {**asked, "first_citation_evidence": 0.375}, "unnamed": asked}
    lines = answers.render(result).splitlines()
    start = next(i for i, line in enumerate(lines) if "asked in the first person" in line)
    assert lines[start].strip().startswith("asked in the first person by the one speaker they name")
    assert "8 answerable, 2 adversarial" in lines[start]
    rows = [line.split()[0:2] for line in lines[start + 1 : start + 4]]
    assert rows == [["as", "written"], ["by", "them"], ["unnamed", "first"]]
    assert "first citation is evidence  37.5%" in lines[start + 2]


def test_a_channels_context_is_told_apart_by_where_its_messages_come_from() -> None:
    # Conversation 1 is Ann and Bob's, 2 Bob and Cleo's, 3 Cleo and Dan's.
    names = {"1": frozenset({"Ann", "Bob"}), "2": frozenset({"Bob", "Cleo"}), "3": frozenset({"Cleo", "Dan"})}
    shown = ["1:D1:1", "1:D2:4", "2:D1:1", "3:D1:2", "3:D1:3", "4:D1:1"]
    assert retrieval.context_sources(shown, "1", names) == (2, 1, 3)  # 3 shares no name with 1; 4 is unknown
    assert retrieval.context_sources(shown, "2", names) == (1, 4, 1)
    assert retrieval.context_sources([], "1", names) == (0, 0, 0)
