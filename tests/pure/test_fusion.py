"""Reciprocal rank fusion math and the preferences applied to fused scores (pure)."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.retrieval.fusion import (
    IN_RANGE_WEIGHT,
    NAMED_SPEAKER_WEIGHT,
    STATES_TIME_WEIGHT,
    SUPERSEDED_WEIGHT,
    preference_weight,
    ranked,
    reciprocal_rank_fusion,
    spread_to_neighbours,
)
from memory.retrieval.llm_steps import (
    apply_scores,
    clean_sub_queries,
    needs_decomposition,
)
from memory.retrieval.pipeline import named_speaker, named_speakers, without_names
from memory.retrieval.search import Candidate
from memory.retrieval.search_plan import (
    VectorPlan,
    choose_plan,
    estimate_size,
    rare_terms,
    term_weight,
    tsquery_text,
    vector_statements,
)
from memory.retrieval.search_sql import planned_scans
from memory.store.documents import KINDS


def test_rrf_scores_are_sums_of_reciprocal_ranks() -> None:
    scores = reciprocal_rank_fusion([["a", "b", "c"], ["b", "a"], ["c"]], k=60)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert ranked(scores, tie_break=str) == ["a", "b", "c"]  # a, b tie; c is lower


def test_rrf_counts_a_repeated_key_once_per_list() -> None:
    assert reciprocal_rank_fusion([["a", "a", "b"]], k=1) == {"a": 0.5, "b": pytest.approx(1 / 4)}


@given(st.lists(st.lists(st.integers(0, 20), max_size=15, unique=True), max_size=6), st.integers(1, 100))
def test_agreement_never_hurts(lists: list[list[int]], k: int) -> None:
    """Adding a list can only raise scores, and a key at rank 1 everywhere is best."""
    base = reciprocal_rank_fusion(lists, k)
    more = reciprocal_rank_fusion(lists + [[99] + sorted(base)], k)
    assert all(more[key] >= base[key] for key in base)
    top = reciprocal_rank_fusion([[7] + ranked for ranked in lists] + [[7]], k)
    assert max(top, key=top.get) == 7


def test_preferences() -> None:
    assert preference_weight(is_current=False, in_time_range=False, prefer_current=True) == SUPERSEDED_WEIGHT
    assert preference_weight(is_current=False, in_time_range=False, prefer_current=False) == 1.0
    assert preference_weight(is_current=True, in_time_range=True, prefer_current=True) == IN_RANGE_WEIGHT
    both = preference_weight(is_current=True, in_time_range=False, prefer_current=True, answers_when=True, by_named_speaker=True)
    assert both == STATES_TIME_WEIGHT * NAMED_SPEAKER_WEIGHT > 1


def test_named_speaker() -> None:
    speakers = ["Caroline", "Melanie Smith", "Jo"]
    assert named_speaker("What did Caroline research?", speakers) == "Caroline"
    assert named_speaker("where is melanie's house?", speakers) == "Melanie Smith"
    # A capitalised question names people as they are capitalised: a common word is no name.
    assert named_speaker("What is the launch code name?", ["Name U1", "Will"]) is None
    assert named_speaker("Is Name U1 coming, and will it rain?", ["Name U1", "Will"]) == "Name U1"
    assert named_speaker("Where did Ann go hiking?", ["ann", "bob"]) == "ann"
    assert named_speaker("What do Caroline and Melanie both like?", speakers) is None
    assert named_speaker("What did Joanna say?", speakers) is None
    assert named_speakers("What do Caroline and Melanie both like?", speakers) == ["Caroline", "Melanie Smith"]


_NAMES = st.sampled_from(["Ann", "Bob", "Caroline", "Melanie Smith", "Jon", "Gina"])


@given(
    st.lists(_NAMES, min_size=1, max_size=3, unique=True),
    st.lists(st.sampled_from(["what", "do", "both", "like", "play", "and", "'s", "?", "kids"]), max_size=8),
    st.randoms(),
)
def test_a_question_without_its_names_asks_the_same_of_no_one(names: list[str], words: list[str], rng: random.Random) -> None:
    """Every named speaker is found; the name-free question names none of them and
    keeps every other word in order; a question of names alone is kept whole."""
    parts = words + [name + ("'s" if rng.random() < 0.3 else "") for name in names]
    rng.shuffle(parts)
    question = " ".join(parts)
    speakers = ["Ann", "Bob", "Caroline", "Melanie Smith", "Jon", "Gina", "Omar"]
    assert set(named_speakers(question, speakers)) == set(names)
    rest = without_names(question, names)
    if rest == question:
        assert not [w for w in words if w not in ("'s", "?")]
    else:
        assert named_speakers(rest, speakers) == []
        assert rest.split() == words_of(parts, names)
    assert without_names(question, []) == question


def words_of(parts: list[str], names: list[str]) -> list[str]:
    forms = {n for name in names for n in (name, name + "'s")}
    return [p for p in parts if p not in forms]


def _candidate(ref_id: int) -> Candidate:
    return Candidate("episode", ref_id, f"t{ref_id}", datetime(2024, 1, 1, tzinfo=timezone.utc), True, 1.0 / ref_id, 0.5, 0.1)


def test_rerank_scores_reorder_and_keep_the_best() -> None:
    candidates = [_candidate(i) for i in (1, 2, 3, 4)]
    kept = apply_scores(candidates, {3: 9.0, 1: 2.0, 4: 2.0}, keep=3)
    assert [c.ref_id for c in kept] == [3, 1, 4]


def test_sub_queries_are_cleaned_and_bounded() -> None:
    assert clean_sub_queries("Q?", ["q?", " a  b ", "a b", "", "c", "d", "e"], 3) == ["a b", "c", "d"]


def test_when_to_decompose() -> None:
    now = datetime(2023, 7, 12, tzinfo=timezone.utc)
    assert needs_decomposition("What do Caroline and Melanie both like?", now)
    assert needs_decomposition("What did Ann do last week?", now)
    assert not needs_decomposition("What did Caroline research?", now)


def test_common_terms_are_left_out_unless_nothing_else_is_left() -> None:
    assert rare_terms({"caroline": 0.5, "research": 0.01, "adopt": 0.1}) == ["adopt", "research"]
    assert rare_terms({"caroline": 0.5, "melani": 0.45}) == ["caroline", "melani"]
    # In a large conversation the rarest terms are kept while their matches stay bounded.
    shares = {"lgbtq": 0.004, "group": 0.02, "support": 0.05}
    assert rare_terms(shares, messages=1_000) == ["group", "lgbtq", "support"]
    assert rare_terms(shares, messages=100_000, match_rows=2_000) == ["lgbtq"]
    assert rare_terms({"go": 0.09}, messages=100_000, match_rows=2_000) == ["go"]
    assert tsquery_text(["ann", "or", "cut-ov", "o'neil", "a\\b"]) == "'ann' | 'or' | 'cut-ov' | 'o''neil' | 'a\\\\b'"


def test_rarer_terms_weigh_more() -> None:
    assert term_weight(0.01, 1_000) > term_weight(0.1, 1_000) > term_weight(0.5, 1_000) > 0
    assert term_weight(0.0, 16) > term_weight(6 / 16, 16)


def test_vector_plan() -> None:
    assert choose_plan({"episode": 500, "entity": 0}, 10_000, 60).exact == ("episode",)
    big = choose_plan({"episode": 100_000, "relation": 30_000}, 140_000, 60, shared=True)
    assert big.hnsw == ("episode", "relation") and big.ef_search == 560  # 2 x 60 / (30K / 140K)
    assert estimate_size(500, 90_000.0) == 500  # below the cap the count is exact
    assert estimate_size(20_000, 94_050.0) == 94_050
    assert estimate_size(20_000, 12_000.0) == 20_000  # never below the count
    assert estimate_size(20_000, None) == 20_000
    tiny_share = choose_plan({"episode": 25_000}, 10_000_000, 60, shared=True)
    assert tiny_share.exact == ("episode",) and not tiny_share.hnsw
    # The conversation's own index: share 1, whatever the store holds.
    own = choose_plan({"episode": 25_000, "entity": 300}, 10_000_000, 60, frozenset({"episode"}))
    assert own.hnsw == ("episode",) and own.exact == ("entity",) and own.ef_search == 120
    assert choose_plan({"episode": 900}, 10_000_000, 60, frozenset({"episode"})).hnsw == ("episode",)
    # Without the shared index (one server) a large kind with no index of its own is
    # scanned exactly, however large its share.
    alone = choose_plan({"episode": 100_000, "relation": 30_000}, 140_000, 60, frozenset({"relation"}))
    assert alone.exact == ("episode",) and alone.hnsw == ("relation",) and alone.ef_search == 120


@given(st.sets(st.sampled_from(KINDS)), st.sets(st.sampled_from(KINDS)), st.booleans())
def test_two_connections_run_every_vector_statement_once(exact: set[str], hnsw: set[str], two: bool) -> None:
    """Split or not, the two connections' statements are the plan's, each once; only a
    plan with both HNSW and exact kinds is split, the exact scans going second."""
    plan = VectorPlan(tuple(sorted(exact)), tuple(sorted(hnsw - exact)), 120)
    first, second = vector_statements(plan, two)
    assert sorted(first + second) == sorted(vector_statements(plan, False)[0])
    assert vector_statements(plan, False)[1] == []
    assert second == ([(plan.exact, True)] if two and plan.exact and plan.hnsw else [])


def test_neighbours_gain_a_share_of_the_best_found_neighbour() -> None:
    scores = {"a": 1.0, "b": 0.2, "x": 0.5}
    neighbours = {"a": ["b", "c"], "x": ["c"], "gone": ["a"]}
    spread = spread_to_neighbours(scores, neighbours, 0.25)
    assert spread["a"] == 1.0  # "gone" has no score: it lends nothing
    assert spread["b"] == pytest.approx(0.2 + 0.25)
    assert spread["c"] == pytest.approx(0.25)  # the better of a and x, not their sum
    assert spread["x"] == 0.5
    assert spread_to_neighbours(scores, neighbours, 0.0) == {**scores, "b": 0.2, "c": 0.0}


def test_planned_scans_finds_each_shards_scan_at_any_depth() -> None:
    postgres = [{"Plan": {"Node Type": "Index Only Scan", "Relation Name": "search_documents", "Plan Rows": 94050}}]
    # Citus: the worker's plan of the conversation's shard, nested in the coordinator's
    citus = [
        {
            "Plan": {
                "Node Type": "Custom Scan",
                "Plan Rows": 100000,
                "Distributed Query": {
                    "Job": {
                        "Task Count": 1,
                        "Tasks": [
                            {
                                "Node": "host=w1 port=5432",
                                "Remote Plan": [
                                    [
                                        {
                                            "Plan": {
                                                "Node Type": "Bitmap Heap Scan",
                                                "Relation Name": "search_documents_102008",
                                                "Plan Rows": 812,
                                                "Plans": [
                                                    {"Node Type": "Bitmap Index Scan", "Index Name": "x", "Plan Rows": 812}
                                                ],
                                            }
                                        }
                                    ]
                                ],
                            }
                        ],
                    }
                },
            }
        }
    ]
    assert planned_scans(postgres) == {"search_documents": 94_050}
    # One server: the conversation's partition (migration 0024), under an Append when
    # the plan keeps more than one.
    scans = [{"Relation Name": f"search_documents_p{i}", "Plan Rows": i} for i in (3, 12)]
    partitions = [{"Plan": {"Node Type": "Append", "Plans": scans}}]
    assert planned_scans(partitions) == {"search_documents_p3": 3, "search_documents_p12": 12}
    assert planned_scans(citus) == {"search_documents_102008": 812}
    # With every task shown (citus.explain_all_tasks), one scan per shard.
    tasks = citus[0]["Plan"]["Distributed Query"]["Job"]["Tasks"]
    other = json.loads(json.dumps(tasks[0]).replace("102008", "102009").replace("812", "40"))
    tasks.append(other)
    assert planned_scans(citus) == {"search_documents_102008": 812, "search_documents_102009": 40}
    assert planned_scans([{"Plan": {"Node Type": "Result", "Plan Rows": 1}}]) == {}
    assert planned_scans([{"Plan": {"Relation Name": "search_documents_log", "Plan Rows": 3}}]) == {}
    assert planned_scans([{"Plan": {"Relation Name": "search_documents_px", "Plan Rows": 3}}]) == {}
