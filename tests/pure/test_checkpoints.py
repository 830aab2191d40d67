"""Checkpoint arithmetic (memory/consolidation/checkpoints.py), without a database."""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import given
from hypothesis import strategies as st

from memory.consolidation.checkpoints import changed_since_read, next_checkpoint

T1 = datetime(2025, 1, 1, tzinfo=timezone.utc)
T2 = datetime(2025, 1, 2, tzinfo=timezone.utc)
ids = st.sets(st.integers(1, 40), max_size=12)


def test_changed_since_read_tells_deleted_from_edited() -> None:
    read = {1: None, 2: None, 3: T1}
    deleted, edited = changed_since_read(read, carried={7, 8}, alive={1: None, 2: T2, 3: T1, 8: None})
    assert deleted == {7} and edited == {2}


def test_a_new_chunk_moves_the_watermark_and_keeps_older_pending() -> None:
    update = next_checkpoint(10, [4], [11, 12], set(), set(), "summary", [11, 12])
    assert update.last_episode_id == 12 and update.pending_episode_ids == [4]
    assert (update.summary, update.summary_episode_ids, update.summary_stale) == ("summary", [11, 12], False)


def test_pending_edited_episodes_are_done_once_consolidated_again() -> None:
    update = next_checkpoint(10, [4, 6], [4, 11], set(), set(), "", [])
    assert update.pending_episode_ids == [6] and update.last_episode_id == 11


def test_an_episode_edited_while_read_stays_pending() -> None:
    update = next_checkpoint(10, [4], [4, 11], set(), {4, 11}, "", [])
    assert update.pending_episode_ids == [4, 11]


def test_a_summary_resting_on_a_deleted_episode_is_cleared() -> None:
    update = next_checkpoint(10, [], [11], {3}, set(), "Ann said 3", [3, 11, 11])
    assert (update.summary, update.summary_episode_ids, update.summary_stale) == ("", [], True)


@given(
    last=st.integers(0, 40),
    pending=ids,
    chunk=st.lists(st.integers(1, 40), min_size=1, max_size=8, unique=True),
    deleted=ids,
    edited=ids,
    summary_ids=ids,
)
def test_checkpoint_properties(
    last: int, pending: set[int], chunk: list[int], deleted: set[int], edited: set[int], summary_ids: set[int]
) -> None:
    edited -= deleted  # an episode is either gone or changed, not both
    update = next_checkpoint(last, pending, chunk, deleted, edited, "s", summary_ids)
    still = set(update.pending_episode_ids)
    assert update.last_episode_id == max(last, *chunk), "the watermark never goes back"
    assert not still & deleted, "a deleted episode is never pending"
    assert edited & set(chunk) <= still, "an episode edited while its chunk was read is done again"
    assert still <= pending | set(chunk), "nothing becomes pending from outside the chunk"
    consolidated = {i for i in chunk if i <= last} - edited
    assert not still & consolidated, "what this chunk consolidated is no longer pending"
    assert update.summary_stale == bool(summary_ids & (deleted | edited))
    assert update.summary_episode_ids == ([] if update.summary_stale else sorted(summary_ids))
    assert update.pending_episode_ids == sorted(still)
