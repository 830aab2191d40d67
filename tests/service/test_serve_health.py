"""``/healthz`` and ``/metrics`` of a real ``stashbird serve`` (a separate process, through
the Slack stand-in), and the health rule itself."""

from __future__ import annotations

import asyncio
import re
import uuid

import aiohttp

from connectors.metrics import health_problems
from connectors.service import ChatService
from lab.standins.serve_process import start_serve, stop_serve
from lab.standins.slack_standin import SlackStandIn
from memory import InboxBacklog, Memory


async def get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}{path}") as response:
            return response.status, await response.text()


def sample(metrics: str, name: str, **labels: str) -> float | None:
    """The value of one series in the Prometheus text (None: absent)."""
    for line in metrics.splitlines():
        match = re.fullmatch(rf"{re.escape(name)}(\{{.*\}})? (\S+)", line)
        if match and all(f'{k}="{v}"' in (match.group(1) or "") for k, v in labels.items()):
            return float(match.group(2))
    return None


async def test_a_stalled_inbox_makes_healthz_503_and_metrics_count_what_happened(database_url: str) -> None:
    channel = f"CH{uuid.uuid4().hex[:8].upper()}"
    async with SlackStandIn() as slack:
        slack.delays["users.info"] = 4.0  # processing stalls on the name lookup
        process, port = await start_serve(slack, database_url, STASHBIRD_INBOX_STUCK_SECONDS="1")
        slack.events_url = f"http://127.0.0.1:{port}/slack/events"
        try:
            message = slack.message(channel, "U1", "The launch review is on Thursday.")
            body = slack.envelope({**message, "channel": channel, "channel_type": "channel"})
            assert (await slack.deliver(body)).status == 200
            assert (await slack.deliver(body, retry=1)).status == 200  # a redelivery
            await asyncio.sleep(2)
            status, text = await get(port, "/healthz")
            assert status == 503 and "inbox stuck" in text, text
            status, metrics = await get(port, "/metrics")
            assert status == 200
            assert sample(metrics, "stashbird_events_total", platform="slack", type="message", outcome="accepted") == 1
            assert sample(metrics, "stashbird_events_total", platform="slack", type="message", outcome="duplicate") == 1
            assert sample(metrics, "stashbird_ack_seconds_count", platform="slack") == 2
            assert (sample(metrics, "stashbird_inbox_pending") or 0) >= 1
            assert (sample(metrics, "stashbird_inbox_oldest_seconds") or 0) >= 1
            assert sample(metrics, "stashbird_consolidation_backlog_messages") is not None
            assert sample(metrics, "stashbird_connector_up", platform="slack") == 1
            for _ in range(100):  # the lookup answers after 4 s: the message is stored
                await asyncio.sleep(0.1)
                metrics = (await get(port, "/metrics"))[1]
                if sample(metrics, "stashbird_events_processed_total", platform="slack", type="message", outcome="done"):
                    break
            assert sample(metrics, "stashbird_events_processed_total", platform="slack", type="message", outcome="done") == 1
        finally:
            await stop_serve(process)


def test_health_names_each_problem() -> None:
    calm = InboxBacklog(3, 0, 2.0)
    assert health_problems({"slack": True}, calm, 300) == []
    assert health_problems({"slack": False, "discord": True}, calm, 300) == ["connector slack is not connected"]
    assert health_problems({}, None, 300) == ["database unreachable"]
    stuck = health_problems({}, InboxBacklog(550, 0, 400.0, replies_pending=9, oldest_reply_seconds=999.0), 300)
    assert len(stuck) == 1 and stuck[0].startswith("inbox stuck: 550 events pending, the oldest for 400 s")
    assert health_problems({}, InboxBacklog(0, 0, None, replies_pending=9, oldest_reply_seconds=999.0), 300) == []


async def test_health_is_503_while_a_connector_is_not_connected(memory: Memory) -> None:
    class Down:
        name = "test"
        connected = False

        async def describe(self, conversation: object, author: object) -> object:
            raise AssertionError

        async def deliver(self, reply: object) -> None:
            raise AssertionError

    report = await ChatService(memory, [Down()]).health()
    assert report["ok"] is False and "connector test is not connected" in report["problems"]
    assert report["connectors"] == {"test": False}
