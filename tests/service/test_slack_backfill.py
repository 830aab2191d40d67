"""Integration: backfilling a Slack channel through the real AsyncWebClient against the
stand-in's ``conversations.history`` / ``conversations.replies``: interrupted and run
again it continues; run again later it reads only what is new; idempotent with what the
live stream stored or deleted."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from slack_sdk.errors import SlackApiError

from connectors.events import Author, ChatMessage, MessageDeleted, MessagePosted
from connectors.service import ChatService
from connectors.slack.app import SlackConfig, SlackConnector
from connectors.slack.backfill import SlackBackfill
from connectors.slack.payloads import conversation
from lab.standins.slack_standin import BOT_ID, BOT_USER, TEAM, SlackStandIn
from memory import Memory, Principal, UnknownConversation, ValidationError, messages, parse_time

TEST = Principal.operator("test")


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    async with SlackStandIn(names={"U1": "Maya", "U2": "Tom"}, page_size=10) as stand_in:
        yield stand_in


async def connected(memory: Memory, slack: SlackStandIn) -> tuple[ChatService, SlackConnector]:
    service = ChatService(memory)
    connector = SlackConnector(service, SlackConfig("xoxb-standin", slack.signing_secret, slack.api_url))
    service.add_platform(connector)
    await connector.identify()
    return service, connector


async def stored(memory: Memory, channel: str) -> dict[str, str]:
    listed = await messages(memory, conversation(TEAM, channel), principal=TEST)
    assert len(listed) == len({m["message_id"] for m in listed})
    return {str(m["message_id"]): str(m["text"]) for m in listed}


def history_with_everything(slack: SlackStandIn, channel: str) -> str:
    """25 plain messages, a thread with two replies, a deleted parent that kept its
    reply, a bot message, a join notice and the bot's own answer."""
    for n in range(25):
        slack.message(channel, "U1" if n % 2 else "U2", f"Plain message number {n}.")
    parent = slack.message(channel, "U1", "Thread about the venue.")["ts"]
    slack.message(channel, "U2", "Reply one.", thread_ts=parent)
    slack.message(channel, "U1", "Reply two.", thread_ts=parent)
    gone = slack.message(channel, "U2", "A parent deleted later.")["ts"]
    slack.message(channel, "U1", "Its surviving reply.", thread_ts=gone)
    slack.channels[channel][gone].update(subtype="tombstone", text="This message was deleted.", user="USLACKBOT")
    slack.message(channel, "", "Deployed v2.", subtype="bot_message", bot_id="B0DEPLOY", username="Deploys")
    slack.message(channel, "U2", "<@U2> has joined the channel", subtype="channel_join")
    slack.message(channel, BOT_USER, "My own earlier answer.", bot_id=BOT_ID)
    return gone


def expected(slack: SlackStandIn, channel: str) -> dict[str, str]:
    return {
        ts: text
        for ts, text in slack.history(channel).items()
        if slack.channels[channel][ts].get("subtype") not in ("tombstone", "channel_join")
        and slack.channels[channel][ts].get("user") != BOT_USER
    }


async def test_an_interrupted_backfill_continues_and_a_later_one_reads_only_what_is_new(
    memory: Memory, slack: SlackStandIn
) -> None:
    channel = f"C{uuid.uuid4().hex[:8].upper()}"
    gone = history_with_everything(slack, channel)
    service, connector = await connected(memory, slack)
    slack.fail_history_after = 1  # the second page fails: the run stops after one page
    with pytest.raises(SlackApiError):
        await SlackBackfill(service, connector, TEAM, channel).run()
    first = await stored(memory, channel)
    assert 0 < len(first) < len(expected(slack, channel))

    slack.fail_history_after = None
    calls_before = slack.calls["conversations.history"]
    report = await SlackBackfill(service, connector, TEAM, channel).run()
    assert report.resumed_after is not None
    assert report.stored == len(expected(slack, channel)) - len(first)
    assert await stored(memory, channel) == expected(slack, channel)
    assert gone not in await stored(memory, channel)
    assert slack.calls["conversations.history"] - calls_before == 3  # the remaining pages only

    newest = slack.message(channel, "U1", "Posted after the backfill.")["ts"]
    again = await SlackBackfill(service, connector, TEAM, channel).run()
    assert (again.stored, again.resumed_after) == (1, None)
    assert (await stored(memory, channel))[newest] == "Posted after the backfill."
    assert (await SlackBackfill(service, connector, TEAM, channel).run()).stored == 0


async def test_backfill_is_idempotent_with_the_live_stream(memory: Memory, slack: SlackStandIn) -> None:
    channel = f"C{uuid.uuid4().hex[:8].upper()}"
    ref = conversation(TEAM, channel)
    live = slack.message(channel, "U1", "Arrived live first.")
    deleted_live = slack.message(channel, "U2", "Deleted live; the history we read is older.")
    slack.message(channel, "U1", "Only in history.")
    service, connector = await connected(memory, slack)
    await service.accept(MessagePosted(ref, "Ev1", ChatMessage(live["ts"], Author("U1"), live["text"], parse_time(live["ts"]))))
    await service.accept(MessageDeleted(ref, "Ev2", deleted_live["ts"]))
    await service.drain()
    report = await SlackBackfill(service, connector, TEAM, channel).run()
    assert (report.stored, report.duplicate, report.tombstoned) == (1, 1, 1)
    assert set(await stored(memory, channel)) == {live["ts"], *(ts for ts in slack.history(channel) if ts != deleted_live["ts"])}
    assert (await messages(memory, ref, principal=TEST))[0]["speaker"] == "Maya"


@pytest.mark.parametrize("kind", ["im", "mpim"])
async def test_a_direct_message_conversation_is_refused_before_anything_is_read(
    memory: Memory, slack: SlackStandIn, kind: str
) -> None:
    channel = f"{'D' if kind == 'im' else 'C'}{uuid.uuid4().hex[:8].upper()}"  # a group DM's id says nothing
    slack.direct[channel] = kind
    slack.message(channel, "U1", "A private word.")
    service, connector = await connected(memory, slack)
    with pytest.raises(ValidationError, match="direct message"):
        await SlackBackfill(service, connector, TEAM, channel).run()
    assert slack.calls["conversations.history"] == 0
    with pytest.raises(UnknownConversation):
        await stored(memory, channel)


async def test_bot_notices_and_legacy_file_shares_are_backfilled_with_their_text(memory: Memory, slack: SlackStandIn) -> None:
    channel = f"C{uuid.uuid4().hex[:8].upper()}"
    notice = slack.message(
        channel,
        "",
        "",
        subtype="bot_message",
        bot_id="B0JIRA",
        username="Jira",
        attachments=[
            {
                "fallback": "OPS-12 created",
                "title": "OPS-12: Rotate the staging keys",
                "fields": [{"title": "Assignee", "value": "Tom"}],
            }
        ],
    )
    shared = slack.message(channel, "U1", "rota", subtype="file_share", file={"id": "F1", "name": "rota.csv"})
    service, connector = await connected(memory, slack)
    await SlackBackfill(service, connector, TEAM, channel).run()
    rows = {m["message_id"]: m for m in await messages(memory, conversation(TEAM, channel), principal=TEST)}
    assert (rows[notice["ts"]]["role"], rows[notice["ts"]]["text"]) == ("bot", "OPS-12: Rotate the staging keys\nAssignee: Tom")
    assert rows[shared["ts"]]["text"] == "rota\n[shared files: rota.csv]"
