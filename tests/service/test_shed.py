"""Backlog shedding: the rule (which derived work is shed at which backlog), discovery's
order across conversations (the oldest waiting message first), and the real scheduler
skipping the community jobs while the backlog is over the threshold and running them
once it is back under."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
from hypothesis import given
from hypothesis import strategies as st

import memory as api
from bot.service import running
from jobs import JobSettings, Scheduler
from jobs.shed import SHED_TIERS, SHEDDABLE, shed_jobs, shed_warning
from jobs.work import next_look, wanted_by
from lab.standins.slack_standin import SlackStandIn, service_settings
from memory import Backlog, ConversationRef, Memory
from tests.database.test_consolidation import messages
from tests.database.test_discovery import _marks, backlogs
from tests.service.test_serve_health import sample

OPERATOR = api.Principal.operator("test")
NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**5))
def test_more_backlog_never_sheds_less_and_never_consolidation(first: int, second: int, threshold: int) -> None:
    low, high = sorted((first, second))
    assert shed_jobs(low, threshold) <= shed_jobs(high, threshold)
    assert shed_jobs(high, threshold) <= SHEDDABLE and "consolidation" not in shed_jobs(high, threshold)


@given(st.integers(0, 10**6), st.integers(1, 10**5))
def test_communities_are_shed_first_and_only_past_the_threshold(waiting: int, threshold: int) -> None:
    shed = shed_jobs(waiting, threshold)
    communities, summary = (frozenset(tier) for tier in SHED_TIERS)
    assert (communities <= shed) == (waiting > threshold)
    assert (summary <= shed) == (waiting > 2 * threshold)
    assert not shed or communities <= shed  # nothing is shed before the communities are
    assert (shed_warning(waiting, threshold) is None) == (not shed)


@given(st.integers(0, 10**9))
def test_a_threshold_of_zero_sheds_nothing(waiting: int) -> None:
    assert shed_jobs(waiting, 0) == frozenset() and shed_warning(waiting, 0) is None


@given(backlogs(), st.sets(st.sampled_from(sorted(SHEDDABLE))))
def test_work_only_shed_jobs_want_is_looked_at_again_after_the_retry(item: Backlog, shed: set[str]) -> None:
    settings = JobSettings(consolidate_tokens=100, consolidate_idle_seconds=60, consolidate_max_wait_seconds=30)
    wanted = wanted_by(item, settings, NOW)
    look = next_look(item, settings, NOW, frozenset(shed))
    if wanted - shed:
        assert look == NOW  # a job not shed wants it: now, as without shedding
    elif wanted:
        assert look is not None and NOW < look <= NOW + timedelta(seconds=settings.shed_retry_seconds)
    else:
        assert look == next_look(item, settings, NOW)  # shedding changes nothing it does not want


async def test_discovery_reads_the_oldest_waiting_message_first_across_conversations(memory: Memory) -> None:
    """A busy conversation's mark is renewed by every message; its oldest waiting message
    still puts it first when discovery reads only part of what is due."""
    refs = [ConversationRef("shed-order", "w", f"c{i}") for i in range(3)]
    for i, ref in enumerate(refs):
        await api.ingest(memory, ref, messages([(f"o{i}", "Ann", f"Message {i} about Quito.")]), principal=OPERATOR)
    await api.ingest(memory, refs[0], messages([("o9", "Ann", "Another one about Lima.")], start=5), principal=OPERATOR)
    ids = [await api.resolve_conversation(memory, ref, principal=OPERATOR) for ref in refs]
    due = [
        b.conversation_id for b in await api.due_backlog(memory, principal=OPERATOR, limit=100_000) if b.conversation_id in ids
    ]
    assert due == ids  # the first conversation, written last, waited longest
    found = await api.due_backlog(memory, principal=OPERATOR, limit=100_000)
    waited = [b.oldest_unconsolidated or b.due_at for b in found]  # a message's wait, else the mark's
    assert waited == sorted(waited)  # what a limit cuts off waited least
    for ref in refs:
        await api.consolidate(memory, ref, principal=OPERATOR)


async def test_the_scheduler_sheds_communities_over_the_threshold_and_resumes_under_it(memory: Memory) -> None:
    topic = ConversationRef("shed", "w", f"topic-{datetime.now(UTC).timestamp()}")
    busy = ConversationRef("shed", "w", f"busy-{datetime.now(UTC).timestamp()}")
    rows = [("t1", "Ann", "Ann and Bob went to Quito."), ("t2", "Bob", "Bob and Ann love Quito.")]
    await api.ingest(memory, topic, messages(rows), principal=OPERATOR)
    await api.consolidate(memory, topic, principal=OPERATOR)  # its graph changed: communities are due
    cid = await api.resolve_conversation(memory, topic, principal=OPERATOR)
    baseline = (await api.waiting_backlog(memory, principal=OPERATOR)).messages
    burst = [(f"b{i}", "Cy", f"Burst message {i} about the launch.") for i in range(5)]
    await api.ingest(memory, busy, messages(burst), principal=OPERATOR)
    assert (await api.waiting_backlog(memory, principal=OPERATOR)).messages == baseline + 5
    settings = JobSettings(
        consolidate_tokens=10**6,
        consolidate_idle_seconds=3600,
        consolidate_max_wait_seconds=3600,
        interval_seconds=3600,
        shed_messages=baseline + 3,
        shed_retry_seconds=3.0,
    )
    scheduler = Scheduler(memory, settings, only=frozenset({cid}))

    before = datetime.now(UTC)
    assert await scheduler.run_once() == []  # over the threshold: the communities wait
    assert await api.list_communities(memory, topic, principal=OPERATOR) == []
    marks = await _marks(memory, cid)
    assert all(mark is not None and mark >= before + timedelta(seconds=3) for mark in marks)  # deferred, not read each tick

    await api.consolidate(memory, busy, principal=OPERATOR)  # consolidation catches up: under again
    await asyncio.sleep(max(0.0, (max(m for m in marks if m) - datetime.now(UTC)).total_seconds()) + 0.2)  # the retry
    results = {r.job: r for r in await scheduler.run_once()}
    assert results["communities"].status == "ok" and results["communities"].result["rebuilt"] is True
    assert results["community_regeneration"].result["regenerated"] >= 1
    listed = await api.list_communities(memory, topic, principal=OPERATOR)
    assert listed and all(c["summary"] and not c["dirty"] for c in listed)


async def test_healthz_says_degraded_while_shedding_and_stays_healthy(memory: Memory, slack: SlackStandIn) -> None:
    busy = ConversationRef("shed", "w", f"health-{datetime.now(UTC).timestamp()}")
    baseline = (await api.waiting_backlog(memory, principal=OPERATOR)).messages
    served_settings = service_settings(slack)
    settings = served_settings.model_copy(
        update={"jobs": served_settings.jobs.model_copy(update={"shed_messages": baseline + 3})}
    )
    async with running(memory, settings, "127.0.0.1", 0) as served:
        burst = [(f"h{i}", "Cy", f"Burst message {i} about the launch.") for i in range(5)]
        await api.ingest(memory, busy, messages(burst), principal=OPERATOR)
        status, health = await _get(served.port, "/healthz")
        assert status == 200 and health["ok"] is True and health["status"] == "degraded"
        assert health["consolidation"]["waiting_messages"] == baseline + 5
        assert health["consolidation"]["shedding"] == ["communities", "community_regeneration"]
        [warning] = health["warnings"]
        assert f"{baseline + 5} messages waiting" in warning and "STASHBIRD_BACKLOG_SHED_MESSAGES" in warning
        metrics = (await _get(served.port, "/metrics"))[1]
        assert sample(metrics, "stashbird_backlog_shedding", job="communities") == 1
        assert sample(metrics, "stashbird_backlog_shedding", job="summary") == 0
        assert sample(metrics, "stashbird_consolidation_backlog_messages") == baseline + 5

        await api.consolidate(memory, busy, principal=OPERATOR)
        status, health = await _get(served.port, "/healthz")
        assert status == 200 and health["status"] == "ok" and health["warnings"] == []
        assert health["consolidation"]["shedding"] == []
        metrics = (await _get(served.port, "/metrics"))[1]
        assert sample(metrics, "stashbird_backlog_shedding", job="communities") == 0


async def _get(port: int, path: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}{path}") as response:
            return response.status, await (response.json() if path == "/healthz" else response.text())
