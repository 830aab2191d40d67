"""Algorithm 1 as pure rules, checked over random supply graphs and delete sequences."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.forgetting.rules import (
    KINDS,
    Decision,
    EntityFacts,
    RelationFacts,
    SupplyGraph,
    decide_cascade,
    decide_deletion,
    decide_episode_only,
    graph_steps,
    prune_rolling_context,
)
from memory.forgetting.rules import (
    POLICIES as POLICY_NAMES,
)


@dataclass
class World:
    """A whole conversation's graph, plus what the ground truth says should survive."""

    graph: SupplyGraph
    original: dict[int, frozenset[int]]  # relation -> support before any deletion
    entity_original: dict[int, frozenset[int]]
    deleted: set[int]


@st.composite
def worlds(draw: st.DrawFn) -> tuple[World, list[int]]:
    episodes = draw(st.integers(2, 12))
    support = st.frozensets(st.integers(0, episodes - 1), min_size=1, max_size=4)
    entity_count = draw(st.integers(1, 8))
    entities = {e: EntityFacts(draw(support)) for e in range(entity_count)}
    relations: dict[int, RelationFacts] = {}
    for r in range(draw(st.integers(0, 12))):
        subject = draw(st.integers(0, entity_count - 1))
        target = draw(st.integers(0, entity_count - 1))
        by = draw(st.one_of(st.none(), st.integers(0, r - 1))) if r else None
        relations[r] = RelationFacts(subject, target, draw(support), None)
        if by is not None and relations[by].superseded_by is None:
            relations[by] = replace(relations[by], superseded_by=r)  # r corrects an earlier one
    communities = {c: draw(st.frozensets(st.integers(0, entity_count - 1), min_size=1)) for c in range(draw(st.integers(0, 3)))}
    order = draw(st.lists(st.integers(0, episodes - 1), unique=True, min_size=1, max_size=episodes))
    graph = SupplyGraph(relations, entities, communities)
    world = World(graph, {r: rel.support for r, rel in relations.items()}, {e: x.support for e, x in entities.items()}, set())
    return world, order


def apply(world: World, episode: int, decision: Decision) -> None:
    """What the database layer does with a decision, on plain values."""
    graph = world.graph
    relations = {
        r: replace(
            rel,
            support=rel.support - {episode},
            superseded_by=None if r in decision.relations_restored else rel.superseded_by,
        )
        for r, rel in graph.relations.items()
        if r not in decision.relations_removed and not rel.endpoints & decision.entities_removed
    }
    entities = {e: EntityFacts(x.support - {episode}) for e, x in graph.entities.items() if e not in decision.entities_removed}
    world.graph = SupplyGraph(relations, entities, graph.communities)
    world.deleted.add(episode)


def check_invariants(world: World, before: SupplyGraph, episode: int, decision: Decision) -> None:
    graph = world.graph
    for r, original in world.original.items():
        supported = bool(original - world.deleted)
        assert (r in graph.relations) == supported, f"relation {r}: present iff support remains"
    for rel in graph.relations.values():
        assert rel.endpoints <= graph.entities.keys(), "a surviving relation lost an endpoint"
        assert rel.superseded_by is None or rel.superseded_by in graph.relations, "superseded by a removed relation"
    needed = {e for rel in graph.relations.values() for e in rel.endpoints}
    for e, original in world.entity_original.items():
        if original - world.deleted:
            assert e in graph.entities, f"supported entity {e} was removed"
        elif e in graph.entities:
            assert e in needed, f"unsupported entity {e} kept though no surviving relation needs it"
    sets = [decision.relations_removed, decision.relations_kept]
    assert not sets[0] & sets[1]
    assert not decision.entities_removed & decision.entities_anchored
    assert not (decision.entities_removed | decision.entities_anchored) & decision.entities_kept
    holding = {e for e, x in before.entities.items() if episode in x.support}
    for c, members in before.communities.items():
        if members & holding:
            assert c in decision.communities_dirtied


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_random_delete_sequences_keep_exactly_the_supported(case: tuple[World, list[int]]) -> None:
    world, order = case
    for episode in order:
        before = world.graph
        decision = decide_deletion(before, episode)
        apply(world, episode, decision)
        check_invariants(world, before, episode, decision)


def _pair(support_a: set[int], support_b: set[int]) -> SupplyGraph:
    """Ann -(r1)- Boston, Ann -(r2)- Paris; entity supports given."""
    return SupplyGraph(
        relations={1: RelationFacts(10, 11, frozenset(support_a)), 2: RelationFacts(10, 12, frozenset(support_b))},
        entities={10: EntityFacts(frozenset({1, 2, 3})), 11: EntityFacts(frozenset({1})), 12: EntityFacts(frozenset({2}))},
        communities={7: frozenset({11}), 8: frozenset({12})},
    )


def test_branches_of_one_deletion() -> None:
    decision = decide_deletion(_pair({1}, {2, 3}), 1)
    assert decision.relations_removed == {1}
    assert decision.entities_removed == {11}  # Boston: no support, no surviving neighbour
    assert decision.entities_kept == {10}
    assert decision.communities_dirtied == {7}
    decision = decide_deletion(_pair({1}, {2, 3}), 2)
    assert decision.relations_kept == {2}
    assert decision.entities_anchored == {12}  # Paris: no support, but r2 survives


