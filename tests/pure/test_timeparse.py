"""Relative time expressions resolve deterministically against the question date."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.retrieval.timeparse import (
    AnchoredOffset,
    TimeRange,
    asks_about_past,
    asks_when,
    resolve_anchor,
    resolve_times,
    states_time,
)

# Wednesday 12 July 2023, 15:00 UTC
NOW = datetime(2023, 7, 12, 15, tzinfo=timezone.utc)


def days(first: date, last_exclusive: date) -> tuple[date, date]:
    return first, last_exclusive


@pytest.mark.parametrize(
    "question, expected",
    [
        ("What did Ann do yesterday?", days(date(2023, 7, 11), date(2023, 7, 12))),
        ("what happened the day before yesterday", days(date(2023, 7, 10), date(2023, 7, 11))),
        ("What did we decide last week?", days(date(2023, 7, 3), date(2023, 7, 10))),
        ("Who called last month?", days(date(2023, 6, 1), date(2023, 7, 1))),
        ("Where did she travel in May?", days(date(2023, 5, 1), date(2023, 6, 1))),
        ("What did he buy in September?", days(date(2022, 9, 1), date(2022, 10, 1))),
        ("What did they build in 2021?", days(date(2021, 1, 1), date(2022, 1, 1))),
        ("Who phoned last Friday?", days(date(2023, 7, 7), date(2023, 7, 8))),
        ("What did Tom say on Wednesday?", days(date(2023, 7, 5), date(2023, 7, 6))),
        ("What did Ann read 3 weeks ago?", days(date(2023, 6, 19), date(2023, 6, 26))),
        ("what was planned two days ago", days(date(2023, 7, 10), date(2023, 7, 11))),
        ("What has Ann done this year?", days(date(2023, 1, 1), date(2024, 1, 1))),
        ("What happened on 8 May, 2023?", days(date(2023, 5, 8), date(2023, 5, 9))),
        ("What happened on May 8, 2023?", days(date(2023, 5, 8), date(2023, 5, 9))),
        ("what about 2023-05-01", days(date(2023, 5, 1), date(2023, 5, 2))),
        ("What happened in March 2022?", days(date(2022, 3, 1), date(2022, 4, 1))),
        ("what did we ship in the past two weeks", days(date(2023, 6, 28), date(2023, 7, 13))),
        ("Where did they go last weekend?", days(date(2023, 7, 8), date(2023, 7, 10))),
    ],
)
def test_common_expressions(question: str, expected: tuple[date, date]) -> None:
    (found,) = resolve_times(question, NOW)
    assert isinstance(found, TimeRange)
    assert (found.start.date(), found.end.date()) == expected
    assert found.start.tzinfo is not None


def test_no_expression_no_range() -> None:
    assert resolve_times("What did Caroline research?", NOW) == []
    assert resolve_times("May I ask what Mel paints?", NOW) == []


def test_anchored_expression_waits_for_its_anchor() -> None:
    (offset,) = resolve_times("What did Ann do two days before the concert?", NOW)
    assert offset == AnchoredOffset("the concert", -2, 0, "two days before the concert")
    concert = datetime(2023, 6, 20, 19, tzinfo=timezone.utc)
    resolved = resolve_anchor(offset, concert)
    assert (resolved.start.date(), resolved.end.date()) == (date(2023, 6, 18), date(2023, 6, 19))


def test_several_expressions_in_order() -> None:
    found = resolve_times("Did she move in 2021 or last month?", NOW)
    assert [r.expression for r in found] == ["in 2021", "last month"]


def test_naive_question_date_is_utc() -> None:
    (found,) = resolve_times("yesterday", datetime(2023, 7, 12))
    assert found.start == datetime(2023, 7, 11, tzinfo=timezone.utc)


def test_asks_about_past() -> None:
    assert asks_about_past("Where did Ann work before?", [], NOW)
    assert asks_about_past("Where did Ann used to live?", [], NOW)
    assert asks_about_past("Where was Ann living in 2021?", resolve_times("in 2021", NOW), NOW)
    assert not asks_about_past("Where does Ann work?", [], NOW)
    assert not asks_about_past("What is the last book Ann read?", [], NOW)


@given(
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2090, 12, 31)),
    st.sampled_from(
        [
            "yesterday",
            "last week",
            "last month",
            "this year",
            "last Monday",
            "last Sunday",
            "in May",
            "4 days ago",
            "2 months ago",
            "in the last 3 months",
        ]
    ),
)
def test_past_expressions_never_end_after_the_question_day(moment: datetime, expression: str) -> None:
    (found,) = resolve_times(expression, moment)
    assert found.start < found.end
    day_after = datetime.combine(moment.date() + timedelta(days=1), datetime.min.time(), tzinfo=timezone.utc)
    if expression in ("this year", "in May"):  # a period that has begun, maybe not ended
        assert found.start < day_after
    else:
        assert found.end <= day_after
    if expression.startswith("last ") and expression.split()[1] in ("monday", "sunday", "Monday", "Sunday"):
        assert found.end - found.start == timedelta(days=1)
        assert found.start.date() < moment.date()


def test_questions_asking_when_and_messages_naming_a_time() -> None:
    assert asks_when("When is the Atlas cut-over?") and asks_when("what year did Ann move?")
    assert not asks_when("Where did Ann go when it rained?")
    said = datetime(2026, 3, 4, tzinfo=timezone.utc)
    assert states_time("The cut-over moved to March 27.", said) and states_time("I went there yesterday", said)
    assert not states_time("The rollback plan is in the wiki.", said)
