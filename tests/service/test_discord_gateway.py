"""The Discord gateway connection (connectors/discord/gateway.py): the pure rules, then
the real discord.Client against the loopback gateway stand-in misbehaving as Discord
does (frames it cannot parse, dropped sockets, RECONNECT, INVALID_SESSION, close codes,
refused resumes, unanswered heartbeats)."""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.discord.gateway import (
    FATAL_CLOSE_CODES,
    GatewayPolicy,
    Heartbeat,
    backoff_delay,
    isolate_parsers,
    next_step,
)
from connectors.metrics import REGISTRY
from lab.standins.discord_standin import DiscordStandIn, until

if TYPE_CHECKING:
    from tests.conftest import Discord

Worlds = Callable[..., AbstractAsyncContextManager["Discord"]]
FAST = GatewayPolicy(backoff_base=0.05, backoff_cap=0.2)
STATS = [{"type": 1, "name": "stats", "options": []}]
# Fields Discord added to INTERACTION_CREATE over the years; older frames lack them.
LATER_INTERACTION_FIELDS = ("attachment_size_limit", "entitlements", "authorizing_integration_owners", "context")


def _count(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, {"platform": "discord", **labels}) or 0.0


# --- pure rules --------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(FATAL_CLOSE_CODES))
def test_a_fatal_close_code_stops(code: int) -> None:
    assert next_step(code, True, "session") == "stop"


@pytest.mark.parametrize(
    ("code", "resume", "session", "step"),
    [
        (4000, True, "s", "resume"),  # unknown error: Discord allows a resume
        (None, True, "s", "resume"),  # the socket dropped
        (4009, True, "s", "identify"),  # session timed out
        (4007, True, "s", "identify"),  # invalid sequence
        (1000, False, "s", "identify"),  # INVALID_SESSION, not resumable
        (4000, True, None, "identify"),  # nothing to resume
    ],
)
def test_resume_where_discord_allows_it_else_identify(code: int | None, resume: bool, session: str | None, step: str) -> None:
    assert next_step(code, resume, session) == step


@given(st.integers(0, 100), st.floats(0.01, 10), st.floats(0.01, 600), st.integers())
def test_backoff_is_jittered_within_its_exponential_bound(failures: int, base: float, cap: float, seed: int) -> None:
    delay = backoff_delay(failures, base, cap, random.Random(seed))
    assert 0 <= delay <= min(cap, base * 2 ** min(failures, 32))


def test_backoff_delays_differ_between_clients() -> None:
    """Jitter: clients dropped together do not all come back at the same moment."""
    assert len({round(backoff_delay(3, 1.0, 60.0, random.Random(seed)), 6) for seed in range(20)}) > 10


def test_heartbeat_alive_only_with_a_session_and_a_recent_ack() -> None:
    beat = Heartbeat()
    beat.observe({"op": 10, "d": {"heartbeat_interval": 1000}}, now=100.0)
    assert not beat.alive(100.5)  # no session yet
    assert beat.observe({"op": 0, "t": "READY", "s": 1, "d": {}}, now=100.5) == "ready"
    assert beat.alive(101.9) and not beat.alive(102.1)  # two intervals after HELLO, no ACK
    beat.observe({"op": 11}, now=102.0)
    assert beat.alive(103.9)
    beat.down()
    assert not beat.alive(102.0)
    assert beat.observe({"op": 0, "t": "RESUMED", "s": 9, "d": {}}, now=102.0) == "resumed"


def test_isolated_parsers_report_and_skip_a_frame_they_cannot_read() -> None:
    seen: list[dict[str, Any]] = []
    faults: list[tuple[str, int | None, str]] = []

    def parse_interaction_create(data: dict[str, Any]) -> None:
        seen.append(data)
        data["needs"]  # noqa: B018 - a parser meeting a shape it does not know

    parsers: dict[str, Callable[[Any], None]] = {"INTERACTION_CREATE": parse_interaction_create}
    isolate_parsers(parsers, lambda name, seq, data, error: faults.append((name, seq, repr(error))), lambda: 7)
    isolate_parsers(parsers, lambda *_: pytest.fail("wrapped twice"), lambda: 7)
    parsers["INTERACTION_CREATE"]({"id": "1"})
    assert faults == [("INTERACTION_CREATE", 7, "KeyError('needs')")]
    assert seen[0]["attachment_size_limit"] == 10 * 1024 * 1024  # the known gap of older frames, filled


