"""The rolling context's row writes (memory.store.rolling_context.context_writes), with
hypothesis properties: the rows read back as the context, and a row is written only when
its entry changed or had to move."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memory.consolidation.rolling_context import entry, merge_context
from memory.store.rolling_context import context_writes

entries = st.lists(
    st.builds(entry, st.integers(1, 12), st.just("n"), st.sampled_from(["a", "b"]), st.frozensets(st.integers(1, 5))),
    unique_by=lambda e: e["entity_id"],
    max_size=8,
)


def stored_as(items: list) -> dict:
    return {item["entity_id"]: (position, item) for position, item in enumerate(items, start=1)}


def apply(stored: dict, removed: list, writes: list) -> list:
    rows = {e: row for e, row in stored.items() if e not in removed}
    rows.update({item["entity_id"]: (position, item) for position, item in writes})
    positions = [position for position, _ in rows.values()]
    assert len(positions) == len(set(positions))
    return [item for _, item in sorted(rows.values(), key=lambda row: row[0])]


@given(entries, entries)
def test_the_rows_read_back_as_the_context(before: list, after: list) -> None:
    stored = stored_as(before)
    removed, writes = context_writes(stored, after)
    assert apply(stored, removed, writes) == after


@given(entries, entries)
def test_a_consolidation_step_rewrites_only_the_entries_it_touched(before: list, updates: list) -> None:
    """merge_context moves updated entries to the end: the others keep their rows."""
    after = merge_context(before, updates)
    removed, writes = context_writes(stored_as(before), after)
    assert removed == []
    touched = {u["entity_id"] for u in updates}
    assert {item["entity_id"] for _, item in writes} <= touched


@given(entries)
def test_an_unchanged_context_writes_nothing(items: list) -> None:
    assert context_writes(stored_as(items), items) == ([], [])
