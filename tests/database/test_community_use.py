"""Dirty communities are regenerated in order of use, and cold ones not until they are
used: the decayed count of uses and the cold rule (pure, and their SQL twins against the
real database), the scheduler's order across conversations, and one scenario through
the real scheduler with the scripted LLM server: two dirty communities whose stale
summaries are nowhere to be read, an answer about one of them, that one regenerated
first and alone (a cap of one per run), the other gone cold and left dirty, then an
answer that uses it, which brings it back."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select, text

import memory as api
from jobs import JobSettings, Scheduler
from jobs.work import most_used_first
from lab.probes import mark_consolidated
from lab.standins.scripted_llm import ChatRequest, ScriptedLLMServer
from memory.communities.use import BIRTH_USES, COLD_BELOW, HALF_LIFE_SECONDS, cold, decayed, decayed_sql, used, warm_sql
from memory.core import Memory
from memory.store.backlog import Backlog, read_backlog
from memory.store.conversations import ConversationRef
from memory.store.schema import Community
from tests.database.test_communities import community_documents, members, two_groups
from tests.database.test_forgetting import add_messages, entity, relation

OPERATOR = api.Principal.operator("test")
ONE_PER_RUN = JobSettings(consolidate_tokens=0, interval_seconds=3600, lease_seconds=30, regenerate_max=1)
DAY = 24 * 3600.0
scores = st.floats(min_value=0, max_value=1e6, allow_nan=False)
ages = st.floats(min_value=0, max_value=365 * DAY, allow_nan=False)


def history(gaps: list[float]) -> float:
    """The score after one use at each of these gaps (seconds since the previous use)."""
    score = 0.0
    for gap in gaps:
        score = used(score, gap)
    return score


@given(st.lists(ages, max_size=8), ages, st.lists(ages, min_size=1, max_size=4))
def test_more_uses_never_score_lower(gaps: list[float], later: float, extra: list[float]) -> None:
    base = history(gaps)
    assert used(base, later) > decayed(base, later)
    assert history([*gaps, *extra]) >= decayed(base, sum(extra)) + 1 - 1e-9


@given(scores, ages, ages)
def test_a_score_decays_with_time_and_halves_each_half_life(score: float, a: float, b: float) -> None:
    young, old = sorted((a, b))
    assert decayed(score, old) <= decayed(score, young) <= score
    assert decayed(score, young + HALF_LIFE_SECONDS) == pytest.approx(decayed(score, young) / 2)
    assert decayed(score, -a) == score  # another node's clock ahead: no growth


@given(scores, ages, scores, ages, ages)
def test_common_decay_keeps_the_order(a: float, age_a: float, b: float, age_b: float, later: float) -> None:
    """Two scores recorded at different times rank the same whenever they are compared."""
    now_a, now_b = decayed(a, age_a), decayed(b, age_b)
    then_a, then_b = decayed(a, age_a + later), decayed(b, age_b + later)
    if now_a > now_b * (1 + 1e-9):
        assert then_a >= then_b
    if now_b > now_a * (1 + 1e-9):
        assert then_b >= then_a


@given(scores, ages, ages)
def test_once_cold_a_community_stays_cold_until_it_is_used(score: float, a: float, b: float) -> None:
    young, old = sorted((a, b))
    if cold(score, young):
        assert cold(score, old)
    assert not cold(used(score, old), 0.0)  # a use warms any community at once


@given(ages)
def test_a_new_community_is_warm_for_two_half_lives(age: float) -> None:
    if age < 2 * HALF_LIFE_SECONDS * (1 - 1e-9):
        assert not cold(BIRTH_USES, age)
    if age > 2 * HALF_LIFE_SECONDS * (1 + 1e-9):
        assert cold(BIRTH_USES, age)


@given(st.lists(st.floats(min_value=0, max_value=2 * HALF_LIFE_SECONDS), min_size=1, max_size=12), st.floats(0, 1))
def test_a_topic_used_at_least_every_two_weeks_never_goes_cold(gaps: list[float], share: float) -> None:
    """Between two uses no more than two half-lives apart, the score stays warm."""
    score = history(gaps)
    assert not cold(score, share * 2 * HALF_LIFE_SECONDS * (1 - 1e-9))


@given(st.floats(min_value=math.log2(5) * HALF_LIFE_SECONDS * 1.01, max_value=365 * DAY))
def test_a_topic_used_less_often_than_every_16_days_goes_cold_between_uses(gap: float) -> None:
    """However long the run of uses ``gap`` apart, just before the next one it is cold
    (the score then tends to r / (1 - r), r = 0.5 ** (gap / half-life): under 0.25 once
    r < 1/5, gaps over log2(5) half-lives, 16.3 days)."""
    assert cold(history([gap] * 20), gap)


async def test_the_sql_rule_is_the_python_rule(memory: Memory) -> None:
    cases = [(0.0, 0.0), (1.0, 0.0), (3.0, DAY), (5.0, HALF_LIFE_SECONDS), (2.5, 40 * DAY), (7.0, -60.0), (1.0, 15 * DAY)]
    expression = decayed_sql(":score", "now() - make_interval(secs => :age)")
    async with memory._sessions() as session:
        for score, age in cases:
            got = (await session.execute(text(f"SELECT {expression}"), {"score": score, "age": age})).scalar_one()
            assert got == pytest.approx(decayed(score, age), rel=1e-6), (score, age)
            warm = (
                await session.execute(
                    text(f"SELECT {warm_sql(':score', 'now() - make_interval(secs => :age)')}"), {"score": score, "age": age}
                )
            ).scalar_one()
            assert warm == (not cold(score, age)), (score, age)
        never = (await session.execute(text(f"SELECT {decayed_sql('3.0', 'NULL::timestamptz')}"))).scalar_one()
        assert never == 0 < COLD_BELOW


def test_regeneration_takes_the_most_used_conversation_first_then_the_longest_dirty() -> None:
    ref = ConversationRef("slack", "T", "C")
    t = datetime(2026, 1, 1, tzinfo=UTC)

    def item(cid: int, use: float, since: datetime | None) -> Backlog:
        return Backlog(cid, ref, 0, 0, None, None, 1, False, False, dirty_use=use, dirty_since=since)

    found = [item(1, 0.0, t), item(2, 2.5, t + timedelta(hours=1)), item(3, 2.5, t), item(4, 0.0, t - timedelta(days=1))]
    assert [b.conversation_id for b in sorted(found, key=most_used_first)] == [3, 2, 4, 1]


async def test_used_communities_come_back_first_a_cold_one_waits_for_an_answer_and_none_stale_is_served(
    memory: Memory,
    llm_memory: Memory,
    scripted_llm: ScriptedLLMServer,
    conversation_ref: ConversationRef,
    conversation_id: int,
) -> None:
    cid = conversation_id
    ids = await two_groups(memory, cid, "qz" + uuid.uuid4().hex[:8])
    await api.build_communities(memory, conversation_ref, principal=OPERATOR)  # both summarised
    groups = await members(memory, cid)
    sailing = next(c for c, m in groups.items() if ids["cat"] in m)
    cooking = next(c for c, m in groups.items() if ids["ann"] in m)
    # The answer will be about the community regenerated last in id order.
    used_one, questions = max(sailing, cooking), {sailing: "Who sails with Dan?", cooking: "Who cooks with Bob?"}
    old_summaries = {c["id"]: c["summary"] for c in await api.list_communities(memory, conversation_ref, principal=OPERATOR)}
    assert all(old_summaries.values())

    # A newcomer joins each: both dirty, their rows still hold the old summaries.
    m5, m6 = await add_messages(memory, cid, ["Gus sails too", "Hal bakes"], prefix="n")
    async with memory._sessions.begin() as session:
        await relation(session, cid, await entity(session, cid, "Gus", [m5]), ids["dan"], "Gus sails with Dan", [m5])
        await relation(session, cid, await entity(session, cid, "Hal", [m6]), ids["bob"], "Hal bakes with Bob", [m6])
    report = await api.update_communities(memory, conversation_ref, principal=OPERATOR, rebuild_share=1.0)
    assert report.joined == 2 and not report.rebuilt

    listed = await api.list_communities(memory, conversation_ref, principal=OPERATOR)
    assert [(c["dirty"], c["label"], c["summary"]) for c in listed] == [(True, "", "")] * 2
    assert await community_documents(memory, cid) == {}
    overview = await api.overview(memory, conversation_ref, principal=OPERATOR)
    assert [(c.dirty, c.label) for c in overview.communities] == [(True, "")] * 2
    answer = await api.ask(memory, conversation_ref, questions[used_one], principal=OPERATOR, k=2)
    assert all(item.kind != "community" for item in answer.evidence)
    assert not any(summary in answer.answer for summary in old_summaries.values())
    explained = await api.explain(memory, conversation_ref, answer.trace_id, principal=OPERATOR)
    assert all(e.kind != "community" for e in explained.evidence)

    other = sailing + cooking - used_one
    async with memory._sessions() as session:
        rows = await session.execute(select(Community.id, Community.used_score).where(Community.conversation_id == cid))
        use = dict(rows.all())
        (backlog,) = await read_backlog(session, cid)
    assert use[used_one] == pytest.approx(BIRTH_USES + 1, rel=1e-3) and use[other] == BIRTH_USES  # made with one use each
    assert (backlog.dirty_communities, backlog.warm_communities) == (2, 2)
    assert backlog.dirty_use == pytest.approx(BIRTH_USES + 1, rel=1e-3)

    def summary(request: ChatRequest) -> dict[str, str]:
        return {"name": "Sailors" if "Dan" in request.user else "Cooks", "summary": "They meet."}

    scripted_llm.on("summarize_community", summary)
    await mark_consolidated(memory, conversation_ref)  # nothing else for the scheduler to want here
    scheduler = Scheduler(llm_memory, ONE_PER_RUN, only=frozenset({cid}))
    (run,) = await scheduler.run_job("community_regeneration")
    assert run.status == "ok" and run.result["regenerated"] == 1  # the cap: one per run, the most used
    (prompt,) = [r.user for r in scripted_llm.chat_requests("summarize_community")]
    assert ("Eve" in prompt) == (used_one == sailing) and ("Ann" in prompt) == (used_one == cooking)
    listed = {c["id"]: c for c in await api.list_communities(memory, conversation_ref, principal=OPERATOR)}
    assert (listed[used_one]["dirty"], listed[used_one]["summary"]) == (False, "They meet.")

    # A month passes and nobody asks about the other one: cold, it is left dirty and hidden.
    async with memory._sessions.begin() as session:
        await session.execute(
            text("UPDATE communities SET used_at = :at WHERE conversation_id = :c AND id = :id"),  # a bound time: Citus
            {"c": cid, "id": other, "at": datetime.now(UTC) - timedelta(days=30)},
        )
    assert await scheduler.run_job("community_regeneration") == []
    async with memory._sessions() as session:
        (backlog,) = await read_backlog(session, cid)
    assert (backlog.dirty_communities, backlog.warm_communities, backlog.due_at) == (1, 0, None)  # set aside
    listed = {c["id"]: c for c in await api.list_communities(memory, conversation_ref, principal=OPERATOR)}
    assert (listed[other]["dirty"], listed[other]["label"], listed[other]["summary"]) == (True, "", "")
    overview = await api.overview(memory, conversation_ref, principal=OPERATOR)
    assert {c.id: (c.dirty, c.label) for c in overview.communities}[other] == (True, "")
    assert (await api.stats(memory, conversation_ref, principal=OPERATOR)).communities_dirty == 1

    # An answer that uses it warms it and marks the conversation due: the next run brings it back.
    answer = await api.ask(memory, conversation_ref, questions[other], principal=OPERATOR, k=2)
    assert all(item.kind != "community" for item in answer.evidence)
    async with memory._sessions() as session:
        (backlog,) = await read_backlog(session, cid)
    assert backlog.warm_communities == 1 and backlog.due_at is not None
    (run,) = await scheduler.run_job("community_regeneration")
    assert run.status == "ok" and run.result["regenerated"] == 1
    listed = {c["id"]: c for c in await api.list_communities(memory, conversation_ref, principal=OPERATOR)}
    assert all(not c["dirty"] and c["summary"] == "They meet." for c in listed.values())
