"""The surroundings an episode hit brings: its exchange's, not the channel's."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from memory.retrieval.evidence import CONTEXT_SPAN, EpisodeRef, pick_context
from memory.retrieval.exchange import exchange_side, in_exchange, talks_with

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def ref(i: int, who: str, text: str = "", thread: str | None = None) -> EpisodeRef:
    return EpisodeRef(i, f"m{i}", who, "user", T0 + timedelta(minutes=i), text or f"text {i}", thread)


def partners(speaker: str, seen: list[EpisodeRef]) -> frozenset[str]:
    return talks_with([speaker], seen)[speaker]


def test_partners_are_who_names_the_speaker_or_is_named_by_them() -> None:
    seen = [
        ref(1, "Caroline Park", "I went to the support group"),
        ref(2, "Jon", "Gina, the studio opens Monday"),
        ref(3, "Melanie", "How was it, caroline?"),
        ref(4, "Gina", "Great news, Jon!"),
        ref(5, "Caroline Park", "Thanks Melanie, it helped"),
        ref(6, "Tim", "Caroline's talk was good"),
        ref(7, "John", "Johnny is here"),
    ]
    assert partners("Caroline Park", seen) == {"Melanie", "Tim"}
    assert partners("Jon", seen) == {"Gina"}
    assert partners("John", seen) == frozenset()  # "Johnny" is another word, "Jon" another name


def test_the_only_other_author_is_a_partner_without_being_named() -> None:
    seen = [ref(1, "ann", "hello"), ref(2, "bob", "hi"), ref(3, "ann", "how are you")]
    assert partners("ann", seen) == {"bob"}
    assert partners("cat", seen) == frozenset()  # two others, neither names cat


def test_a_busy_channel_shows_the_partners_reply_not_the_next_message() -> None:
    # Two conversations alternating message by message: ann with bob, cat with dan.
    before = [ref(4, "dan"), ref(3, "bob"), ref(2, "cat"), ref(1, "ann")]
    after = [ref(6, "cat"), ref(7, "bob"), ref(8, "dan"), ref(9, "ann")]
    assert [e.episode_id for e in pick_context(ref(5, "ann"), before, after, frozenset({"bob"}))] == [1, 7, 9]


def test_a_reply_in_a_thread_shows_its_thread_whoever_writes() -> None:
    # ann's reply in bob's thread m1; cat talks in the channel, dan in another thread.
    hit = ref(5, "ann", thread="m1")
    before = [ref(4, "cat"), ref(3, "eve", thread="m1"), ref(2, "dan", thread="m0"), ref(1, "bob", thread="m1")]
    after = [ref(6, "dan", thread="m0"), ref(7, "cat"), ref(8, "bob", thread="m1"), ref(9, "ann", thread="m1")]
    assert [e.episode_id for e in pick_context(hit, before, after, frozenset({"cat", "dan"}))] == [8, 9]
    assert in_exchange(hit, ref(1, "bob", thread="m1"), frozenset())  # the thread's first message
    assert not in_exchange(hit, ref(7, "bob"), frozenset({"bob"}))  # bob again, but in the channel


def test_a_message_of_the_channel_shows_its_partners_and_its_own_thread() -> None:
    hit = ref(5, "ann", thread="m5")  # its thread's first message: it is in the channel
    assert in_exchange(hit, ref(6, "cat", thread="m5"), frozenset())  # a reply in its thread
    assert in_exchange(hit, ref(7, "bob"), frozenset({"bob"}))
    assert not in_exchange(hit, ref(8, "bob", thread="m2"), frozenset({"bob"}))  # a reply in another thread
    assert not in_exchange(hit, ref(9, "cat"), frozenset({"bob"}))


SPEAKERS = st.sampled_from(["ann", "bob"])


@given(st.lists(SPEAKERS, max_size=8), st.lists(SPEAKERS, max_size=8))
def test_between_two_people_the_exchange_is_the_chain(before_speakers: list[str], after_speakers: list[str]) -> None:
    """A direct conversation (the other person the only partner) keeps the rule it had:
    the first message after the hit and the speaker's own, within CONTEXT_SPAN places."""
    before = [ref(-i - 1, who) for i, who in enumerate(before_speakers)]
    after = [ref(i + 1, who) for i, who in enumerate(after_speakers)]
    near_before, near_after = before[:CONTEXT_SPAN], after[:CONTEXT_SPAN]
    chain_rule = [e for e in near_before if e.speaker == "ann"][::-1] + [
        e for i, e in enumerate(near_after) if i == 0 or e.speaker == "ann"
    ]
    assert pick_context(ref(0, "ann"), before, after, partners("ann", [ref(0, "ann"), *before, *after])) == chain_rule