# --- the real client against the stand-in --------------------------------------------------


async def test_an_interaction_without_attachment_size_limit_is_answered_and_the_stream_goes_on(discord_env: Discord) -> None:
    """Defect 1: discord.py 2.7 raised KeyError on it inside the gateway loop and the
    connection ended for good, silently; every later event was lost."""
    env = discord_env
    errors = _count("stashbird_parse_errors_total", frame="INTERACTION_CREATE")
    interaction = await env.standin.invoke(env.general, env.owner, "memory", STATS, omit=LATER_INTERACTION_FIELDS)
    after = await env.standin.post(env.general, env.bob, "The build server moved to rack four.")
    await env.settle()
    assert after["id"] in await env.stored(env.general)
    await env.standin.wait_for(lambda: [r for r in env.standin.interaction_replies if r["interaction_id"] == interaction])
    assert _count("stashbird_parse_errors_total", frame="INTERACTION_CREATE") == errors
    await until(lambda: env.connector.connected)
    assert env.standin.identifies == 1 and env.standin.resumes == 0


async def test_frames_that_cannot_be_parsed_are_logged_once_counted_and_skipped(
    discord_env: Discord, caplog: pytest.LogCaptureFixture
) -> None:
    env = discord_env
    before = {t: _count("stashbird_parse_errors_total", frame=t) for t in ("MESSAGE_CREATE", "GUILD_ROLE_CREATE")}
    caplog.set_level(logging.WARNING, logger="connectors.discord")
    # A message without an author (ours and discord.py's parser both refuse it) and a role
    # event without its role (only discord.py's does).
    broken = env.standin.message_payload(env.general, env.bob, "no author")
    del broken["author"]
    await env.standin.dispatch("MESSAGE_CREATE", broken)
    await env.standin.dispatch("GUILD_ROLE_CREATE", {"guild_id": env.guild})
    kept = await env.standin.post(env.general, env.bob, "The stream goes on after the bad frames.")
    await env.settle()
    assert kept["id"] in await env.stored(env.general) and broken["id"] not in await env.stored(env.general)
    for frame, count in before.items():
        assert _count("stashbird_parse_errors_total", frame=frame) == count + 1
    lines = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(lines) == 2
    assert "MESSAGE_CREATE" in lines[0] and broken["id"] in lines[0] and "author" in lines[0]
    assert "GUILD_ROLE_CREATE" in lines[1] and "KeyError" in lines[1]
    assert env.standin.identifies == 1 and env.standin.resumes == 0


async def test_a_frame_that_is_not_json_ends_only_that_connection(discord_worlds: Worlds) -> None:
    async with discord_worlds(DiscordStandIn(), FAST) as env:
        await env.standin.send_raw("{this is not json")
        await until(lambda: env.standin.resumes == 1)
        posted = await env.standin.post(env.general, env.bob, "Back after the garbled frame.")
        await env.settle()
        assert posted["id"] in await env.stored(env.general)


async def _drop(standin: DiscordStandIn) -> None:
    await standin.drop()


async def _reconnect(standin: DiscordStandIn) -> None:
    await standin.reconnect()


async def _invalid_resumable(standin: DiscordStandIn) -> None:
    await standin.invalid_session(resumable=True)


async def _invalid(standin: DiscordStandIn) -> None:
    await standin.invalid_session(resumable=False)


async def _close_4000(standin: DiscordStandIn) -> None:
    await standin.close_socket(4000, "Unknown error")


async def _close_4009(standin: DiscordStandIn) -> None:
    await standin.close_socket(4009, "Session timed out")


async def _resume_refused(standin: DiscordStandIn) -> None:
    standin.refuse_resume = True
    await standin.drop()


ENDS: dict[str, tuple[Callable[[DiscordStandIn], Awaitable[None]], str]] = {
    "socket dropped": (_drop, "resume"),
    "RECONNECT": (_reconnect, "resume"),
    "INVALID_SESSION resumable": (_invalid_resumable, "resume"),
    "close 4000": (_close_4000, "resume"),
    "INVALID_SESSION": (_invalid, "identify"),
    "close 4009": (_close_4009, "identify"),
    "RESUME refused": (_resume_refused, "identify"),
}


