"""The Discord gateway connection, owned: every frame parsed in isolation, and a
supervisor that keeps one session up whatever ends it.

Why not ``discord.Client.connect``: its loop ends for good on any exception it does not
list (a parser's ``KeyError`` on a frame shape it does not expect, a frame that is not
JSON), on every close code it does not resume (4004 among them, with a traceback), and it
RESUMEs sessions Discord has said it will not resume (4007, 4009). Nothing restarted it,
and the connector kept saying it was connected. Here:

- ``isolate_parsers`` wraps each of discord.py's frame parsers: a frame one cannot read
  is reported (logged once with its type, sequence and reason; counted in
  ``stashbird_parse_errors_total``) and skipped; the connection goes on. Known shape
  variations are filled in first (``FRAME_DEFAULTS``), so an old-shape interaction is
  still answered.
- ``GatewaySupervisor.run`` is the connection loop: any end (an error, a close code, a
  heartbeat that went unanswered, RECONNECT, INVALID_SESSION) leads to RESUME where
  Discord allows it (``next_step``), else a fresh IDENTIFY, after a jittered backoff
  (``backoff_delay``); a fatal close code (``FATAL_CLOSE_CODES``) stops it with one line.
- ``Heartbeat`` is what "connected" means: a session is established (READY or RESUMED
  came on this socket) and the last heartbeat ACK is at most two intervals old. A
  connection whose ACKs stop ("zombied", Discord's word) is closed and resumed.

discord.py internals this relies on (2.7.1; re-check on upgrade): ``ConnectionState.parsers``
(event name -> ``parse_*`` method; the dict each ``DiscordWebSocket`` reads as
``_discord_parsers``), ``DiscordWebSocket.from_client`` (its keyword arguments ``initial``,
``gateway``, ``session``, ``sequence``, ``resume``), ``poll_event``, the socket's
``sequence``, ``session_id``, ``gateway``, ``_close_code`` and ``socket.close_code``,
``ReconnectWebSocket.resume``, ``ConnectionClosed.code``, ``Client.ws``, and the raw
frames ``socket_raw_receive`` hands to ``Client.dispatch`` (``enable_debug_events``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Literal

import discord
from discord.gateway import DiscordWebSocket, ReconnectWebSocket

log = logging.getLogger(__name__)

Step = Literal["resume", "identify", "stop"]
Parser = Callable[[Any], None]

OP_DISPATCH, OP_HELLO, OP_HEARTBEAT_ACK = 0, 10, 11

# Close codes after which Discord will not take the bot back as it is: one line, no retry.
FATAL_CLOSE_CODES = {
    4004: "authentication failed: check DISCORD_BOT_TOKEN",
    4010: "invalid shard",
    4011: "sharding required: the bot is in too many servers for one connection",
    4012: "invalid gateway API version",
    4013: "invalid intents",
    4014: "disallowed intents: enable Message Content under Bot > Privileged Gateway Intents",
}
# Close codes after which the session cannot be resumed: reconnect with a new session.
NEW_SESSION_CLOSE_CODES = frozenset({4007, 4009})  # invalid sequence, session timed out

# Fields older frames lack that discord.py 2.7 requires, with what they mean when absent:
# interactions before 2024 (slash commands, modal submits) carry no attachment_size_limit
# (the upload limit of a server without boosts).
FRAME_DEFAULTS: dict[str, dict[str, Any]] = {"INTERACTION_CREATE": {"attachment_size_limit": 10 * 1024 * 1024}}


def intents(members: bool = False) -> discord.Intents:
    """Guilds, guild messages and the privileged message content intent (enabled in the
    application's Bot settings); the privileged members intent only when ``members``
    (STASHBIRD_ON_MEMBER_LEAVE=forget: GUILD_MEMBER_REMOVE comes with it alone), nothing
    else."""
    chosen = discord.Intents.none()
    chosen.guilds = True
    chosen.guild_messages = True
    chosen.message_content = True
    chosen.members = members
    return chosen


def next_step(close_code: int | None, resume_requested: bool, session_id: str | None) -> Step:
    """What to do after a connection ended: stop on a fatal close code, RESUME when the
    gateway did not rule it out and there is a session to resume, else IDENTIFY. Pure."""
    if close_code in FATAL_CLOSE_CODES:
        return "stop"
    if not resume_requested or session_id is None or close_code in NEW_SESSION_CLOSE_CODES:
        return "identify"
    return "resume"


def backoff_delay(failures: int, base: float, cap: float, rng: random.Random) -> float:
    """Seconds to wait before the next attempt: "full jitter" (uniform in 0 .. base *
    2**failures, at most ``cap``), so many clients dropped at once do not come back in
    step. ``failures``: consecutive attempts that did not establish a session. Pure
    given ``rng``."""
    return rng.uniform(0.0, min(cap, base * 2 ** min(failures, 32)))


@dataclass
class Heartbeat:
    """Whether the gateway session is alive, from the frames seen (monotonic seconds)."""

    interval: float = 41.25
    last_ack: float = 0.0
    session: bool = False

    def observe(self, frame: dict[str, Any], now: float) -> Literal["ready", "resumed"] | None:
        """Take one received frame; a new (``ready``) or resumed session is returned."""
        op = frame.get("op")
        if op == OP_HELLO:
            data = frame.get("d") or {}
            self.interval = float(data.get("heartbeat_interval") or 41250) / 1000
            self.last_ack = now  # the first ACK is due within the window from here
        elif op == OP_HEARTBEAT_ACK:
            self.last_ack = now
        elif op == OP_DISPATCH and frame.get("t") in ("READY", "RESUMED"):
            self.session = True
            return "ready" if frame["t"] == "READY" else "resumed"
        return None

    def alive(self, now: float) -> bool:
        return self.session and now - self.last_ack <= 2 * self.interval

    def down(self) -> None:
        self.session = False


@dataclass(frozen=True)
class GatewayPolicy:
    """How the supervisor retries, and how far back the sweep after a gap looks."""

    backoff_base: float = 1.0  # seconds; the first retry waits up to this
    backoff_cap: float = 60.0
    connect_timeout: float = 60.0  # connecting, HELLO and sending IDENTIFY/RESUME
    gap_sweep_days: int = 7  # 0: no sweep after a gap (the scheduled sweep still runs)


# (frame type, sequence number, the frame's data, what went wrong)
FaultReport = Callable[[str, int | None, Any, BaseException], None]


def isolate_parsers(parsers: MutableMapping[str, Parser], report: FaultReport, sequence: Callable[[], int | None]) -> None:
    """Wrap each of discord.py's frame parsers in place (see the module doc); ``sequence``
    gives the number of the frame being parsed (the socket sets it before parsing)."""
    for name, parse in list(parsers.items()):
        if not getattr(parse, "isolated", False):
            parsers[name] = _isolated(name, parse, report, sequence)


def _isolated(name: str, parse: Parser, report: FaultReport, sequence: Callable[[], int | None]) -> Parser:
    defaults = FRAME_DEFAULTS.get(name, {})

    def parse_alone(data: Any) -> None:
        if defaults and isinstance(data, dict):
            for key, value in defaults.items():
                data.setdefault(key, value)
        try:
            parse(data)
        except Exception as error:  # noqa: BLE001 - one frame never ends the connection
            report(name, sequence(), data, error)

    parse_alone.isolated = True  # type: ignore[attr-defined]
    return parse_alone


def close_code(ws: DiscordWebSocket | None) -> int | None:
    """The close code a socket ended with (the gateway's, or the one we closed it with)."""
    if ws is None:
        return None
    code = getattr(ws, "_close_code", None) or ws.socket.close_code
    return int(code) if code is not None else None


@dataclass
class GatewaySupervisor:
    """Owns one client's gateway connection (see the module doc)."""

    client: discord.Client
    heartbeat: Heartbeat
    policy: GatewayPolicy = field(default_factory=GatewayPolicy)
    rng: random.Random = field(default_factory=random.Random)
    stopped: str | None = None  # why it stopped for good (a fatal close code)
    failures: int = 0  # consecutive connections that established no session

    @property
    def connected(self) -> bool:
        return self.stopped is None and not self.client.is_closed() and self.heartbeat.alive(time.monotonic())

    async def run(self) -> None:
        """Connect, and reconnect after every end, until the client closes or Discord
        refuses the bot for good."""
        params: dict[str, Any] = {"initial": True, "shard_id": None}
        watchdog = asyncio.create_task(self._watch())
        try:
            while not self.client.is_closed():
                step, code, established = await self._connection(params)
                if self.client.is_closed():
                    return
                self.client.dispatch("disconnect")
                if step == "stop":
                    self.stopped = f"Discord closed the gateway connection ({code}): {FATAL_CLOSE_CODES[code or 0]}"
                    log.error("%s; not reconnecting", self.stopped)
                    return
                self.failures = 0 if established else self.failures + 1
                delay = backoff_delay(self.failures, self.policy.backoff_base, self.policy.backoff_cap, self.rng)
                log.info("Discord gateway: %s in %.2fs (close code %s)", step, delay, code)
                self._prepare(params, step)
                await asyncio.sleep(delay)
        finally:
            watchdog.cancel()

    async def _connection(self, params: dict[str, Any]) -> tuple[Step, int | None, bool]:
        """One connection, from connecting until it ends: what to do next, the close
        code, and whether a session was established on it."""
        ws: DiscordWebSocket | None = None
        resume, code = True, None
        try:
            ws = await asyncio.wait_for(DiscordWebSocket.from_client(self.client, **params), self.policy.connect_timeout)
            self.client.ws = ws
            params["initial"] = False
            while True:
                await ws.poll_event()
        except ReconnectWebSocket as end:
            resume = end.resume
        except discord.ConnectionClosed as end:
            code = end.code
        except Exception as error:  # noqa: BLE001 - any failure of the connection: reconnect
            if not self.client.is_closed():
                log.warning("Discord gateway connection failed, reconnecting: %s: %s", type(error).__name__, error)
            if ws is not None and not ws.socket.closed:
                await ws.close(code=4000)
        established = self.heartbeat.session
        self.heartbeat.down()
        code = code if code is not None else close_code(ws)
        return next_step(code, resume, self._session_id()), code, established

    def _session_id(self) -> str | None:
        ws = self.client.ws
        return ws.session_id if ws is not None else None

    def _prepare(self, params: dict[str, Any], step: Step) -> None:
        """The next connection's arguments: the session to RESUME, or none (IDENTIFY)."""
        ws = self.client.ws
        if step == "resume" and ws is not None:
            params.update(resume=True, session=ws.session_id, sequence=ws.sequence, gateway=ws.gateway)
        else:
            params.update(resume=False, session=None, sequence=None, gateway=None)

    async def _watch(self) -> None:
        """Close a connection whose heartbeats go unanswered (it is then resumed)."""
        while True:
            await asyncio.sleep(max(self.heartbeat.interval / 4, 0.05))
            ws = self.client.ws
            if self.heartbeat.session and not self.heartbeat.alive(time.monotonic()) and ws is not None:
                log.warning("Discord gateway: no heartbeat ACK for two intervals, reconnecting")
                self.heartbeat.down()
                await ws.close(code=4000)
