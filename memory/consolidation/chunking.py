"""Cutting new episodes into overlapping chunks by token budget (a pure function).

A chunk is ``context`` (the tail of what came before, at most ``overlap`` of the budget,
already extracted: the extractor sees it so a fact spanning the cut is not lost) plus
``new`` items, which are what the chunk consolidates. A single item larger than the
budget gets a chunk of its own: a message is never split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Sequence, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Cut(Generic[T]):
    context: list[T]
    new: list[T]


def _tail(items: Sequence[T], sizes: Sequence[int], limit: int) -> list[T]:
    kept: list[T] = []
    used = 0
    for item, size in zip(reversed(items), reversed(sizes), strict=False):
        if used + size > limit:
            break
        kept.append(item)
        used += size
    return kept[::-1]


def within(sizes: Sequence[int], budget: int | None) -> int:
    """How many leading items fit in ``budget`` (all of them without one; at least one
    when there is any, as a message is never split)."""
    if budget is None:
        return len(sizes)
    used = 0
    for count, size in enumerate(sizes):
        used += size
        if used > budget:
            return max(count, 1)
    return len(sizes)


def cut_chunks(
    items: Sequence[T],
    sizes: Sequence[int],
    budget: int,
    overlap: float,
    lead: Sequence[T] = (),
    lead_sizes: Sequence[int] = (),
) -> list[Cut[T]]:
    """Chunks of at most ``budget`` tokens; each starts with up to ``overlap * budget``
    tokens of the items before it (for the first chunk: of ``lead``)."""
    if budget < 1:
        raise ValueError("chunk budget must be at least one token")
    overlap_tokens = int(budget * overlap)
    cuts: list[Cut[T]] = []
    context = _tail(lead, lead_sizes, overlap_tokens)
    context_sizes = list(lead_sizes[len(lead_sizes) - len(context) :]) if context else []
    index = 0
    while index < len(items):
        used = sum(context_sizes)
        new: list[T] = []
        new_sizes: list[int] = []
        while index < len(items) and (not new or used + sizes[index] <= budget):
            new.append(items[index])
            new_sizes.append(sizes[index])
            used += sizes[index]
            index += 1
        cuts.append(Cut(context, new))
        context = _tail(new, new_sizes, overlap_tokens)
        context_sizes = new_sizes[len(new_sizes) - len(context) :] if context else []
    return cuts
