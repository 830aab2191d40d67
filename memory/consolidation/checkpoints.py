"""Checkpoint arithmetic: what a saved chunk does to the conversation's checkpoint. Pure.

Episodes are consolidated in arrival (id) order, so ``last_episode_id`` is a watermark:
every episode at or below it was consolidated, except ``pending_episode_ids`` (edited
after consolidation), which are consolidated again. Between reading a chunk and saving
it, its episodes (and those the carried summary and rolling context rest on) may have
been deleted or edited: a deleted one leaves the pending list for good, an edited one of
this chunk is pending again (its new text was not what was extracted), and a summary
that drew on either is cleared, to be rebuilt from what survives.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime


def changed_since_read(
    read_edits: Mapping[int, datetime | None], carried: Iterable[int], alive: Mapping[int, datetime | None]
) -> tuple[set[int], set[int]]:
    """(deleted, edited) since the chunk was read. ``read_edits``: the chunk's episodes
    with the ``edited_at`` they were read with; ``carried``: episodes the summary and
    rolling context rest on; ``alive``: those of both that still exist, with their
    current ``edited_at``."""
    deleted = {i for i in set(read_edits) | set(carried) if i not in alive}
    edited = {i for i in read_edits if i in alive and alive[i] != read_edits[i]}
    return deleted, edited


@dataclass(frozen=True)
class CheckpointUpdate:
    last_episode_id: int
    pending_episode_ids: list[int]
    summary: str
    summary_episode_ids: list[int]
    summary_stale: bool  # the summary drew on a deleted or edited message: cleared, to be rebuilt


def next_checkpoint(
    last: int,
    pending: Iterable[int],
    chunk_ids: Sequence[int],
    deleted: set[int],
    edited: set[int],
    summary: str,
    summary_ids: Iterable[int],
) -> CheckpointUpdate:
    """The checkpoint after saving the chunk of episodes ``chunk_ids`` read at watermark
    ``last``, given what was ``deleted`` or ``edited`` meanwhile and the summary the
    chunk produced (with the episodes it rests on)."""
    chunk = set(chunk_ids)
    processed_pending = {i for i in chunk if i <= last} - edited
    still_pending = (set(pending) - processed_pending - deleted) | (edited & chunk)
    summary_ids = set(summary_ids)
    stale = bool((deleted | edited) & summary_ids)
    if stale:
        summary, summary_ids = "", set()
    return CheckpointUpdate(max([last, *chunk]), sorted(still_pending), summary, sorted(summary_ids), stale)
