"""The scheduler in one process against the real database: explicit APScheduler options
and what they do (coalesce, misfire grace, max instances), claims and leases, run-once
from new messages to regenerated communities, failures, graceful shutdown."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

import memory as api
from jobs import Job, JobSettings, Scheduler, WorkItem, claims
from lab.standins import scripted_memory
from lab.standins.scripted_llm import ScriptedLLMServer
from memory.core import Memory
from memory.store.conversations import ConversationRef
from tests.database.test_consolidation import messages

OPERATOR = api.Principal.operator("test")
NOW = JobSettings(consolidate_tokens=0, interval_seconds=3600, lease_seconds=30)


async def run_rows(memory: Memory, cid: int, job: str) -> list[tuple[str, str, dict[str, Any]]]:
    async with memory._engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT owner, status, result FROM job_runs WHERE conversation_id = :c AND job = :j ORDER BY id"),
            {"c": cid, "j": job},
        )
        return [tuple(row) for row in rows]  # type: ignore[misc]


async def test_default_jobs_carry_their_options_explicitly(memory: Memory) -> None:
    settings = JobSettings(interval_seconds=3600, misfire_grace_seconds=17)
    scheduler = Scheduler(memory, settings, only=frozenset())
    scheduler.start()
    try:
        assert scheduler._aps is not None
        for name in ("consolidation", "communities", "community_regeneration", "summary"):
            job = scheduler._aps.get_job(name)
            assert (job.coalesce, job.max_instances, job.misfire_grace_time) == (True, 1, 17)
            assert job.trigger.interval == timedelta(seconds=3600)
    finally:
        await scheduler.shutdown()


async def test_coalesce_misfire_grace_and_max_instances_behave_as_set(memory: Memory) -> None:
    fired: dict[str, int] = {}

    def counting(name: str, pause: float = 0.0) -> Job:
        async def due(_: Memory) -> list[WorkItem]:
            fired[name] = fired.get(name, 0) + 1
            await asyncio.sleep(pause)
            return []

        async def work(_: Memory, __: WorkItem) -> dict[str, Any]:
            return {}

        options = {
            "coalesced": dict(coalesce=True, misfire_grace_time=60, max_instances=3),
            "each": dict(coalesce=False, misfire_grace_time=1000, max_instances=3),
            "too_late": dict(coalesce=True, misfire_grace_time=10, max_instances=3),
            "late_ones_dropped": dict(coalesce=False, misfire_grace_time=60, max_instances=3),
            "one_at_a_time": dict(coalesce=False, misfire_grace_time=1000, max_instances=1),
        }[name]
        return Job(name, due, work, 100, **options)  # type: ignore[arg-type]

    scheduler = Scheduler(memory, JobSettings(), jobs=[])
    missed = datetime.now(UTC) - timedelta(seconds=250)  # due at -250 s, -150 s and -50 s
    for name in ("coalesced", "each", "too_late", "late_ones_dropped"):
        scheduler.register(counting(name), first_run=missed)
    scheduler.register(counting("one_at_a_time", pause=1.0), first_run=missed)
    scheduler.start()
    try:
        await asyncio.sleep(0.6)
    finally:
        await scheduler.shutdown()
    assert fired == {"coalesced": 1, "each": 3, "late_ones_dropped": 1, "one_at_a_time": 1}  # too_late: 50 s > 10 s


async def test_a_lease_keeps_others_out_until_it_expires(memory: Memory, conversation_id: int) -> None:
    cid = conversation_id
    first = await claims.claim(memory, cid, "test", "A", 0.3)
    assert first is not None
    assert await claims.claim(memory, cid, "test", "B", 0.3) is None
    await asyncio.sleep(0.5)  # A died: its lease runs out
    second = await claims.claim(memory, cid, "test", "B", 30)
    assert second is not None
    assert not await claims.renew(memory, first, 30)
    await claims.release(memory, first, "ok", {})  # A's late release frees nothing
    assert await claims.claim(memory, cid, "test", "C", 30) is None
    assert [status for _, status, _ in await run_rows(memory, cid, "test")] == ["ok", "running"]
    await claims.release(memory, second, "ok", {"n": 1})
    assert await claims.claim(memory, cid, "test", "C", 30) is not None


async def test_the_status_calls_a_run_abandoned_once_its_owner_holds_no_live_lease(memory: Memory, conversation_id: int) -> None:
    """A process killed after its item's work committed leaves its run ``running`` and
    nothing due, so no later claim marks it: the status reads the lease instead."""
    cid = conversation_id

    async def reported(job: str) -> str:
        return (await api.last_runs(memory, [cid], principal=OPERATOR))[(cid, job)].status

    alive = await claims.claim(memory, cid, "alive", "A", 30)
    dying = await claims.claim(memory, cid, "dying", "A", 0.3)
    assert alive is not None and dying is not None
    assert await reported("alive") == "running" and await reported("dying") == "running"
    await asyncio.sleep(0.5)  # A died: its lease on "dying" runs out, and nothing claims it again
    assert await reported("dying") == "abandoned" and await reported("alive") == "running"
    assert [status for _, status, _ in await run_rows(memory, cid, "dying")] == ["running"]  # the log is left as written
    await claims.release(memory, alive, "ok", {})
    assert await reported("alive") == "ok"
    taken = await claims.claim(memory, cid, "dying", "B", 30)
    assert taken is not None and await reported("dying") == "running"  # B's run, live
    assert [status for _, status, _ in await run_rows(memory, cid, "dying")] == ["abandoned", "running"]


async def test_run_once_takes_new_messages_to_summarised_communities_and_skips_held_items(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    rows = [("w1", "Ann", "Ann and Bob went to Quito."), ("w2", "Bob", "Bob and Ann love Quito.")]
    await api.ingest(memory, conversation_ref, messages(rows), principal=OPERATOR)
    scheduler = Scheduler(memory, NOW, only=frozenset({conversation_id}))
    other = await claims.claim(memory, conversation_id, "consolidation", "other process", 30)
    assert other is not None
    assert [(r.job, r.status) for r in await scheduler.run_once()] == [("consolidation", "skipped")]
    assert await api.pending(memory, conversation_ref, principal=OPERATOR) == 2
    await claims.release(memory, other, "ok", {})

    results = {r.job: r for r in await scheduler.run_once()}
    assert results["consolidation"].status == "ok" and results["consolidation"].result["episodes"] == 2
    assert results["communities"].result["rebuilt"] is True
    assert results["community_regeneration"].result["regenerated"] >= 1
    listed = await api.list_communities(memory, conversation_ref, principal=OPERATOR)
    assert listed and all(not c["dirty"] and c["summary"] for c in listed)
    assert await scheduler.run_once() == []  # nothing left to do


async def test_a_failed_run_is_logged_and_retried_next_pass(
    llm_memory: Memory, scripted_llm: ScriptedLLMServer, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    scripted_llm.on("extract", scripted_memory.extract)
    await api.ingest(llm_memory, conversation_ref, messages([("f1", "Ann", "I moved to Quito.")]), principal=OPERATOR)
    scripted_llm.fail_next(1000, status=500, operation="extract")
    scheduler = Scheduler(llm_memory, NOW, only=frozenset({conversation_id}))
    (failed,) = await scheduler.run_job("consolidation")
    assert failed.status == "failed" and "LLMError" in failed.result["error"]
    scripted_llm.clear()
    (done,) = await scheduler.run_job("consolidation")
    assert done.status == "ok" and done.result["episodes"] == 1
    assert [status for _, status, _ in await run_rows(llm_memory, conversation_id, "consolidation")] == ["failed", "ok"]


async def test_shutdown_releases_an_unfinished_item_at_once(memory: Memory, conversation_id: int) -> None:
    started = asyncio.Event()

    async def due(_: Memory) -> list[WorkItem]:
        return [WorkItem(conversation_id)]

    async def slow(_: Memory, __: WorkItem) -> dict[str, Any]:
        started.set()
        await asyncio.sleep(60)
        return {}

    scheduler = Scheduler(memory, JobSettings(shutdown_grace=0.2), jobs=[Job("slow", due, slow, 3600)])
    scheduler.start()
    await asyncio.wait_for(started.wait(), 10)
    assert await claims.claim(memory, conversation_id, "slow", "other", 30) is None
    await scheduler.shutdown()
    (row,) = await run_rows(memory, conversation_id, "slow")
    assert row[1:] == ("released", {"reason": "shut down"})
    assert await claims.claim(memory, conversation_id, "slow", "other", 30) is not None  # no lease to wait out


async def test_the_summary_job_rebuilds_a_running_summary_a_deletion_left_dirty(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    from memory.store.schema import Checkpoint

    rows = [("s1", "Ann", "Ann moved to Quito."), ("s2", "Bob", "Bob stays in Lima.")]
    await api.ingest(memory, conversation_ref, messages(rows), principal=OPERATOR)
    await api.consolidate(memory, conversation_ref, principal=OPERATOR)
    async with memory._sessions.begin() as session:  # as a deletion whose own rebuild did not finish leaves it
        checkpoint = await session.get(Checkpoint, conversation_id)
        assert checkpoint is not None
        checkpoint.summary, checkpoint.summary_episode_ids, checkpoint.summary_dirty = "", [], True
    scheduler = Scheduler(memory, NOW, only=frozenset({conversation_id}))
    (result,) = await scheduler.run_job("summary")
    assert result.status == "ok" and result.result == {"rebuilt": True}
    async with memory._sessions() as session:
        checkpoint = await session.get(Checkpoint, conversation_id)
        assert checkpoint is not None and not checkpoint.summary_dirty and "Quito" in checkpoint.summary
    assert await scheduler.run_job("summary") == []


def test_consolidation_is_due_on_tokens_quiet_or_a_long_wait() -> None:
    from jobs.work import consolidation_due
    from memory import Backlog

    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    settings = JobSettings(consolidate_tokens=100, consolidate_idle_seconds=60, consolidate_max_wait_seconds=30)

    def waiting(messages: int, tokens: int, oldest: float, newest: float) -> Backlog:
        ages = (now - timedelta(seconds=oldest), now - timedelta(seconds=newest)) if messages else (None, None)
        return Backlog(1, ConversationRef("t", "", "c"), messages, tokens, *ages, 0, False, False)

    due = consolidation_due(settings, now)
    assert not due(waiting(0, 0, 0, 0))
    assert due(waiting(5, 100, 1, 0))  # enough text
    assert due(waiting(5, 10, 20, 60))  # quiet
    assert due(waiting(5, 10, 30, 1))  # a trickle: the oldest waited long enough
    assert not due(waiting(5, 10, 29, 1))


def test_communities_wait_while_the_conversation_s_consolidation_is_due() -> None:
    from jobs.work import communities_due
    from memory import Backlog

    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    settings = JobSettings(consolidate_tokens=100, consolidate_idle_seconds=60, consolidate_max_wait_seconds=30)

    def state(changed: bool, tokens: int) -> Backlog:
        ages = (now - timedelta(seconds=5), now - timedelta(seconds=1)) if tokens else (None, None)
        return Backlog(1, ConversationRef("t", "", "c"), 1 if tokens else 0, tokens, *ages, 0, False, changed)

    due = communities_due(settings, now)
    assert due(state(True, 0))  # caught up: its graph changed
    assert due(state(True, 10))  # a little waits, not due yet: the pass need not wait for it
    assert not due(state(True, 100))  # a run is due: it would change the graph again
    assert not due(state(False, 0))


async def test_a_pass_asks_due_again_after_each_item_and_tries_each_item_once(memory: Memory) -> None:
    """The order is the order ``due`` gives at each step, an item no longer due is not
    run from a stale list, one that became due meanwhile is, and none runs twice a pass."""
    waiting = [3, 1, 2]
    done: list[int] = []

    async def due(_: Memory) -> list[WorkItem]:
        return [WorkItem(cid) for cid in waiting]

    async def work(_: Memory, item: WorkItem) -> dict[str, Any]:
        done.append(item.conversation_id)
        if item.conversation_id == 3:
            waiting[:] = [4, 2, 3]  # 1 was done meanwhile (by another process), 4 arrived, 3 is due again
        return {}

    scheduler = Scheduler(memory, JobSettings(), jobs=[Job("steps", due, work, 3600)])
    results = await scheduler.run_job("steps")
    assert done == [3, 4, 2]
    assert [(r.conversation_id, r.status) for r in results] == [(3, "ok"), (4, "ok"), (2, "ok")]
    assert [r.conversation_id for r in await scheduler.run_job("steps")] == [4, 2, 3]  # the next pass takes all again


async def test_prepare_runs_once_before_the_first_item_and_a_failure_does_not_stop_the_work(memory: Memory) -> None:
    events: list[str] = []
    ran = asyncio.Event()

    async def prepare(_: Memory) -> None:
        events.append("prepare")
        raise RuntimeError("no model")

    async def due(_: Memory) -> list[WorkItem]:
        return [WorkItem(0)]

    async def work(_: Memory, __: WorkItem) -> dict[str, Any]:
        events.append("work")
        ran.set()
        return {}

    scheduler = Scheduler(memory, JobSettings(), jobs=[Job("prepared", due, work, 3600, prepare=prepare)])
    scheduler.start()
    try:
        await asyncio.wait_for(ran.wait(), 10)
        await scheduler.prepare()  # done already: not run again
    finally:
        await scheduler.shutdown()
    assert events == ["prepare", "work"]


async def test_the_consolidation_job_loads_the_offline_model_when_prepared(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory.consolidation import run

    loaded: list[str] = []
    monkeypatch.setattr(run, "nlp", lambda: loaded.append("spacy"))
    scheduler = Scheduler(memory, NOW, only=frozenset())
    await scheduler.prepare()
    await scheduler.prepare()
    assert loaded == ["spacy"]


async def test_a_consolidation_run_takes_at_most_its_cap_and_the_next_pass_the_rest(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    rows = [("k1", "Ann", "I adopted Rex."), ("k2", "Bob", "I play chess."), ("k3", "Cat", "I moved to Oslo.")]
    await api.ingest(memory, conversation_ref, messages(rows), principal=OPERATOR)
    capped = JobSettings(consolidate_tokens=0, interval_seconds=3600, consolidate_max_tokens=30)
    scheduler = Scheduler(memory, capped, only=frozenset({conversation_id}))
    assert [r.result["episodes"] for r in await scheduler.run_job("consolidation")] == [2]
    assert [r.result["episodes"] for r in await scheduler.run_job("consolidation")] == [1]