def test_deleting_a_correction_restores_what_it_corrected() -> None:
    graph = SupplyGraph(
        relations={1: RelationFacts(10, 11, frozenset({1}), superseded_by=2), 2: RelationFacts(10, 11, frozenset({2}))},
        entities={10: EntityFacts(frozenset({1, 2})), 11: EntityFacts(frozenset({1, 2}))},
    )
    decision = decide_deletion(graph, 2)
    assert decision.relations_removed == {2} and decision.relations_restored == {1}


def test_an_anchor_goes_with_its_last_relation() -> None:
    graph = SupplyGraph(
        relations={1: RelationFacts(10, 11, frozenset({5}))},
        entities={10: EntityFacts(frozenset({5})), 11: EntityFacts(frozenset())},
    )
    assert decide_deletion(graph, 5).entities_removed == {10, 11}


def test_comparison_policies_get_it_wrong() -> None:
    graph = _pair({1}, {2, 3})
    assert decide_episode_only(graph, 1) == Decision()  # relation 1 is left with no support
    cascade = decide_cascade(graph, 1)
    assert 2 in cascade.relations_removed  # supported by 2 and 3, lost because Ann went
    assert 10 in cascade.entities_removed


@given(
    st.lists(st.frozensets(st.integers(0, 5), max_size=3), max_size=8),
    st.integers(0, 5),
    st.frozensets(st.integers(0, 8)),
    st.frozensets(st.integers(0, 8)),
)
def test_rolling_context_loses_the_episode(supports: list, episode: int, gone: frozenset[int], reworded: frozenset[int]) -> None:
    context = [{"entity_id": e, "name": f"n{e}", "text": f"old {e}", "episode_ids": sorted(s)} for e, s in enumerate(supports)]
    surviving = {e: (f"m{e}", f"new {e}") for e in range(0, 8, 2)}
    change = prune_rolling_context(context, {episode}, gone, surviving, reworded)
    assert change.dropped + len(change.entries) == len(context)
    assert change.pruned == sum(1 for e in change.entries if e["text"].startswith("new"))
    by_id = {e["entity_id"]: e for e in change.entries}
    for original in context:
        e = original["entity_id"]
        drew = episode in original["episode_ids"]
        support_left = set(original["episode_ids"]) - {episode}
        rewritten = drew or e in reworded  # its text may quote the episode or the entity's former name
        survives = e not in gone and (not rewritten or (bool(support_left) and e in surviving))
        assert (e in by_id) == survives
        if survives:
            assert episode not in by_id[e]["episode_ids"]
            assert (by_id[e]["name"], by_id[e]["text"]) == ((f"m{e}", f"new {e}") if rewritten else (f"n{e}", f"old {e}"))


@given(worlds(), st.booleans(), st.sampled_from(sorted(POLICY_NAMES)))
def test_the_write_plan_applies_exactly_the_decision_in_the_schemas_order(
    case: tuple[World, list[int]], edit: bool, policy: str
) -> None:
    world, order = case
    episode = order[0]
    decision = POLICY_NAMES[policy](world.graph, episode)
    steps = graph_steps(decision, episode if edit else None)
    assert all(step.kind in KINDS and (step.ids or step.entities) for step in steps)
    records = [(s.kind, s.action) for s in steps if s.kind != "documents"]
    assert len(set(records)) == len(records), "one step per writer and action"
    at = {(s.kind, s.action, s.document_kind): i for i, s in enumerate(steps)}
    changes = {
        ("relations", "delete", "relation"): decision.relations_removed,
        ("entities", "anchor", "entity"): decision.entities_anchored,
        ("entities", "delete", "entity"): decision.entities_removed,
        ("communities", "dirty", "community"): decision.communities_dirtied,
    }
    for (kind, action, document_kind), ids in changes.items():
        index = at.get((kind, action, ""))
        assert (index is not None) == bool(ids)
        if index is not None:
            assert set(steps[index].ids) == ids
            documents = steps[index - 1]  # the records' search documents go just before them
            assert (documents.kind, documents.action, documents.document_kind) == ("documents", "remove", document_kind)
            assert documents.ids == steps[index].ids
    restored = at.get(("relations", "restore", ""))
    assert (restored is not None) == bool(decision.relations_restored)
    noted = at.get(("communities", "note_changed", ""))
    assert set(steps[noted].ids if noted is not None else ()) == decision.relations_removed | decision.relations_restored
    unlinked = at.get(("relations", "unlink_superseders", ""))
    assert (unlinked is not None) == bool(decision.relations_removed or decision.entities_removed)
    for going in (at.get(("relations", "delete", "")), at.get(("entities", "delete", ""))):
        if going is not None:  # the community state reads the removed rows; no key may name what goes
            assert all(first is None or first < going for first in (noted, restored, unlinked))
    if edit:  # the episode row stays, so its provenance goes first, by itself
        assert (steps[0].kind, steps[0].ids) == ("provenance", (episode,))
    else:
        assert all(s.kind != "provenance" for s in steps)


def test_deleting_an_episode_nothing_rests_on_plans_no_graph_write() -> None:
    graph = _pair({1, 2}, {1})
    assert graph_steps(decide_deletion(graph, 7)) == ()
    assert [(s.kind, s.action, s.ids) for s in graph_steps(decide_deletion(graph, 7), 7)] == [
        ("provenance", "drop_episode", (7,))
    ]
