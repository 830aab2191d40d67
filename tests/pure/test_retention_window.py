"""The retention window's pure rules (memory/privacy/retention.py): which window applies,
and which messages are past it, as properties over any messages and any window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory import ValidationError
from memory.privacy.retention import MAX_DAYS, check_days, cutoff, expires_at, past_window, window

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
times = st.integers(min_value=-400 * 24 * 60, max_value=60).map(lambda minutes: NOW + timedelta(minutes=minutes))
messages = st.lists(st.tuples(st.integers(1, 10_000), times), unique_by=lambda m: m[0], max_size=60)
days = st.integers(1, 400)


@given(messages, days, st.integers(0, 80))
def test_exactly_the_messages_said_before_the_window_go_oldest_first(found: list, window_days: int, limit: int) -> None:
    chosen = past_window(found, NOW, window_days, limit)
    before = NOW - timedelta(days=window_days)
    due = sorted((at, i) for i, at in found if at < before)
    assert chosen == [i for _, i in due][:limit]  # the oldest, in order, at most ``limit``
    when = dict(found)
    assert all(when[i] < before for i in chosen)  # a message at the boundary is kept
    if len(due) <= limit:
        assert set(chosen) == {i for i, at in found if at < before}  # and no older one is left


@given(messages, days, st.integers(0, 10 * 24 * 60))
def test_a_later_run_forgets_at_least_what_an_earlier_one_would(found: list, window_days: int, later: int) -> None:
    first = set(past_window(found, NOW, window_days, len(found)))
    second = set(past_window(found, NOW + timedelta(minutes=later), window_days, len(found)))
    assert first <= second
    longer = set(past_window(found, NOW, window_days + 1, len(found)))
    assert longer <= first  # a longer window never forgets more


@given(st.one_of(st.none(), days), st.one_of(st.none(), st.tuples(st.one_of(st.none(), days))))
def test_the_conversations_own_window_wins_over_the_default(default: int | None, own: tuple | None) -> None:
    applies = window(own, default)
    if own is not None:
        assert (applies.days, applies.source) == (own[0], "conversation")
    elif default is not None:
        assert (applies.days, applies.source) == (default, "default")
    else:
        assert (applies.days, applies.source) == (None, "none")
    assert past_window([(1, NOW - timedelta(days=10_000))], NOW, applies.days, 5) == ([] if applies.days is None else [1])


@given(times, days)
def test_the_oldest_message_expires_when_it_passes_the_window(oldest: datetime, window_days: int) -> None:
    at = expires_at(oldest, window_days)
    assert at is not None and cutoff(at, window_days) == oldest
    assert past_window([(1, oldest)], at, window_days, 1) == []  # at the moment itself, still kept
    assert past_window([(1, oldest)], at + timedelta(microseconds=1), window_days, 1) == [1]
    assert expires_at(None, window_days) is None and expires_at(oldest, None) is None


@pytest.mark.parametrize("bad", [0, -1, MAX_DAYS + 1, True, 1.5, "90"])
def test_a_window_that_is_not_a_whole_number_of_days_is_refused(bad: object) -> None:
    with pytest.raises(ValidationError, match="days"):
        check_days(bad)  # type: ignore[arg-type]
    assert check_days(None) is None and check_days(90) == 90
