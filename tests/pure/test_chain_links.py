"""The links of episodes appended after a conversation's chain (``chain_links``): the
fast path writes them with the rows, so they must be exactly the chain's order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from memory.episodes.append import chain_links

T = datetime(2026, 1, 1, tzinfo=UTC)


@given(
    tail=st.one_of(st.none(), st.integers(1, 50)),
    minutes=st.lists(st.integers(0, 5), min_size=1, max_size=12),
)
def test_appended_episodes_form_one_chain_after_the_tail_in_time_then_id_order(tail: int | None, minutes: list[int]) -> None:
    new = [(T + timedelta(minutes=m), 100 + i) for i, m in enumerate(minutes)]  # ids in arrival order
    links = chain_links(tail, new)
    assert set(links) == {i for _, i in new}
    # Walked from the tail, the chain visits every new episode once, by (time, id).
    walked, at = [], next(e for e, (before, _) in links.items() if before == tail)
    while at is not None:
        walked.append(at)
        at = links[at][1]
    assert walked == [i for _, i in sorted(new)]
    for e, (before, after) in links.items():
        assert after is None or links[after][0] == e  # each link is mutual
        assert before == tail or links[before][1] == e  # type: ignore[index]


def test_ties_in_time_keep_arrival_order() -> None:
    assert chain_links(7, [(T, 12), (T - timedelta(minutes=1), 13), (T, 11)]) == {
        13: (7, 11),
        11: (13, 12),
        12: (11, None),
    }
