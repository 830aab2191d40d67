"""The deletion rules (docs/architecture/deletion.md, Algorithm 1) as pure functions over plain values.

``decide_deletion`` is what Stashbird does; ``decide_episode_only`` and ``decide_cascade``
are the two comparison policies of the forgetting benchmark. None of them touches the
database: memory.forgetting.subgraph loads the affected subgraph, the rules decide, and
``graph_steps`` turns a decision into the ordered writes that apply it, each for one
record kind's writer (memory.forgetting.apply runs them).

Where Algorithm 1 is silent, the rules below decide, and why:

- An entity is *needed* while any surviving relation (active or kept as superseded
  history) has it as an endpoint, because deleting it would take those relations with it.
- A connective anchor (an entity with no support left) that loses its last surviving
  relation is deleted too: it was kept only for those relations.
- A superseded relation whose superseder is removed becomes active again if it still has
  support: deleting the correction restores the fact it corrected, which is what a user
  who retracts a correction expects. Without support it is removed like any other.
- Communities are dirtied when they hold an entity whose support held the episode or an
  endpoint of a relation whose support held it, since a community summary can state
  that relation's fact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import AbstractSet, Any, Iterable, Mapping, Sequence


@dataclass(frozen=True)
class RelationFacts:
    """A relation as the rules see it. ``support`` may be cut down by the loader to the
    deleted episode plus one other supporting episode: the rules only ask whether support
    beyond the deleted episode exists."""

    subject_id: int
    object_id: int
    support: frozenset[int]
    superseded_by: int | None = None  # set when the relation is superseded

    @property
    def endpoints(self) -> frozenset[int]:
        return frozenset((self.subject_id, self.object_id))


@dataclass(frozen=True)
class EntityFacts:
    support: frozenset[int]


@dataclass(frozen=True)
class SupplyGraph:
    """The part of a conversation's graph a deletion can change.

    It must hold every relation and entity whose support holds the episode, the endpoints
    of those relations, every relation touching an entity that may lose its last support
    (and those relations' endpoints), every relation superseded by a relation whose
    support holds the episode, and the community memberships of all these entities.
    """

    relations: Mapping[int, RelationFacts]
    entities: Mapping[int, EntityFacts]
    communities: Mapping[int, frozenset[int]] = field(default_factory=dict)  # id -> members


@dataclass(frozen=True)
class Decision:
    relations_removed: frozenset[int] = frozenset()
    relations_kept: frozenset[int] = frozenset()  # lost the episode, still supported
    relations_restored: frozenset[int] = frozenset()  # superseder removed: active again
    entities_removed: frozenset[int] = frozenset()
    entities_anchored: frozenset[int] = frozenset()
    entities_kept: frozenset[int] = frozenset()  # lost the episode, still supported
    communities_dirtied: frozenset[int] = frozenset()


def _dirtied(graph: SupplyGraph, affected: Iterable[int]) -> frozenset[int]:
    touched = set(affected)
    return frozenset(c for c, members in graph.communities.items() if members & touched)


def decide_deletion(graph: SupplyGraph, episode_id: int) -> Decision:
    """Algorithm 1 for one deleted episode, with the refinements in the module docstring."""
    return decide_deletions(graph, frozenset((episode_id,)))


def decide_deletions(graph: SupplyGraph, episode_ids: AbstractSet[int]) -> Decision:
    """Algorithm 1 for a set of deleted episodes at once (a person's messages, a
    retention window): the net effect of deleting them one by one, in any order
    (tests/database/test_forgetting_batch.py holds it to that), decided in one pass so a batch
    costs one plan, not one per message. ``graph`` must hold what deleting each of them
    can change (SupplyGraph), with support cut down to one deleted and one other
    episode at most."""
    gone = frozenset(episode_ids)
    holding = {r for r, rel in graph.relations.items() if rel.support & gone}
    removed_r = frozenset(r for r in holding if not graph.relations[r].support - gone)
    surviving = {r: rel for r, rel in graph.relations.items() if r not in removed_r}
    needed = {e for rel in surviving.values() for e in rel.endpoints}
    restored = frozenset(r for r, rel in surviving.items() if rel.superseded_by in removed_r)

    endpoints_of_removed = {e for r in removed_r for e in graph.relations[r].endpoints}
    removed_e: set[int] = set()
    anchored: set[int] = set()
    kept: set[int] = set()
    for e, entity in graph.entities.items():
        remaining = entity.support - gone
        if entity.support & gone:
            if remaining:
                kept.add(e)
            elif e in needed:
                anchored.add(e)
            else:
                removed_e.add(e)
        elif not remaining and e in endpoints_of_removed and e not in needed:
            removed_e.add(e)  # an anchor whose last relation went
    affected = (
        {e for e, entity in graph.entities.items() if entity.support & gone}
        | {e for r in holding for e in graph.relations[r].endpoints}
        | removed_e
    )
    return Decision(
        relations_removed=removed_r,
        relations_kept=frozenset(holding - removed_r),
        relations_restored=restored,
        entities_removed=frozenset(removed_e),
        entities_anchored=frozenset(anchored),
        entities_kept=frozenset(kept),
        communities_dirtied=_dirtied(graph, affected),
    )


def decide_episode_only(_graph: SupplyGraph, _episode_id: int) -> Decision:
    """Comparison policy: delete the episode and its document, nothing else (the arguments
    are the policies' shared signature)."""
    return Decision()


def decide_cascade(graph: SupplyGraph, episode_id: int) -> Decision:
    """Comparison policy: delete every entity and relation linked to the episode,
    whatever other support they have, and (as the database would) every relation
    touching a deleted entity. ``graph`` must hold the whole conversation."""
    entities = frozenset(e for e, entity in graph.entities.items() if episode_id in entity.support)
    relations = frozenset(r for r, rel in graph.relations.items() if episode_id in rel.support or rel.endpoints & entities)
    return Decision(
        relations_removed=relations,
        entities_removed=entities,
        communities_dirtied=_dirtied(graph, entities | {e for r in relations for e in graph.relations[r].endpoints}),
    )


POLICIES = {"stashbird": decide_deletion, "episode-only": decide_episode_only, "cascade": decide_cascade}

KINDS = ("provenance", "communities", "relations", "documents", "entities")


@dataclass(frozen=True)
class Step:
    """One write of a deletion: ``kind`` names the record kind whose writer runs it
    (memory.store.<kind>), ``action`` what it does to the records ``ids``. A
    ``documents`` step removes the search documents of records of ``document_kind``;
    ``unlink_superseders`` also covers the relations that deleting ``entities`` takes
    with them."""

    kind: str
    action: str
    ids: tuple[int, ...]
    document_kind: str = ""
    entities: tuple[int, ...] = ()


def _ids(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(sorted(values))


def graph_steps(decision: Decision, edited: int | None = None) -> tuple[Step, ...]:
    """The writes that apply ``decision``, in the order the schema needs (no step for
    nothing to do). ``edited``: the episode of an edit, whose row stays, so its
    provenance links are dropped here (a deletion's go with the row, ON DELETE CASCADE).

    Why this order: the community state reads the ends of removed relations from their
    rows, so it goes first; a restored relation is current before its superseder goes;
    every ``superseded_by`` naming a relation about to go is cleared before it goes (the
    key has no ON DELETE action, migration 0010); a record's search document goes before
    the record changes, so no document outlives what it shows."""
    d = decision
    planned = [
        Step("provenance", "drop_episode", (edited,)) if edited is not None else None,
        Step("communities", "note_changed", _ids(d.relations_removed | d.relations_restored)),
        Step("relations", "restore", _ids(d.relations_restored)),
        Step("relations", "unlink_superseders", _ids(d.relations_removed), entities=_ids(d.entities_removed)),
        Step("documents", "remove", _ids(d.relations_removed), "relation"),
        Step("relations", "delete", _ids(d.relations_removed)),
        Step("documents", "remove", _ids(d.entities_anchored), "entity"),
        Step("entities", "anchor", _ids(d.entities_anchored)),
        Step("documents", "remove", _ids(d.entities_removed), "entity"),
        Step("entities", "delete", _ids(d.entities_removed)),
        Step("documents", "remove", _ids(d.communities_dirtied), "community"),
        Step("communities", "dirty", _ids(d.communities_dirtied)),
    ]
    return tuple(step for step in planned if step is not None and (step.ids or step.entities))


def chain_joins(links: Mapping[int, tuple[int | None, int | None]]) -> list[tuple[int | None, int | None]]:
    """The deleted episodes' chain (``links``: id -> (previous, next)) mended: for each
    run of consecutive deleted episodes, the survivors on either side of it (None at an
    end of the chain), which become each other's neighbours. Pure."""
    joins = []
    for start, (prev, _) in sorted(links.items()):
        if prev in links:
            continue  # inside a run, found from its start
        end, seen = start, {start}
        following = links[end][1]
        while following is not None and following in links and following not in seen:
            end = following
            seen.add(end)
            following = links[end][1]
        joins.append((prev, following))
    return joins


@dataclass(frozen=True)
class ContextChange:
    entries: list[dict[str, Any]]
    dropped: int  # entries removed
    pruned: int  # entries that lost the episode and survive


def prune_rolling_context(
    entries: Sequence[Mapping[str, Any]],
    episode_ids: AbstractSet[int],
    gone_entities: Iterable[int],
    surviving_text: Mapping[int, tuple[str, str]],
    reworded: Iterable[int] = (),
) -> ContextChange:
    """Rolling-context entries lose the deleted episodes (``episode_ids``) from theirs.

    An entry is dropped when its support becomes empty or its entity was removed or
    anchored. An entry that survives drew its compressed text partly from the deleted
    episode, and which part cannot be told, so its name and text are replaced by
    ``surviving_text[entity_id]`` (rendered by the caller from what survives in the
    graph), or it is dropped when there is none: no sentence derived from the deleted episode
    outlives it. So is the text of an entry whose entity was ``reworded`` (re-rendered
    from its surviving witnesses) even if the entry does not cite the episode: it was
    written with the entity's former name, which may be the deleted message's.
    """
    gone = set(gone_entities)
    rewrite = set(reworded)
    kept: list[dict[str, Any]] = []
    dropped = pruned = 0
    for entry in entries:
        entity_id = entry.get("entity_id")
        support = [e for e in entry.get("episode_ids", []) if e not in episode_ids]
        if entity_id in gone:
            dropped += 1
            continue
        if len(support) == len(entry.get("episode_ids", [])) and entity_id not in rewrite:
            kept.append(dict(entry))
            continue
        name, text = surviving_text.get(entity_id, ("", "")) if isinstance(entity_id, int) else ("", "")
        if not support or not text:
            dropped += 1
            continue
        kept.append({**entry, "episode_ids": support, "name": name, "text": text})
        pruned += 1
    return ContextChange(kept, dropped, pruned)
