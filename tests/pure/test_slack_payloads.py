"""Slack payloads to normalised events: pure, no network (payloads shaped as the Events
API documents them)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.events import (
    BotPresence,
    ChannelDeleted,
    CitedMessage,
    Mention,
    MessageDeleted,
    MessageEdited,
    MessagePosted,
    Reply,
    ReplyTarget,
    WorkspaceChange,
)
from connectors.slack import payloads
from connectors.slack.render import render_reply
from memory import ConversationRef, ValidationError, Workspace

BOT = "U0BOT"


def envelope(event: dict, event_id: str = "Ev1") -> dict:
    return {
        "team_id": "T1",
        "event_id": event_id,
        "type": "event_callback",
        "event": {"channel": "C1", **event},
        "authorizations": [{"team_id": "T1", "user_id": BOT, "is_bot": True}],
    }


def test_a_plain_message_is_posted_with_its_thread() -> None:
    [event] = payloads.to_events(
        envelope({"type": "message", "user": "U1", "text": "hi", "ts": "1700000000.000200", "thread_ts": "1700000000.000100"})
    )
    assert isinstance(event, MessagePosted)
    assert event.conversation == ConversationRef("slack", "T1", "C1")
    assert event.event_id == "Ev1"
    message = event.message
    assert (message.id, message.author.id, message.author.name, message.author.role) == ("1700000000.000200", "U1", None, None)
    assert message.thread_id == message.reply_to == "1700000000.000100"
    assert message.time == datetime.fromtimestamp(1700000000.0002, UTC)


def test_file_shares_carry_file_names_and_bot_messages_are_bots() -> None:
    [shared] = payloads.to_events(
        envelope(
            {
                "type": "message",
                "subtype": "file_share",
                "user": "U1",
                "text": "deck",
                "ts": "1.0",
                "files": [{"name": "Q3.pdf"}, {"title": "notes"}],
            }
        )
    )
    assert shared.message.text == "deck\n[shared files: Q3.pdf, notes]"
    [bot] = payloads.to_events(
        envelope(
            {"type": "message", "subtype": "bot_message", "bot_id": "B1", "username": "Deploys", "text": "deployed", "ts": "2.0"}
        )
    )
    assert (bot.message.author.id, bot.message.author.name, bot.message.author.role) == ("B1", "Deploys", "bot")


@pytest.mark.parametrize("subtype", ["channel_join", "channel_topic", "channel_leave", "pinned_item"])
def test_housekeeping_is_not_conversation(subtype: str) -> None:
    assert payloads.to_events(envelope({"type": "message", "subtype": subtype, "user": "U1", "text": "x", "ts": "1.0"})) == []


def test_edits_deletes_and_tombstones() -> None:
    old = {"type": "message", "user": "U1", "text": "Lisbon", "ts": "1.0"}
    [edit] = payloads.to_events(
        envelope(
            {
                "type": "message",
                "subtype": "message_changed",
                "previous_message": old,
                "message": {**old, "text": "Porto", "edited": {"user": "U1", "ts": "5.0"}},
            }
        )
    )
    assert isinstance(edit, MessageEdited) and edit.message.text == "Porto" and edit.message.id == "1.0"
    assert edit.edited_at == datetime.fromtimestamp(5.0, UTC)
    unfurl = {
        "type": "message",
        "subtype": "message_changed",
        "previous_message": old,
        "message": {**old, "attachments": [{"title": "preview"}]},
    }
    assert payloads.to_events(envelope(unfurl)) == []
    [gone] = payloads.to_events(envelope({"type": "message", "subtype": "message_deleted", "deleted_ts": "1.0"}))
    assert isinstance(gone, MessageDeleted) and gone.message_id == "1.0"
    tombstone = {"subtype": "tombstone", "ts": "1.0", "text": "This message was deleted."}
    [parent] = payloads.to_events(
        envelope({"type": "message", "subtype": "message_changed", "previous_message": old, "message": tombstone})
    )
    assert isinstance(parent, MessageDeleted) and parent.message_id == "1.0"
    [channel] = payloads.to_events(envelope({"type": "channel_deleted"}))
    assert isinstance(channel, ChannelDeleted)


def test_a_mention_arriving_twice_is_one_event() -> None:
    text = f"<@{BOT}> where is the offsite?"
    [first] = payloads.to_events(envelope({"type": "app_mention", "user": "U1", "text": text, "ts": "3.0"}, "Ev1"))
    [second] = payloads.to_events(envelope({"type": "message", "user": "U1", "text": text, "ts": "3.0"}, "Ev2"))
    assert isinstance(first, Mention) and isinstance(second, Mention)
    assert first.event_id == second.event_id == "mention:3.0"
    assert first.question == "where is the offsite?"
    assert first.reply.message_id == "3.0"
    other = payloads.to_events(envelope({"type": "message", "user": "U1", "text": "<@U2> hi", "ts": "4.0"}))
    assert isinstance(other[0], MessagePosted)


def test_an_envelope_without_ids_is_refused() -> None:
    with pytest.raises(ValidationError, match="event_id"):
        payloads.to_events({"team_id": "T1", "event": {"type": "message"}})


def test_a_slash_command_is_an_ephemeral_admin_command() -> None:
    command = payloads.to_admin_command(
        {
            "team_id": "T1",
            "channel_id": "C1",
            "user_id": "U1",
            "text": "about Maya",
            "trigger_id": "t.1",
            "response_url": "http://x/respond",
        }
    )
    assert command.text == "about Maya" and command.event_id == "command:t.1"
    assert command.reply.ephemeral and command.reply.handle == {"response_url": "http://x/respond"}
    with pytest.raises(ValidationError, match="user_id"):
        payloads.to_admin_command({"team_id": "T1", "channel_id": "C1", "trigger_id": "t"})


def test_a_reply_renders_the_answer_line_numbered_sources_with_dates_and_permalinks() -> None:
    when, later = datetime(2026, 3, 2, 9, 30, tzinfo=UTC), datetime(2026, 3, 4, tzinfo=UTC)
    fixed = CitedMessage("3.0", "Ann", later)
    sources = (
        CitedMessage("2.0", "Bob", when, "E3", outdated=True, correction=fixed),
        CitedMessage("1.0", "Maya & co", when, "E1.2"),
    )
    reply = Reply(
        ConversationRef("slack", "T1", "C1"),
        ReplyTarget(),
        "Porto <not Lisbon> [E1.2, E3] [E9]",
        "answer",
        sources,
        answer_id=7,
        notes=("rerank unavailable",),
    )
    links = {"1.0": "https://x/p1", "2.0": "https://x/p2", "3.0": "https://x/p3"}
    stamp = int(when.timestamp())
    assert render_reply(reply, links).splitlines() == [
        "Porto &lt;not Lisbon&gt; [2, 1]",
        f"1. *Bob*, <!date^{stamp}^{{date_short_pretty}} {{time}}^https://x/p2|02 Mar 2026 09:30 UTC> (outdated; "
        f"corrected by *Ann*, <!date^{int(later.timestamp())}^{{date_short_pretty}} {{time}}^https://x/p3|"
        "04 Mar 2026 00:00 UTC>)",
        f"2. *Maya &amp; co*, <!date^{stamp}^{{date_short_pretty}} {{time}}^https://x/p1|02 Mar 2026 09:30 UTC>",
        "_note: rerank unavailable_",
        "_answer 7_",
    ]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["type", "text", "elements", "fields"]), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(blocks=JSON, attachments=JSON)
def test_any_blocks_or_attachments_a_bot_sends_read_as_text_without_raising(blocks: object, attachments: object) -> None:
    message = {"type": "message", "subtype": "bot_message", "bot_id": "B1", "text": "", "ts": "1.0"}
    text = payloads.message_text(
        {**message, "blocks": blocks, "attachments": attachments if isinstance(attachments, list) else []}
    )
    assert isinstance(text, str) and text == text.strip()


def test_a_persons_link_unfurl_is_not_an_edit() -> None:
    said = {"type": "message", "user": "U1", "text": "see <https://x.test>", "ts": "1.0"}
    unfurled = {**said, "attachments": [{"from_url": "https://x.test", "title": "X", "text": "The X site"}]}
    body = envelope({"type": "message", "subtype": "message_changed", "message": unfurled, "previous_message": said})
    assert payloads.to_events(body) == []
    assert payloads.message_text(unfurled) == "see <https://x.test>"


def test_a_delete_naming_no_message_is_refused_by_name() -> None:
    with pytest.raises(ValidationError, match="deleted_ts"):
        payloads.to_events(envelope({"type": "message", "subtype": "message_deleted", "ts": "2.0"}))
    [deleted] = payloads.to_events(
        envelope({"type": "message", "subtype": "message_deleted", "ts": "2.0", "previous_message": {"ts": "1.0"}})
    )
    assert isinstance(deleted, MessageDeleted) and deleted.message_id == "1.0"


@pytest.mark.parametrize("kind", ["im", "mpim"])
def test_direct_messages_are_refused_whole(kind: str) -> None:
    assert payloads.refusal(envelope({"type": "message", "channel_type": kind})) == payloads.DIRECT_REFUSAL
    assert payloads.refusal(envelope({"type": "message", "channel_type": "channel"})) is None


def test_the_bot_removed_from_a_channel_or_added_back_in_every_shape() -> None:
    removed = ConversationRef("slack", "T1", "C1")
    shapes = [
        ({"type": "channel_left", "channel": "C1", "actor_id": "U9", "event_ts": "1.0"}, False),
        ({"type": "group_left", "channel": "C1", "actor_id": "U9"}, False),
        ({"type": "member_left_channel", "user": BOT, "channel": "C1", "channel_type": "C", "team": "T1"}, False),
        ({"type": "member_joined_channel", "user": BOT, "channel": "C1", "channel_type": "C", "inviter": "U9"}, True),
        ({"type": "channel_joined", "channel": {"id": "C1", "name": "general", "created": 1}}, True),  # the channel object
        ({"type": "group_joined", "channel": {"id": "C1"}}, True),
    ]
    for event, present in shapes:
        body = envelope(event)
        body["event"] = event  # as sent: channel_joined's channel is the object, not an id
        assert payloads.to_events(body) == [BotPresence(removed, "Ev1", present)], event["type"]
    someone = {"type": "member_left_channel", "user": "U2", "channel": "C1", "channel_type": "C"}
    assert payloads.to_events(envelope(someone)) == []  # a member leaving a channel is not leaving the workspace
    unknown_bot = {**envelope({"type": "member_left_channel", "user": BOT}), "authorizations": []}  # an old envelope
    assert payloads.to_events(unknown_bot) == []
    assert payloads.to_events(unknown_bot, bot_user=BOT) == [BotPresence(removed, "Ev1", False)]
    with pytest.raises(ValidationError, match="channel"):
        payloads.to_events({**envelope({}), "event": {"type": "channel_left"}})
    assert {"channel_left", "member_joined_channel", "user_change"} <= set(payloads.MEMBERSHIP_EVENTS)


def test_a_deactivated_account_is_a_member_leaving_the_workspace() -> None:
    def change(user: object) -> list[object]:
        return list(payloads.to_events({**envelope({}), "event": {"type": "user_change", "user": user, "event_ts": "2.0"}}))

    left = WorkspaceChange(Workspace("slack", "T1"), "Ev1", "member_left", "U2")
    assert change({"id": "U2", "team_id": "T1", "deleted": True, "profile": {"real_name": "Tom"}}) == [left]
    assert change({"id": "U2", "deleted": False, "profile": {"title": "new title"}}) == []  # a profile edit
    assert change({"id": "U2", "profile": {}}) == []  # an old frame without ``deleted``
    assert change("U2") == []  # not an object
    with pytest.raises(ValidationError, match="user.id"):
        change({"deleted": True})