def test_a_person_in_two_conversations_shows_the_reply_most_alike_not_the_next() -> None:
    # ann talks with bob and with cat at once: cat's message comes first, bob's answers the hit.
    hit = ref(5, "ann", "we went camping by the lake")
    before = [ref(4, "cat", "my sister called"), ref(3, "bob", "how was your weekend, ann?")]
    after = [ref(6, "cat", "ann, did you see the game?"), ref(7, "bob", "the lake sounds lovely"), ref(8, "ann", "new job news")]
    likeness = {4: 0.05, 3: 0.55, 6: 0.10, 7: 0.70, 8: 0.15}
    chosen = pick_context(hit, before, after, frozenset({"bob", "cat"}), likeness)
    assert [e.episode_id for e in chosen] == [7, 8]  # bob's answer, and ann's own
    assert [e.episode_id for e in pick_context(hit, before, after, frozenset({"bob", "cat"}))] == [6]  # the nearest


def test_a_message_without_a_vector_comes_after_those_with_one() -> None:
    hit = ref(5, "ann")
    after = [ref(6, "cat"), ref(7, "bob"), ref(8, "ann"), ref(9, "bob")]
    chosen = exchange_side(hit, after, frozenset({"bob", "cat"}), 3, {7: -0.2, 9: 0.1})
    assert [e.episode_id for e in chosen] == [9, 7, 6]  # however unlike, 7 before 6 and 8, which have none
    assert [e.episode_id for e in pick_context(hit, [], after, frozenset({"bob", "cat"}), {7: -0.2, 9: 0.1})] == [9]


LIKENESS = st.dictionaries(st.integers(-9, 9), st.floats(-1, 1))


@given(st.lists(SPEAKERS, max_size=8), st.lists(SPEAKERS, max_size=8), LIKENESS)
def test_with_one_partner_or_in_a_thread_likeness_changes_nothing(
    before_speakers: list[str], after_speakers: list[str], likeness: dict[int, float]
) -> None:
    before = [ref(-i - 1, who) for i, who in enumerate(before_speakers)]
    after = [ref(i + 1, who) for i, who in enumerate(after_speakers)]
    talks_with = partners("ann", [ref(0, "ann"), *before, *after])
    assert pick_context(ref(0, "ann"), before, after, talks_with, likeness) == pick_context(
        ref(0, "ann"), before, after, talks_with
    )
    threaded = [ref(i + 1, who, thread="m9") for i, who in enumerate(after_speakers)]
    reply = ref(0, "ann", thread="m9")
    assert pick_context(reply, [], threaded, frozenset({"bob", "cat"}), likeness) == pick_context(
        reply, [], threaded, frozenset({"bob", "cat"})
    )


def _partners_one_by_one(speaker: str, seen: list[EpisodeRef]) -> frozenset[str]:
    # The rule as first written, a speaker at a time (one pattern per name, every message read per speaker).
    def naming(name: str) -> re.Pattern[str]:
        return re.compile(rf"(?<!\w){re.escape(name.split()[0] if name.split() else name)}(?!\w)", re.IGNORECASE)

    others = {e.speaker for e in seen} - {speaker}
    if len(others) <= 1:
        return frozenset(others)
    found = {e.speaker for e in seen if e.speaker != speaker and naming(speaker).search(e.text)}
    theirs = [e.text for e in seen if e.speaker == speaker]
    return frozenset(found | {other for other in others - found if any(naming(other).search(t) for t in theirs)})


NAMES = ["Ann", "Ann Lee", "Anna", "Jo", "Jo-Ann", "Kate", "Mary-Kate", "Bob", "Émile"]
WORDS = st.sampled_from([*NAMES, "ann", "ANNA", "jo-ann", "Joann", "kate's", "hi", "and", "-", ",", "Bobby", "émile"])


@given(st.lists(st.tuples(st.sampled_from(NAMES), st.lists(WORDS, max_size=6)), max_size=12), st.sets(st.sampled_from(NAMES)))
def test_everyones_partners_at_once_are_each_ones_partners(messages: list[tuple[str, list[str]]], speakers: set[str]) -> None:
    seen = [ref(i, who, " ".join(words)) for i, (who, words) in enumerate(messages)]
    assert talks_with(speakers, seen) == {s: _partners_one_by_one(s, seen) for s in speakers}
