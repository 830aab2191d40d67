"""Label propagation over a conversation's entity graph: pure, deterministic, bounded.

Edges are weighted by the number of active relations between two entities. Nodes are
visited in ascending id order and relabelled in place (asynchronous updates): a node
takes the label with the largest summed edge weight among its neighbours; on a tie it
keeps its own label when that is among the best, else takes the tied label held by the
fewest nodes (then the smallest). A run stops when a round changes nothing or after
``max_rounds`` rounds.

Why: synchronous updates (every node reads the previous round's labels, as graphiti's
``label_propagation`` does) swap the labels of two nodes joined by two edges forever
(getzep/graphiti#402); in-place updates with "keep your own label on a tie" settle that
graph in one round, and the round bound makes termination unconditional for any graph.
Preferring the smaller label on a tie keeps one early winner from flooding across a
bridge (with "smallest id wins" two triangles joined by one edge became one community).
The same graph always gives the same labels, whatever order its edges come in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # networkx is imported when communities are built, not by every command
    import networkx as nx

MAX_ROUNDS = 50


def weighted_graph(nodes: Iterable[int], edges: Iterable[tuple[int, int]]) -> nx.Graph:
    """One node per entity, one edge per connected pair weighted by its relation count
    (self-loops carry no information about communities and are dropped)."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(nodes)
    for a, b in edges:
        if a == b:
            continue
        weight = graph.edges[a, b]["weight"] + 1 if graph.has_edge(a, b) else 1
        graph.add_edge(a, b, weight=weight)
    return graph


def best_label(weights: Mapping[int, float], current: int | None = None, sizes: Mapping[int, int] | None = None) -> int | None:
    """The label of largest weight; a tie keeps ``current`` if it is among the best,
    else goes to the tied label with the fewest holders (``sizes``), then the smallest.
    None when there are no weights."""
    if not weights:
        return None
    top = max(weights.values())
    tied = [label for label, weight in weights.items() if weight == top]
    if current in tied:
        return current
    return min(tied, key=lambda label: ((sizes or {}).get(label, 0), label))


def label_propagation(graph: nx.Graph, max_rounds: int = MAX_ROUNDS) -> dict[int, int]:
    """Each node's community label (a member's id), after at most ``max_rounds`` rounds."""
    labels = {node: node for node in graph.nodes}
    sizes = Counter(labels.values())
    order = sorted(graph.nodes)
    for _ in range(max_rounds):
        changed = False
        for node in order:
            weights: Counter[int] = Counter()
            for neighbour, data in graph.adj[node].items():
                weights[labels[neighbour]] += data.get("weight", 1)
            label = best_label(weights, labels[node], sizes)
            if label is not None and label != labels[node]:
                sizes[labels[node]] -= 1
                sizes[label] += 1
                labels[node] = label
                changed = True
        if not changed:
            break
    return labels


def groups(labels: Mapping[int, int], min_size: int = 2) -> list[list[int]]:
    """Members of each label with at least ``min_size`` members, sorted, in order of
    their smallest member."""
    members: dict[int, list[int]] = {}
    for node, label in labels.items():
        members.setdefault(label, []).append(node)
    return sorted((sorted(m) for m in members.values() if len(m) >= min_size), key=lambda m: m[0])


def join_communities(newcomers: Iterable[int], edges: Iterable[tuple[int, int]], membership: Mapping[int, int]) -> dict[int, int]:
    """Incremental membership: each newcomer (in id order) joins the community most
    common among its neighbours (weighted by relation count; ties to the smallest
    community id), counting newcomers placed before it. Newcomers with no neighbour in
    a community stay out (the next full rebuild places them)."""
    graph = weighted_graph([], edges)
    placed = dict(membership)
    joined: dict[int, int] = {}
    for node in sorted(set(newcomers)):
        if node in placed or node not in graph:
            continue
        weights: Counter[int] = Counter()
        for neighbour, data in graph.adj[node].items():
            if neighbour in placed:
                weights[placed[neighbour]] += data["weight"]
        community = best_label(weights)
        if community is not None:
            placed[node] = joined[node] = community
    return joined


def rebuild_due(changed: int, total: int, threshold: float) -> bool:
    """A full rebuild is due when the changed share of the entities passes the threshold."""
    return total > 0 and changed / total > threshold