@pytest.mark.parametrize("end", list(ENDS))
async def test_every_end_of_the_connection_is_followed_by_resume_or_identify(discord_worlds: Worlds, end: str) -> None:
    act, step = ENDS[end]
    async with discord_worlds(DiscordStandIn(), FAST) as env:
        reconnects = _count("stashbird_reconnects_total")
        before = await env.standin.post(env.general, env.bob, "Posted before the connection ended.")
        await env.settle()
        await act(env.standin)
        during = await env.standin.post(env.general, env.carol, "Posted while the client was away.")
        await env.standin.connected()
        after = await env.standin.post(env.general, env.bob, "Posted after it came back.")
        await env.settle()
        stored = await env.stored(env.general)
        assert before["id"] in stored and after["id"] in stored
        if step == "resume":  # the session survived: Discord replays what was missed
            assert (env.standin.identifies, env.standin.resumes) == (1, 1) and during["id"] in stored
        else:
            assert env.standin.identifies == 2
        await until(lambda: env.connector.connected)
        assert _count("stashbird_reconnects_total") == reconnects + 1
        assert (await env.service.health())["connectors"] == {"discord": True}


async def test_deletes_made_while_the_bot_was_away_are_applied_after_a_new_session(discord_worlds: Worlds) -> None:
    """A new session cannot replay the gap: the sweep runs for the session's servers."""
    async with discord_worlds(DiscordStandIn(), FAST) as env:
        gone = await env.standin.post(env.general, env.bob, "The vault code is 7712, do not share it.")
        kept = await env.standin.post(env.random, env.bob, "Lunch is at noon on Fridays.")
        await env.settle()
        env.standin.refuse_resume = True
        await env.standin.drop()
        await env.standin.delete(env.general, gone["id"], silently=True)  # its MESSAGE_DELETE never reaches the bot
        await env.standin.connected()
        assert env.standin.identifies == 2
        await until(lambda: env.connector._gap_sweep is not None and env.connector._gap_sweep.done())
        assert gone["id"] not in await env.stored(env.general)
        assert kept["id"] in await env.stored(env.random)
        assert env.service.removals >= 1  # the VACUUM after chat deletions will follow it


@pytest.mark.parametrize("code", [4004, 4014])
async def test_a_fatal_close_code_stops_the_connector_with_one_clear_line(
    discord_worlds: Worlds, caplog: pytest.LogCaptureFixture, code: int
) -> None:
    caplog.set_level(logging.INFO, logger="connectors.discord")
    async with discord_worlds(DiscordStandIn(), FAST) as env:
        await until(lambda: env.connector.connected)
        await env.standin.close_socket(code)
        await until(lambda: env.connector.supervisor.stopped is not None)
        assert not env.connector.connected
        assert (await env.service.health())["connectors"] == {"discord": False}
        assert _count("stashbird_connector_up") == 0.0
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and str(code) in errors[0].getMessage()
        assert FATAL_CLOSE_CODES[code] in errors[0].getMessage() and errors[0].exc_info is None
        assert env.standin.identifies == 1 and env.standin.resumes == 0  # not retried


async def test_unanswered_heartbeats_mark_the_connector_down_until_it_resumes(discord_worlds: Worlds) -> None:
    """A "zombied" connection (Discord's word): frames may still flow, ACKs do not. It is
    reported down, closed and resumed; it is up again once ACKs come back."""
    async with discord_worlds(DiscordStandIn(heartbeat_ms=150), FAST) as env:
        await until(lambda: env.connector.connected)
        assert _count("stashbird_connector_up") == 1.0
        env.standin.ack_heartbeats = False
        await until(lambda: not env.connector.connected)
        assert (await env.service.health())["connectors"] == {"discord": False}
        await until(lambda: env.standin.resumes >= 1)  # closed and resumed (and again, while ACKs stay away)
        env.standin.ack_heartbeats = True
        await until(lambda: env.connector.connected)
        assert env.standin.identifies == 1
        posted = await env.standin.post(env.general, env.bob, "Still remembered after the zombie connection.")
        await env.settle()
        assert posted["id"] in await env.stored(env.general)
