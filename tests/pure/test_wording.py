"""The rendering rule of memory.graph.wording, with hypothesis properties (no database)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memory.graph.wording import (
    EntityWitness,
    FactWording,
    RelationWitness,
    render_entity,
    render_fact,
    structural_fact,
)

episode_ids = st.integers(1, 30)
relation_witnesses = st.lists(
    st.builds(
        RelationWitness,
        episode_ids,
        st.none() | st.builds(FactWording, st.sampled_from(["", "a", "b c"]), st.none(), st.frozensets(episode_ids)),
    ),
    unique_by=lambda w: w.episode_id,
    max_size=8,
)
entity_witnesses = st.lists(
    st.builds(
        EntityWitness,
        episode_ids,
        st.sampled_from(["Ann", "Annie"]),
        st.sampled_from(["person", "thing"]),
        st.sampled_from(["", "s1", "s2"]),
        st.frozensets(episode_ids),
    ),
    unique_by=lambda w: w.episode_id,
    max_size=8,
)


def shuffled(items: list, rng) -> list:
    copy = list(items)
    rng.shuffle(copy)
    return copy


@given(relation_witnesses, st.randoms())
def test_a_fact_shows_the_earliest_witness_with_wording_in_any_order(witnesses: list, rng) -> None:
    chosen = render_fact(witnesses)
    assert render_fact(shuffled(witnesses, rng)) == chosen
    worded = [w for w in witnesses if w.wording is not None and w.wording.fact]
    assert (chosen is None) == (not worded)
    if chosen is not None:
        assert chosen in witnesses and all(chosen.episode_id <= w.episode_id for w in worded)


@given(relation_witnesses, episode_ids)
def test_a_later_witness_does_not_change_what_a_fact_says(witnesses: list, offset: int) -> None:
    """Stability: a message repeating the fact later joins without rewording it."""
    chosen = render_fact(witnesses)
    later = RelationWitness(max((w.episode_id for w in witnesses), default=0) + offset, FactWording("z", None, frozenset()))
    assert render_fact([*witnesses, later]) == (chosen or later)


@given(entity_witnesses, st.randoms())
def test_an_entity_is_named_by_its_earliest_witness_and_summarised_by_its_latest(witnesses: list, rng) -> None:
    rendered = render_entity(witnesses)
    assert render_entity(shuffled(witnesses, rng)) == rendered
    assert (rendered is None) == (not witnesses)
    if rendered is None:
        return
    first = min(witnesses, key=lambda w: w.episode_id)
    assert (rendered.name, rendered.type) == (first.name, first.type)
    summarised = [w for w in witnesses if w.summary]
    if summarised:
        latest = max(summarised, key=lambda w: w.episode_id)
        assert (rendered.summary, rendered.summary_sources) == (latest.summary, latest.summary_sources)
    else:
        assert rendered.summary == "" and rendered.summary_sources == frozenset()


@given(entity_witnesses)
def test_the_deletion_path_loads_enough_witnesses_to_render(witnesses: list) -> None:
    """The two witnesses the deletion path loads (memory.forgetting.rewording), the
    earliest and the latest with a summary, render exactly what all of them would."""
    ordered = sorted(witnesses, key=lambda w: w.episode_id)
    deciding = {w.episode_id: w for w in ordered[:1] + [w for w in ordered if w.summary][-1:]}
    assert render_entity(list(deciding.values())) == render_entity(witnesses)


def test_a_fact_without_wording_is_said_from_its_structure() -> None:
    assert structural_fact("Yara", "lives_in", "Brindlemere") == "Yara lives in Brindlemere"
    assert structural_fact("Ann", "works__at ", "Acme") == "Ann works at Acme"
