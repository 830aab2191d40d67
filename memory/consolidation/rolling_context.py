"""The rolling entity-centred context carried from chunk to chunk (pure functions).

Entries are ``{"entity_id", "name", "text", "episode_ids"}``: what the memory knows about
an entity, with the episodes that text rests on, so a deletion can drop what rested on
the deleted message. The list is kept in recency order (most recently touched last)
and within a token budget: compression by the LLM first, then dropping the entries
with the least support (fewest episodes; among equals, the least recently touched).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from memory.models.tokens import count_tokens

Entry = dict[str, Any]


def entry(entity_id: int, name: str, text: str, episode_ids: Iterable[int]) -> Entry:
    return {"entity_id": int(entity_id), "name": name, "text": text, "episode_ids": sorted({int(e) for e in episode_ids})}


def render_entry(item: Mapping[str, Any]) -> str:
    return f"[E{item['entity_id']}] {item['text']}"


def render_context(entries: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(render_entry(item) for item in entries)


def context_size(entries: Sequence[Mapping[str, Any]]) -> int:
    return count_tokens(render_context(entries)) if entries else 0


def merge_context(entries: Sequence[Entry], updates: Sequence[Entry]) -> list[Entry]:
    """Updated entries replace their text, keep the union of their episodes and move to
    the end (most recent); untouched entries keep their place."""
    by_id = {item["entity_id"]: item for item in entries}
    updated_ids = {item["entity_id"] for item in updates}
    merged = [item for item in entries if item["entity_id"] not in updated_ids]
    for item in updates:
        previous = by_id.get(item["entity_id"], {"episode_ids": []})
        merged.append(entry(item["entity_id"], item["name"], item["text"], [*previous["episode_ids"], *item["episode_ids"]]))
    return merged


def one_per_entity(entries: Sequence[Entry]) -> list[Entry]:
    """One entry per entity where several came to name the same one (two mentions of a
    chunk resolved to one entity, a placeholder to an entity already in the context):
    the latest text and place, with every episode the texts rested on (the context's
    rows are keyed by entity)."""
    episodes: dict[int, list[int]] = {}
    for item in entries:
        episodes.setdefault(item["entity_id"], []).extend(item["episode_ids"])
    last = {item["entity_id"]: i for i, item in enumerate(entries)}
    return [
        entry(item["entity_id"], item["name"], item["text"], episodes[item["entity_id"]])
        for i, item in enumerate(entries)
        if last[item["entity_id"]] == i
    ]


def fit_context(entries: Sequence[Entry], budget: int) -> list[Entry]:
    """Drop the least-supported entries until the rendered context fits ``budget``."""
    kept = list(entries)
    sizes = [count_tokens(render_entry(item)) + 1 for item in kept]
    total = sum(sizes)
    if total <= budget:
        return kept
    order = sorted(range(len(kept)), key=lambda i: (len(kept[i]["episode_ids"]), i))
    dropped: set[int] = set()
    for index in order:
        if total <= budget:
            break
        dropped.add(index)
        total -= sizes[index]
    return [item for i, item in enumerate(kept) if i not in dropped]


def without_episodes(entries: Sequence[Entry], episode_ids: Iterable[int]) -> list[Entry]:
    """Entries that do not rest on any of ``episode_ids`` (their text may quote them)."""
    gone = set(episode_ids)
    return [item for item in entries if not gone.intersection(item["episode_ids"])]
