"""Where more than two people talk, a found message lends to its exchange's neighbours,
not the channel's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from memory.retrieval.evidence import EpisodeRef, Exchanges
from memory.retrieval.lending import exchange_neighbours, lent
from memory.retrieval.search import Candidate

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def ref(i: int, who: str, thread: str | None = None) -> EpisodeRef:
    return EpisodeRef(i, f"m{i}", who, "user", T0 + timedelta(minutes=i), f"text {i}", thread)


def found(ref_id: int, score: float, similarity: float = 0.5, kind: str = "episode") -> Candidate:
    return Candidate(kind, ref_id, f"text {ref_id}", T0, True, score, similarity, 0.0)


# ann talks with bob and with cat at once; dan with eve. Message 5 is ann's; the nearest
# on each side are cat's and dan's, the most alike of her exchange bob's.
CHANNEL = [ref(1, "bob"), ref(2, "eve"), ref(3, "cat"), ref(4, "dan"), ref(5, "ann"), ref(6, "dan"), ref(7, "cat"), ref(8, "bob")]
LIKENESS = {5: {1: 0.6, 2: 0.9, 3: 0.1, 4: 0.9, 6: 0.9, 7: 0.2, 8: 0.7}}


def channel(likeness: dict[int, dict[int, float]] = LIKENESS) -> Exchanges:
    episodes = {e.episode_id: e for e in CHANNEL}
    talks_with = {"ann": frozenset({"bob", "cat"}), "bob": frozenset({"ann"})}
    return Exchanges({5: ([4, 3, 2, 1], [6, 7, 8])}, episodes, talks_with, likeness)


def test_a_person_talking_with_two_others_lends_to_the_most_alike_of_their_exchange() -> None:
    near = channel()
    assert [e.episode_id for e in exchange_neighbours(near.episodes[5], near)] == [1, 8]


def test_a_reply_in_a_thread_lends_to_its_threads_nearest_messages() -> None:
    messages = [ref(1, "bob", "m1"), ref(2, "cat", "m1"), ref(3, "ann", "m9"), ref(4, "ann", "m1"), ref(5, "dan", "m1")]
    near = Exchanges(
        {4: ([3, 2, 1], [5])},
        {e.episode_id: e for e in messages},
        {"ann": frozenset({"bob", "cat"})},
        {4: {1: 0.9, 2: 0.1, 3: 0.9, 5: 0.0}},
    )
    assert [e.episode_id for e in exchange_neighbours(near.episodes[4], near)] == [2, 5]


def test_a_neighbour_not_found_enters_with_its_loan_alone() -> None:
    ranked = lent([found(5, 1.0), found(3, 0.2)], channel(), 0.25)
    assert [(c.ref_id, c.score) for c in ranked] == [(5, 1.0), (1, 0.25), (8, 0.25), (3, 0.2)]
    assert {c.ref_id: c.similarity for c in ranked} == {5: 0.5, 1: 0.0, 8: 0.0, 3: 0.5}


scores = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(
    st.dictionaries(st.integers(1, 8), scores, min_size=1),
    st.dictionaries(st.integers(1, 8), scores),
    st.floats(min_value=0.01, max_value=1.0),
)
def test_lending_keeps_every_candidate_and_adds_the_share_to_the_exchange_only(
    episode_scores: dict[int, float], entity_scores: dict[int, float], share: float
) -> None:
    candidates = [found(i, s) for i, s in episode_scores.items()] + [found(i, s, kind="entity") for i, s in entity_scores.items()]
    after = {c.key: c.score for c in lent(candidates, channel(), share)}
    lender = episode_scores.get(5)
    for c in candidates:
        loan = share * lender if lender is not None and c.key in {("episode", 1), ("episode", 8)} else None
        assert after[c.key] == (c.score + loan if loan is not None else c.score)
    entered = set(after) - {c.key for c in candidates}
    assert entered == (set() if lender is None else {("episode", n) for n in (1, 8) if n not in episode_scores})
    assert all(after[key] == share * (lender or 0.0) for key in entered)
