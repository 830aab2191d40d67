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
from connectors.metrics import REGISTRY
from lab.standins.slack_standin import SlackStandIn
from memory import ConversationRef, Memory, UnknownConversation, messages
from tests.service.test_slack_integration import TEST, answers, channel, ref, settle, stored

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


async def test_events_from_another_workspace_are_acknowledged_and_neither_stored_nor_answered(
    served: Running, slack: SlackStandIn, memory: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    c = channel()
    other = {**slack.envelope({}), "team_id": "T0ELSEWHERE", "authorizations": [{"team_id": "T0ELSEWHERE", "is_bot": True}]}
    said = {**slack.message(c, "U1", "Team B's secret plan."), "channel": c, "channel_type": "channel", "team": "T0ELSEWHERE"}
    asked = {**slack.message(c, "U1", "<@U0STASHBIRD> what is the plan?"), "channel": c, "team": "T0ELSEWHERE"}
    for event in (said, {**asked, "type": "app_mention"}):
        assert (await slack.deliver({**other, "event": event, "event_id": slack.envelope({})["event_id"]})).status == 200
    command = await slack.command(c, "UADMIN", "stats", team="T0ELSEWHERE")
    assert command.status == 200 and "not installed" in command.body
    await settle(memory, served, [c])
    for team in ("T0ELSEWHERE", slack.team):
        with pytest.raises(UnknownConversation):
            await messages(memory, ConversationRef("slack", team, c), principal=TEST)
    assert answers(slack, c) == [] and slack.ephemeral == []
    assert any("T0ELSEWHERE" in r.getMessage() and "refused" in r.getMessage() for r in caplog.records)


async def test_direct_messages_are_refused_on_the_live_path(served: Running, slack: SlackStandIn, memory: Memory) -> None:
    for kind in ("im", "mpim"):
        d = f"D{channel()[1:]}"
        said = {**slack.message(d, "U1", "A private word."), "channel": d, "channel_type": kind}
        assert (await slack.deliver(slack.envelope(said))).status == 200
        edited = slack.edit_event(d, said["ts"], "A private word, edited.")
        edited["event"]["channel_type"] = kind
        assert (await slack.deliver(edited)).status == 200
        await settle(memory, served, [d])
        await nothing_stored(memory, d)


GITHUB_NOTICE = {
    "type": "message",
    "subtype": "bot_message",
    "bot_id": "B0GITHUB",
    "username": "GitHub",
    "text": "",
    "attachments": [
        {
            "fallback": "[stashbird:main] 2 new commits by maya",
            "pretext": "[stashbird:main] 2 new commits pushed by maya",
            "text": "`a1b2c3d` Move the offsite to Porto\n`d4e5f6a` Book the river lodge",
            "color": "#24292f",
            "fields": [{"title": "Deploy", "value": "staging-7", "short": True}],
        },
        {"fallback": "Build #418 passed in 6 min"},
    ],
}
ALERT_BLOCKS = {
    "type": "message",
    "bot_id": "B0ALERTS",
    "bot_profile": {"id": "B0ALERTS", "name": "Pager"},
    "text": "",
    "blocks": [
        {"type": "header", "text": {"type": "plain_text", "text": "Disk almost full"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "*db-2* is at 91%"}},
        {
            "type": "rich_text",
            "elements": [
                {"type": "rich_text_section", "elements": [{"type": "text", "text": "Owner: "}, {"type": "text", "text": "Tom"}]}
            ],
        },
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "since 09:12"}]},
    ],
}


async def test_bot_messages_keep_their_attachment_and_block_text_as_bots(
    served: Running, slack: SlackStandIn, memory: Memory
) -> None:
    c = channel()
    for notice in (GITHUB_NOTICE, ALERT_BLOCKS):
        ts = slack.next_ts()
        slack.record(c, {**notice, "ts": ts})
        assert (await slack.deliver(slack.envelope({**notice, "ts": ts, "channel": c, "channel_type": "channel"}))).status == 200
    await settle(memory, served, [c])
    rows = await messages(memory, ref(c), principal=TEST)
    assert [(r["speaker"], r["role"]) for r in rows] == [("GitHub", "bot"), ("Pager", "bot")]
    assert rows[0]["text"] == (
        "[stashbird:main] 2 new commits pushed by maya\n`a1b2c3d` Move the offsite to Porto\n`d4e5f6a` Book the river lodge\n"
        "Deploy: staging-7\nBuild #418 passed in 6 min"
    )
    assert rows[1]["text"] == "Disk almost full\n*db-2* is at 91%\nOwner: Tom\nsince 09:12"


async def test_a_legacy_file_share_keeps_its_file_name(served: Running, slack: SlackStandIn, memory: Memory) -> None:
    c = channel()
    legacy = {"subtype": "file_share", "upload": True, "file": {"id": "F0DECK", "name": "Q3-plan.pdf", "title": "Q3 plan"}}
    ts = await slack.post(c, "U1", "the deck", **legacy)
    await settle(memory, served, [c])
    assert await stored(memory, c) == {ts: "the deck\n[shared files: Q3-plan.pdf]"}


async def test_memory_forgotten_lines_for_edits_do_not_end_in_a_bare_colon(
    served: Running, slack: SlackStandIn, memory: Memory
) -> None:
    c = channel()
    ts = await slack.post(c, "U1", "Standup is at 9.")
    await settle(memory, served, [c])
    await slack.edit(c, ts, "Standup is at 10.")
    await settle(memory, served, [c])
    assert (await slack.command(c, "UADMIN", "forgotten")).status == 200
    await settle(memory, served, [c])
    line, *people = slack.ephemeral[-1]["text"].splitlines()
    assert not people or people[0] == "In this workspace:"  # other tests' people decisions in the stand-in's team
    assert f"edit of message {ts}" in line and not line.rstrip().endswith(":"), line
