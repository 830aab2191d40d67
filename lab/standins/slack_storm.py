"""A message storm through the Slack stand-in: many messages' lives (created, edited,
deleted, redelivered, mentioned, deleted before their create arrives) played at once,
each life in order, as fast as the service acknowledges. Used by the storm test and
``stashbird bench serve``; afterwards the stand-in's history is the truth to compare with.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from lab.standins.slack_standin import SlackStandIn

WORDS = ("budget", "offsite", "roadmap", "launch", "hiring", "design", "review", "deadline", "venue", "demo")


@dataclass
class StormReport:
    events: int = 0
    acked: int = 0
    seconds: float = 0.0
    ack_seconds: list[float] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    mentions: dict[str, float] = field(default_factory=dict)  # mention ts -> when it was delivered

    def count(self, kind: str) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + 1


class Storm:
    def __init__(self, slack: SlackStandIn, channels: list[str], seed: int = 7) -> None:
        self.slack = slack
        self.channels = channels
        self.random = random.Random(seed)
        self.report = StormReport()

    def _text(self, n: int) -> str:
        words = self.random.sample(WORDS, 3)
        return f"Note {n}: the {words[0]} and the {words[1]} before the {words[2]}."

    async def _send(self, kind: str, body: dict[str, Any], retry: int | None = None) -> None:
        delivery = await self.slack.deliver(body, retry=retry)
        self.report.events += 1
        self.report.count(kind)
        self.report.ack_seconds.append(delivery.seconds)
        if delivery.status == 200:
            self.report.acked += 1

    def _create(self, channel: str, n: int) -> dict[str, Any]:
        message = self.slack.message(channel, self.random.choice(("U1", "U2", "U3")), self._text(n))
        return self.slack.envelope({**message, "channel": channel, "channel_type": "channel"})

    async def life(self, n: int) -> None:
        """One message's life, chosen at random; its events in order."""
        channel = self.channels[n % len(self.channels)]
        roll = self.random.random()
        if roll < 0.05:
            started = time.perf_counter()
            ts = await self.slack.mention(channel, "U2", f"what about the {self.random.choice(WORDS)}?")
            self.report.mentions[ts] = started
            self.report.events += 2
            self.report.count("mention")
            return
        create = self._create(channel, n)
        ts = create["event"]["ts"]
        if roll < 0.10:  # the delete overtakes the create
            await self._send("delete", self.slack.delete_event(channel, ts))
            await self._send("message", create)
            return
        await self._send("message", create)
        if roll < 0.25:
            await self._send("duplicate", create, retry=1)
        elif roll < 0.40:
            await self._send("edit", self.slack.edit_event(channel, ts, self._text(n) + " (edited)"))
        elif roll < 0.55:
            await self._send("delete", self.slack.delete_event(channel, ts))
        elif roll < 0.62:
            await self._send("edit", self.slack.edit_event(channel, ts, self._text(n) + " (edited)"))
            await self._send("delete", self.slack.delete_event(channel, ts))

    async def run(self, events: int, concurrency: int) -> StormReport:
        """Play lives until about ``events`` events were sent, ``concurrency`` at a time."""
        started = time.perf_counter()
        queue = iter(range(10**9))

        async def worker() -> None:
            while self.report.events < events:
                await self.life(next(queue))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        self.report.seconds = time.perf_counter() - started
        return self.report


@dataclass
class StreamReport:
    """What a steady stream sent and what the service acknowledged, per event kind."""

    sent: int = 0  # distinct events
    acked: int = 0  # distinct events acknowledged (2xx), after however many tries
    refused: int = 0  # tries answered otherwise (5xx, connection refused): Slack retries those
    mentions: dict[str, str] = field(default_factory=dict)  # mention ts -> channel, acknowledged


class SteadyStream:
    """Message lives at a steady rate, each delivery retried as Slack retries (same
    event id, ``X-Slack-Retry-Num``) until it is acknowledged, however long the service
    refuses: a fault in the service then shows as retries, never as events not sent.
    Mentions and deletions among them; the stand-in's history is the truth after."""

    def __init__(
        self,
        slack: SlackStandIn,
        channels: list[str],
        rate: float,
        seed: int = 5,
        mentions: float = 0.05,
        retry_seconds: float = 0.5,
    ) -> None:
        self.slack, self.channels, self.rate, self.mention_share = slack, channels, rate, mentions
        self.random = random.Random(seed)
        self.retry_seconds = retry_seconds
        self.report = StreamReport()
        self._lives: list[asyncio.Task[None]] = []

    async def deliver(self, body: dict[str, Any]) -> None:
        self.report.sent += 1
        tries = 0
        while True:
            try:
                status = (await self.slack.deliver(body, retry=tries or None)).status
            except (OSError, aiohttp.ClientError):  # the service is not listening (killed, restarting)
                status = 0
            if 200 <= status < 300:
                self.report.acked += 1
                return
            self.report.refused += 1
            tries += 1
            await asyncio.sleep(self.retry_seconds)

    async def life(self, n: int) -> None:
        channel = self.channels[n % len(self.channels)]
        roll = self.random.random()
        if roll < self.mention_share:
            asked = self.slack.message(channel, "U2", f"<@U0STASHBIRD> what about the {self.random.choice(WORDS)}?")
            event = {**asked, "channel": channel, "event_ts": asked["ts"]}
            await self.deliver(self.slack.envelope({**event, "type": "app_mention"}))
            await self.deliver(self.slack.envelope({**event, "channel_type": "channel"}))
            self.report.mentions[asked["ts"]] = channel
            return
        message = self.slack.message(channel, self.random.choice(("U1", "U3")), f"Note {n} on the {self.random.choice(WORDS)}.")
        await self.deliver(self.slack.envelope({**message, "channel": channel, "channel_type": "channel"}))
        if roll < self.mention_share + 0.1:
            await self.deliver(self.slack.delete_event(channel, message["ts"]))

    async def run(self, seconds: float) -> None:
        """Start a life every ``1 / rate`` seconds for ``seconds``; lives still retrying
        go on (``finish`` waits for them)."""
        deadline = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < deadline:
            self._lives.append(asyncio.create_task(self.life(n)))
            n += 1
            await asyncio.sleep(1 / self.rate)

    async def finish(self, timeout: float = 120) -> StreamReport:
        """Wait until every life's events were acknowledged."""
        await asyncio.wait_for(asyncio.gather(*self._lives), timeout)
        return self.report
