"""Label propagation and incremental membership as pure functions over fixed graphs."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.communities.propagation import (
    best_label,
    groups,
    join_communities,
    label_propagation,
    rebuild_due,
    weighted_graph,
)
from memory.communities.summary import CommunityInputs, Fact, Member, offline_summary, prompt


def communities(nodes: list[int], edges: list[tuple[int, int]], rounds: int = 50) -> list[list[int]]:
    return groups(label_propagation(weighted_graph(nodes, edges), rounds))


def test_two_nodes_joined_by_two_edges_settle_in_one_round() -> None:
    # graphiti's synchronous propagation swaps these two labels forever (#402)
    graph = weighted_graph([1, 2], [(1, 2), (2, 1)])
    assert graph.edges[1, 2]["weight"] == 2
    assert label_propagation(graph, max_rounds=1) == {1: 2, 2: 2}
    assert label_propagation(graph) == {1: 2, 2: 2}


def test_two_triangles_joined_by_a_bridge_are_two_communities() -> None:
    edges = [(1, 2), (2, 3), (1, 3), (4, 5), (5, 6), (4, 6), (3, 4)]
    assert communities([1, 2, 3, 4, 5, 6, 7], edges) == [[1, 2, 3], [4, 5, 6]]  # 7 is alone: not a community


def test_heavier_edges_pull_harder() -> None:
    # 2 sits between 1 and 3; two relations with 3 outweigh one with 1
    edges = [(1, 2), (2, 3), (2, 3), (3, 4), (1, 5), (1, 5)]
    labels = label_propagation(weighted_graph(range(1, 6), edges))
    assert labels[2] == labels[3] != labels[1]


def test_rounds_are_bounded_on_any_graph() -> None:
    graph = weighted_graph(range(20), [(i, (i + 1) % 20) for i in range(20)])  # a ring: many ties
    assert set(label_propagation(graph, max_rounds=0).items()) == {(n, n) for n in range(20)}
    assert len(label_propagation(graph, max_rounds=3)) == 20


def test_ties_keep_the_current_label_or_take_the_smallest() -> None:
    assert best_label({5: 2, 3: 2, 9: 1}, current=5) == 5
    assert best_label({5: 2, 3: 2, 9: 1}, current=9) == 3
    assert best_label({5: 2, 3: 2, 9: 1}, current=9, sizes={3: 4, 5: 1}) == 5
    assert best_label({}) is None


@st.composite
def graphs(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, int]]]:
    nodes = draw(st.lists(st.integers(1, 60), min_size=1, max_size=25, unique=True))
    edges = draw(st.lists(st.tuples(st.sampled_from(nodes), st.sampled_from(nodes)), max_size=60))
    return nodes, edges


@settings(max_examples=80, deadline=None)
@given(graphs(), st.integers(0, 2**32 - 1), st.integers(0, 12))
def test_propagation_terminates_labels_every_node_and_is_deterministic(
    graph: tuple[list[int], list[tuple[int, int]]], seed: int, rounds: int
) -> None:
    nodes, edges = graph
    labels = label_propagation(weighted_graph(nodes, edges), rounds)
    assert set(labels) == set(nodes)
    assert set(labels.values()) <= set(nodes)
    shuffled_nodes, shuffled_edges = nodes[:], [(b, a) for a, b in edges]
    rng = random.Random(seed)
    rng.shuffle(shuffled_nodes)
    rng.shuffle(shuffled_edges)
    assert label_propagation(weighted_graph(shuffled_nodes, shuffled_edges), rounds) == labels
    found = groups(labels)
    assert all(len(g) >= 2 for g in found)
    assert sum(len(g) for g in found) == len({n for g in found for n in g})  # no entity in two communities


def test_newcomers_join_the_most_common_community_among_neighbours() -> None:
    membership = {1: 100, 2: 100, 3: 200, 4: 200}
    edges = [(10, 1), (10, 3), (10, 4), (11, 1), (11, 3), (12, 10), (13, 99)]
    joined = join_communities([13, 12, 11, 10], edges, membership)
    assert joined[10] == 200  # two neighbours in 200, one in 100
    assert joined[11] == 100  # a tie goes to the smaller id
    assert joined[12] == 200  # follows newcomer 10, placed before it
    assert 13 not in joined  # no neighbour in a community: left to the next rebuild


def test_rebuild_threshold() -> None:
    assert rebuild_due(3, 10, 0.2) and not rebuild_due(2, 10, 0.2) and not rebuild_due(0, 0, 0.0)


INPUTS = CommunityInputs(
    7,
    (Member(1, "Ann", "person", 3, False), Member(2, "Bob", "person", 5, False), Member(3, "anchor:3", "place", 0, True)),
    (Fact(10, "Ann and Bob cook together.", 1), Fact(11, "Bob lives near Ann", 4), Fact(12, "Ann visited the anchor", 1)),
)


def test_offline_summary_names_the_best_supported_members_and_facts() -> None:
    summary = offline_summary(INPUTS, facts=2)
    assert summary.label == "Bob, Ann"
    assert summary.text == "Bob, Ann. Bob lives near Ann; Ann and Bob cook together."
    assert summary.document_text.startswith("Bob, Ann: ")
    assert offline_summary(INPUTS, facts=2) == summary


def test_prompt_keeps_members_and_best_facts_within_the_budget() -> None:
    full = prompt(INPUTS, 1000)
    assert "anchor" not in full.split("Facts:")[0] and full.index("Bob lives near Ann") < full.index("cook together")
    assert "cook together" not in prompt(INPUTS, 20)
    assert INPUTS.fingerprint() != CommunityInputs(7, INPUTS.members, INPUTS.facts[:2]).fingerprint()
