"""The reconciliation rules as pure functions: examples and hypothesis properties."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.consolidation.chunking import cut_chunks, within
from memory.consolidation.rolling_context import (
    context_size,
    entry,
    fit_context,
    merge_context,
    one_per_entity,
)
from memory.graph.reconcile import (
    EntityCandidate,
    NewFact,
    RelationBook,
    apply_relation,
    entity_decision,
    name_ratio,
    normalize_name,
    normalize_predicate,
    numbers_differ,
)
from memory.params import MemoryParams

PARAMS = MemoryParams()

facts = st.builds(
    NewFact,
    subject_id=st.sampled_from([1, 2]),
    object_id=st.sampled_from([10, 11, 12]),
    predicate=st.sampled_from(["lives_in", "moved_to", "likes", "visited", "works at"]),
    fact=st.sampled_from(
        ["Ann lives in Boston", "Ann lives in Boston.", "Ann likes tea", "Bob visited Rome last May", "Ann moved"]
    ),
    episodes=st.frozensets(st.integers(1, 30), min_size=1, max_size=3),
    decision=st.sampled_from([None, "new", "duplicate", "contradiction"]),
)


def meaning(r) -> tuple:
    return (r.subject_id, r.object_id, normalize_predicate(r.predicate), normalize_name(r.fact))


@settings(max_examples=300, deadline=None)
@given(st.lists(facts, max_size=25))
def test_provenance_only_grows_and_nothing_is_lost(sequence: list[NewFact]) -> None:
    book = RelationBook()
    for fact in sequence:
        before = dict(book.relations)
        decision = apply_relation(book, fact, PARAMS)
        for relation_id, old in before.items():
            assert relation_id in book.relations
            assert book.relations[relation_id].provenance >= old.provenance
            assert not (old.status == "superseded" and book.relations[relation_id].status == "active")
        # the fact's episodes are in the relation it landed in
        landed = decision.target_id if decision.kind == "duplicate" else book.inserted[-1]
        assert fact.episodes <= book.relations[landed].provenance


@settings(max_examples=300, deadline=None)
@given(st.lists(facts, max_size=25))
def test_no_two_active_relations_with_the_same_meaning(sequence: list[NewFact]) -> None:
    book = RelationBook()
    for fact in sequence:
        apply_relation(book, fact, PARAMS)
        active = [meaning(r) for r in book.relations.values() if r.status == "active"]
        assert len(active) == len(set(active))


@settings(max_examples=300, deadline=None)
@given(st.lists(facts, max_size=25))
def test_exactly_one_active_relation_per_contradiction_chain(sequence: list[NewFact]) -> None:
    book = RelationBook()
    for fact in sequence:
        apply_relation(book, fact, PARAMS)
    relations = book.relations
    for relation in relations.values():
        chain = [relation]
        while chain[-1].superseded_by is not None:
            chain.append(relations[chain[-1].superseded_by])
            assert len(chain) <= len(relations)  # no cycles
        assert [r.status for r in chain].count("active") == 1
        assert chain[-1].status == "active"


@settings(max_examples=200, deadline=None)
@given(st.lists(facts.filter(lambda f: f.decision is None), max_size=25))
def test_offline_rules_keep_one_value_per_functional_predicate(sequence: list[NewFact]) -> None:
    book = RelationBook()
    for fact in sequence:
        apply_relation(book, fact, PARAMS)
    seen = set()
    for r in book.relations.values():
        if r.status == "active" and normalize_predicate(r.predicate) in ("lives_in", "works_at"):
            key = (r.subject_id, normalize_predicate(r.predicate))
            assert key not in seen
            seen.add(key)


def test_append_only_baseline_duplicates_and_keeps_stale_facts() -> None:
    """With reconciliation off the same fact twice is two active relations: what the
    update benchmark's checks catch."""
    book = RelationBook()
    first = NewFact(1, 10, "lives_in", "Ann lives in Boston", frozenset({1}))
    apply_relation(book, first, PARAMS, reconcile=False)
    apply_relation(book, first, PARAMS, reconcile=False)
    apply_relation(book, NewFact(1, 11, "moved_to", "Ann moved to Denver", frozenset({2})), PARAMS, reconcile=False)
    assert [r.status for r in book.relations.values()] == ["active"] * 3


