"""Integration: what Slack really sends at the HTTP edge, as the Events API documents it
and its known variations (malformed bodies, characters the database cannot hold, event
types without a handler, older ``message_changed`` shapes, other workspaces, direct
messages, bots that post only attachments or blocks, legacy file shares). Signed
requests from the Slack stand-in into the real aiohttp endpoint and Bolt app; the real
``AsyncWebClient`` calls the stand-in; memory is the real database."""

from __future__ import annotations

import json
import logging

import pytest

from bot.service import Running
from bot.testing.slack_standin import SlackStandIn
from connectors.metrics import REGISTRY
from memory import Memory, UnknownConversation
from tests.test_slack_integration import channel, settle, stored

pytestmark = pytest.mark.usefixtures("served")


def refused(kind: str) -> float:
    return REGISTRY.get_sample_value("stashbird_events_total", {"platform": "slack", "type": kind, "outcome": "refused"}) or 0.0


def no_errors(caplog: pytest.LogCaptureFixture) -> None:
    loud = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not loud, [r.getMessage() for r in loud]


async def nothing_stored(memory: Memory, channel_id: str) -> None:
    try:
        assert await stored(memory, channel_id) == {}
    except UnknownConversation:
        pass


async def test_a_malformed_body_unsigned_is_401_and_signed_is_400_without_a_traceback(
    slack: SlackStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    for body in ('{"type": "event_callback", "event": ', "[1, 2", "\x00not json"):
        assert (await slack.deliver(body, secret="someone-else")).status == 401
        assert (await slack.deliver(body)).status == 400
    assert (await slack.deliver("[1, 2]")).status == 400  # JSON, but not an envelope
    no_errors(caplog)


async def test_a_nul_or_lone_surrogate_in_text_is_acknowledged_and_refused(
    slack: SlackStandIn, memory: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    c = channel()
    before = refused("message")
    for text in ("before\x00after", "half a pair \ud83d here"):
        event = {**slack.message(c, "U1", text), "channel": c, "channel_type": "channel"}
        delivery = await slack.deliver(json.dumps(slack.envelope(event)))
        assert delivery.status == 200, delivery.body
    assert refused("message") == before + 2
    await nothing_stored(memory, c)
    assert any("NUL" in r.getMessage() for r in caplog.records) and any("surrogate" in r.getMessage() for r in caplog.records)
    no_errors(caplog)


async def test_an_event_type_without_a_handler_is_acknowledged(slack: SlackStandIn, caplog: pytest.LogCaptureFixture) -> None:
    c = channel()
    reaction = {
        "type": "reaction_added",
        "user": "U1",
        "reaction": "tada",
        "item": {"type": "message", "channel": c, "ts": "1.0"},
    }
    assert (await slack.deliver(slack.envelope({**reaction, "event_ts": slack.next_ts()}))).status == 200
    assert (await slack.deliver(slack.envelope({"type": "member_joined_channel", "user": "U1", "channel": c}))).status == 200
    limited = {"token": "legacy", "type": "app_rate_limited", "team_id": slack.team, "minute_rate_limited": 1, "api_app_id": "A0"}
    assert (await slack.deliver(limited)).status == 200
    no_errors(caplog)


async def test_an_edit_whose_message_lacks_ts_is_named_by_previous_message(
    served: Running, slack: SlackStandIn, memory: Memory
) -> None:
    c = channel()
    ts = await slack.post(c, "U1", "The retro is on Monday.")
    body = slack.edit_event(c, ts, "The retro is on Thursday.")
    del body["event"]["message"]["ts"]
    assert (await slack.deliver(body)).status == 200
    await settle(memory, served, [c])
    assert await stored(memory, c) == {ts: "The retro is on Thursday."}


async def test_an_edit_naming_no_message_is_acknowledged_and_logged(
    slack: SlackStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    c = channel()
    ts = await slack.post(c, "U1", "The retro is on Monday.")
    body = slack.edit_event(c, ts, "The retro is on Thursday.")
    del body["event"]["message"]["ts"], body["event"]["previous_message"]["ts"]
    assert (await slack.deliver(body)).status == 200
    [line] = [r.getMessage() for r in caplog.records if "message_changed" in r.getMessage() and "refused" in r.getMessage()]
    assert "message.ts" in line and body["event_id"] in line
