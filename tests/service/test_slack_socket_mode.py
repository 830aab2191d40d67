"""Integration: Socket Mode through the real slack_sdk Socket Mode client (Bolt's aiohttp
handler) against the stand-in's loopback websocket (``apps.connections.open`` names it;
``hello``, Events API envelopes, ``disconnect`` envelopes, dropped connections): an event
is acknowledged only once it is in the inbox, the client reconnects after a disconnect
envelope or a dropped socket, ``connected`` (what ``/healthz`` reads) tells the truth
meanwhile, and deletions made during a gap are caught up by the sweep."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest

from connectors.events import ChatEvent
from connectors.intake import Intake
from connectors.metrics import REGISTRY
from connectors.service import ChatService
from connectors.slack.app import SlackConfig, SlackConnector
from lab.standins.slack_standin import TEAM, SlackStandIn
from memory import ConversationRef, Memory, Principal, UnknownConversation, messages

TEST = Principal.operator("test")


@dataclass
class Socket:
    service: ChatService
    connector: SlackConnector


@pytest.fixture
async def socket(memory: Memory, slack: SlackStandIn) -> AsyncIterator[Socket]:
    service = ChatService(memory)
    config = SlackConfig("xoxb-standin", "", slack.api_url, app_token="xapp-standin", ping_seconds=0.5)
    connector = SlackConnector(service, config)
    service.add_platform(connector)
    await connector.start()
    running = asyncio.create_task(service.run())
    await slack.socket_reconnected(1)
    yield Socket(service, connector)
    service.stop()
    await running
    await connector.close()


def channel() -> str:
    return f"C{uuid.uuid4().hex[:10].upper()}"


async def until(condition: Callable[[], object], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not await _value(condition()):
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.05)


async def _value(value: object) -> object:
    return await value if asyncio.iscoroutine(value) else value


async def stored(memory: Memory, c: str) -> dict[str, str]:
    try:
        return {
            str(m["message_id"]): str(m["text"])
            for m in await messages(memory, ConversationRef("slack", TEAM, c), principal=TEST)
        }
    except UnknownConversation:
        return {}


def reconnects() -> float:
    return REGISTRY.get_sample_value("stashbird_reconnects_total", {"platform": "slack"}) or 0.0


class GatedIntake:
    """The service's intake behind a gate (the inbox write waits for it), failing the
    first ``failures`` writes as a database outage does."""

    def __init__(self, inner: Intake, failures: int = 0) -> None:
        self.inner, self.failures = inner, failures
        self.memory = inner.memory
        self.gate = asyncio.Event()
        self.written: list[str] = []

    async def accept(self, event: ChatEvent) -> bool:
        await self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise ConnectionError("the database is restarting")
        new = await self.inner.accept(event)
        self.written.append(event.event_id)
        return new


async def test_an_event_is_acknowledged_only_after_its_inbox_write(socket: Socket, slack: SlackStandIn, memory: Memory) -> None:
    c = channel()
    gated = GatedIntake(socket.connector.intake, failures=2)
    socket.connector.intake = gated
    said = {**slack.message(c, "U1", "The offsite is in Porto."), "channel": c, "channel_type": "channel"}
    body = slack.envelope(said)
    assert (await slack.deliver_socket(body, timeout=1)).status == 0  # the write has not happened: no ack
    gated.gate.set()  # the first delivery's write fails now, and so does the redelivery's
    assert (await slack.deliver_socket(body, retry=1, timeout=2)).status == 0  # a failed write: no ack either
    assert gated.written == []
    delivered = await slack.deliver_socket(body, retry=2)
    assert delivered.status == 200 and gated.written == [body["event_id"]]
    await until(lambda: stored(memory, c))
    assert await stored(memory, c) == {said["ts"]: said["text"]}


@pytest.mark.parametrize("reason", ["refresh_requested", "warning"])
async def test_a_disconnect_envelope_is_followed_by_a_new_connection(
    socket: Socket, slack: SlackStandIn, memory: Memory, reason: str
) -> None:
    before, opened = reconnects(), slack.calls["apps.connections.open"]
    await slack.disconnect_socket(reason)
    await slack.socket_reconnected(2)
    assert slack.calls["apps.connections.open"] == opened + 1
    await until(lambda: socket.connector.connected)
    c = channel()
    said = {**slack.message(c, "U1", "Said on the new connection."), "channel": c, "channel_type": "channel"}
    assert (await slack.deliver_socket(slack.envelope(said))).status == 200
    await until(lambda: stored(memory, c))
    assert reconnects() == before + 1


@pytest.mark.parametrize("abruptly", [False, True])
async def test_a_dropped_socket_reconnects_and_the_gap_is_swept(
    socket: Socket, slack: SlackStandIn, memory: Memory, abruptly: bool
) -> None:
    c = channel()
    said = [slack.message(c, "U1", f"Plan item {n}.") for n in range(4)]
    for message in said:
        assert (await slack.deliver_socket(slack.envelope({**message, "channel": c, "channel_type": "channel"}))).status == 200
    await until(lambda: _count(memory, c, 4))

    slack.socket_refused = True  # Slack unreachable for a while
    await slack.drop_socket(abruptly)
    await until(lambda: not socket.connector.connected)
    health = await socket.service.health()
    assert health["connectors"] == {"slack": False} and not health["ok"]
    gone = said[1]["ts"]
    del slack.channels[c][gone]  # deleted while the bot was away: its event is lost

    slack.socket_refused = False
    await slack.socket_reconnected(2)
    await until(lambda: socket.connector.connected)
    assert (await socket.service.health())["connectors"] == {"slack": True}
    await until(lambda: _count(memory, c, 3))
    assert gone not in await stored(memory, c)


async def _count(memory: Memory, c: str, n: int) -> bool:
    return len(await stored(memory, c)) == n