def test_contradiction_supersedes_and_links() -> None:
    book = RelationBook()
    apply_relation(book, NewFact(1, 10, "lives_in", "Ann lives in Boston", frozenset({1})), PARAMS)
    decision = apply_relation(book, NewFact(1, 11, "moved to", "Ann moved to Denver", frozenset({2})), PARAMS)
    old, new = book.relations[-1], book.relations[-2]
    assert decision.kind == "contradiction" and decision.target_id == -1
    assert (old.status, old.superseded_by, new.status) == ("superseded", -2, "active")


@given(
    st.text(min_size=1, max_size=12),
    st.lists(st.tuples(st.text(min_size=1, max_size=12), st.floats(0, 1)), max_size=5),
)
def test_entity_decision_thresholds(name: str, raw: list[tuple[str, float]]) -> None:
    candidates = [EntityCandidate(i + 1, n, c) for i, (n, c) in enumerate(raw)]
    decision = entity_decision(name, candidates, PARAMS)
    scores = [(c.cosine, name_ratio(name, c.name)) for c in candidates if not numbers_differ(name, c.name)]
    if decision.kind == "merge":
        target = next(c for c in candidates if c.entity_id == decision.entity_id)
        assert target.cosine >= 0.85 and name_ratio(name, target.name) >= 0.85
    elif decision.kind == "adjudicate":
        assert not any(c >= 0.85 and r >= 0.85 for c, r in scores)
        assert all(c.cosine >= 0.75 or name_ratio(name, c.name) >= 0.75 for c in decision.candidates)
    else:
        assert all(c < 0.75 and r < 0.75 for c, r in scores)


def test_entity_examples() -> None:
    assert entity_decision("Caroline", [EntityCandidate(7, "caroline", 0.99)], PARAMS).entity_id == 7
    assert entity_decision("Mel", [EntityCandidate(7, "Melanie", 0.8)], PARAMS).kind == "adjudicate"
    assert entity_decision("Boston", [EntityCandidate(7, "pottery", 0.3)], PARAMS).kind == "new"
    assert entity_decision("28 January 2023", [EntityCandidate(7, "January 2023", 0.95)], PARAMS).kind == "new"


@given(st.lists(st.integers(1, 50), max_size=40), st.integers(20, 200), st.sampled_from([0.0, 0.1, 0.25]))
def test_chunks_cover_every_item_once_within_budget(sizes: list[int], budget: int, overlap: float) -> None:
    items = list(range(len(sizes)))
    cuts = cut_chunks(items, sizes, budget, overlap)
    assert [i for cut in cuts for i in cut.new] == items
    for cut in cuts:
        total = sum(sizes[i] for i in cut.context + cut.new)
        assert total <= budget or len(cut.new) == 1
        assert sum(sizes[i] for i in cut.context) <= budget * overlap


@given(st.lists(st.integers(1, 50), max_size=40), st.one_of(st.none(), st.integers(0, 300)))
def test_a_run_takes_the_longest_prefix_within_its_cap_and_never_nothing(sizes: list[int], budget: int | None) -> None:
    taken = within(sizes, budget)
    if budget is None:
        assert taken == len(sizes)
        return
    assert taken == len(sizes) or sum(sizes[: taken + 1]) > budget  # the next one would not fit
    assert sum(sizes[:taken]) <= budget or taken == 1  # what it takes fits, but for one oversized message
    assert (taken >= 1) == bool(sizes)


def test_rolling_context_drops_least_supported_first() -> None:
    entries = [entry(i, f"E{i}", f"entity {i} " + "word " * 30, range(i + 1)) for i in range(1, 6)]
    fitted = fit_context(entries, context_size(entries[2:]) + 5)
    assert [e["entity_id"] for e in fitted] == [3, 4, 5]
    merged = merge_context(entries, [entry(1, "E1", "new text", [99])])
    assert merged[-1]["episode_ids"] == [0, 1, 99] and merged[-1]["text"] == "new text"


@given(st.lists(st.tuples(st.integers(1, 6), st.lists(st.integers(1, 30), max_size=4)), max_size=20))
def test_one_entry_per_entity_keeps_the_latest_text_and_every_episode(items: list[tuple[int, list[int]]]) -> None:
    entries = [entry(e, f"E{e}", f"text {i}", episodes) for i, (e, episodes) in enumerate(items)]
    kept = one_per_entity(entries)
    ids = [item["entity_id"] for item in kept]
    assert len(ids) == len(set(ids)) and set(ids) == {e for e, _ in items}
    last = {e: i for i, (e, _) in enumerate(items)}
    assert [item["text"] for item in kept] == [f"text {i}" for i in sorted(last.values())]
    for item in kept:
        assert item["episode_ids"] == sorted({x for e, episodes in items if e == item["entity_id"] for x in episodes})
