"""Pure rules of the Discord payload parser: properties over generated payloads, no network."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.discord import payloads
from connectors.discord.client import PARSED
from connectors.discord.gateway import intents
from connectors.discord.payloads import ADMINISTRATOR, MANAGE_GUILD, GuildInfo
from connectors.events import (
    AdminCommand,
    ChannelDeleted,
    CitedMessage,
    Mention,
    MessageDeleted,
    MessageEdited,
    MessagePosted,
    MessagesDeleted,
    Reply,
    ReplyTarget,
    WorkspaceChange,
    decode,
    encode,
)
from memory import ValidationError, Workspace

BOT = "900000000000000001"
GUILD = "800000000000000001"
CHANNEL = "700000000000000001"
snowflakes = st.integers(min_value=10**17, max_value=2**62).map(str)
texts = st.text(min_size=1, max_size=80).filter(lambda t: t.strip())


def user(user_id: str = "100000000000000001", name: str = "bob", **extra: Any) -> dict[str, Any]:
    return {"id": user_id, "username": name, "global_name": None, "discriminator": "0", "avatar": None, **extra}


def message(content: str = "hello", message_id: str = "600000000000000001", **extra: Any) -> dict[str, Any]:
    return {
        "id": message_id,
        "channel_id": CHANNEL,
        "guild_id": GUILD,
        "type": 0,
        "content": content,
        "author": user(),
        "member": {"roles": [], "nick": None},
        "timestamp": "2026-03-01T10:00:00.000000+00:00",
        "edited_timestamp": None,
        "mentions": [],
        "attachments": [],
        **extra,
    }


def test_a_message_becomes_a_posted_event_in_its_channels_conversation() -> None:
    [event] = payloads.dispatch("MESSAGE_CREATE", message("Lunch at noon?"), BOT, None)
    assert isinstance(event, MessagePosted)
    assert str(event.conversation) == f"discord:{GUILD}:{CHANNEL}" and event.event_id == "600000000000000001:create"
    assert event.message.text == "Lunch at noon?" and event.message.author.role == "user"
    assert event.message.time == datetime(2026, 3, 1, 10, tzinfo=UTC)


def test_a_mention_of_the_bot_is_a_question_replying_to_that_message() -> None:
    data = message(f"<@!{BOT}>  where is the   offsite?", mentions=[user(BOT, "stashbird", bot=True)])
    [event] = payloads.dispatch("MESSAGE_CREATE", data, BOT, None)
    assert isinstance(event, Mention)
    assert event.question == "where is the offsite?" and event.reply.message_id == data["id"]
    assert event.message.text == "@stashbird  where is the   offsite?"


@given(st.lists(st.sampled_from([f"<@{BOT}>", f"<@!{BOT}>", "word", "<@123>", " ", "\n"]), max_size=12))
def test_a_question_never_keeps_the_bots_mention(parts: list[str]) -> None:
    question = payloads.question_text(" ".join(parts), BOT)
    assert BOT not in question and question == question.strip()


def test_our_own_messages_system_notices_dms_and_empty_messages_are_not_remembered() -> None:
    assert payloads.dispatch("MESSAGE_CREATE", message(author=user(BOT, "stashbird", bot=True)), BOT, None) == []
    assert payloads.dispatch("MESSAGE_CREATE", message(type=7), BOT, None) == []  # member joined
    assert payloads.dispatch("MESSAGE_CREATE", {**message(), "guild_id": None}, BOT, None) == []
    assert payloads.dispatch("MESSAGE_CREATE", message(""), BOT, None) == []


def test_another_bots_message_is_stored_as_bot_and_its_mention_is_not_a_question() -> None:
    data = message(f"<@{BOT}> status?", author=user("555000000000000001", "ci", bot=True))
    [event] = payloads.dispatch("MESSAGE_CREATE", data, BOT, None)
    assert isinstance(event, MessagePosted) and event.message.author.role == "bot"


def test_attachments_and_user_mentions_are_named_in_the_text() -> None:
    data = message(
        "see <@200000000000000002>",
        mentions=[user("200000000000000002", "ann")],
        attachments=[{"id": "1", "filename": "plan.pdf"}],
    )
    assert payloads.message_text(data) == "see @ann [attachment: plan.pdf]"


@pytest.mark.parametrize(
    ("author", "roles", "expected"),
    [
        (user(bot=True), [], "bot"),
        (user("300000000000000003"), [], "admin"),  # the owner
        (user(), ["11"], "admin"),  # Manage Guild
        (user(), ["12"], "admin"),  # Administrator
        (user(), ["13"], "user"),
        (user(), [], "user"),
    ],
)
def test_role_from_the_member(author: dict[str, Any], roles: list[str], expected: str) -> None:
    guild = GuildInfo(GUILD, "300000000000000003", {GUILD: 1024, "11": MANAGE_GUILD, "12": ADMINISTRATOR, "13": 2048})
    assert payloads.member_role(author, {"roles": roles}, guild) == expected


@given(st.integers(min_value=0, max_value=2**50), st.booleans())
def test_interaction_permissions_decide_admin_and_bots_stay_bots(permissions: int, bot: bool) -> None:
    role = payloads.member_role(user(bot=bot), {"permissions": str(permissions)}, None)
    if bot:
        assert role == "bot"
    else:
        assert (role == "admin") == bool(permissions & (MANAGE_GUILD | ADMINISTRATOR))


def test_an_edit_carries_the_whole_new_message_and_an_id_per_edit() -> None:
    first = message("at 9am", edited_timestamp="2026-03-01T10:05:00+00:00")
    second = message("at 11am", edited_timestamp="2026-03-01T10:07:00+00:00")
    [one] = payloads.dispatch("MESSAGE_UPDATE", first, BOT, None)
    [two] = payloads.dispatch("MESSAGE_UPDATE", second, BOT, None)
    assert isinstance(one, MessageEdited) and isinstance(two, MessageEdited)
    assert one.message.text == "at 9am" and two.message.text == "at 11am" and one.event_id != two.event_id
    assert payloads.dispatch("MESSAGE_UPDATE", first, BOT, None) == [one]  # a replay is the same event


def test_updates_that_are_not_text_edits_change_nothing() -> None:
    unfurl = {"id": "600000000000000001", "channel_id": CHANNEL, "guild_id": GUILD, "embeds": [{"type": "link"}]}
    assert payloads.dispatch("MESSAGE_UPDATE", unfurl, BOT, None) == []
    assert payloads.dispatch("MESSAGE_UPDATE", message("pinned", pinned=True), BOT, None) == []


def test_deletes_bulk_deletes_and_channel_and_thread_deletes() -> None:
    [deleted] = payloads.dispatch("MESSAGE_DELETE", {"id": "6", "channel_id": CHANNEL, "guild_id": GUILD}, BOT, None)
    assert isinstance(deleted, MessageDeleted) and deleted.message_id == "6"
    bulk_payload = {"ids": ["9", "7", "8"], "channel_id": CHANNEL, "guild_id": GUILD}
    [bulk] = payloads.dispatch("MESSAGE_DELETE_BULK", bulk_payload, BOT, None)
    assert isinstance(bulk, MessagesDeleted) and bulk.message_ids == ("7", "8", "9")
    guild = GuildInfo(GUILD, thread_parents={"41": CHANNEL, "42": "999"})
    gone = payloads.dispatch("CHANNEL_DELETE", {"id": CHANNEL, "guild_id": GUILD, "type": 0}, BOT, guild)
    assert [str(e.conversation) for e in gone] == [f"discord:{GUILD}:{CHANNEL}", f"discord:{GUILD}:41"]
    assert all(isinstance(e, ChannelDeleted) for e in gone)
    [thread] = payloads.dispatch("THREAD_DELETE", {"id": "41", "guild_id": GUILD, "parent_id": CHANNEL, "type": 11}, BOT, None)
    assert str(thread.conversation) == f"discord:{GUILD}:41"


@given(st.lists(snowflakes, min_size=1, max_size=20, unique=True), st.randoms())
def test_a_bulk_delete_is_the_same_event_whatever_the_order_of_its_ids(ids: list[str], random: Any) -> None:
    shuffled = list(ids)
    random.shuffle(shuffled)
    data = {"channel_id": CHANNEL, "guild_id": GUILD}
    assert payloads.messages_deleted({**data, "ids": ids}) == payloads.messages_deleted({**data, "ids": shuffled})


payload_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=20),
    snowflakes,
    st.just("2026-03-01T10:00:00+00:00"),
    st.lists(snowflakes, max_size=3),
    st.just(user()),
    st.just([{"id": BOT}]),
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])  # drawing is slow on a loaded machine, not wrong
@given(
    st.sampled_from(sorted(PARSED)),
    st.dictionaries(
        st.sampled_from(
            [
                "id",
                "channel_id",
                "guild_id",
                "type",
                "content",
                "author",
                "timestamp",
                "edited_timestamp",
                "mentions",
                "ids",
                "member",
                "attachments",
            ]
        ),
        payload_values,
    ),
)
def test_any_payload_gives_events_or_a_validation_error_and_events_survive_the_inbox(name: str, fields: dict[str, Any]) -> None:
    data = {**message(), **fields} if name.startswith("MESSAGE_C") or name == "MESSAGE_UPDATE" else fields
    try:
        events = payloads.dispatch(name, data, BOT, None)
    except ValidationError:
        return
    for event in events:
        if isinstance(event, WorkspaceChange):  # stored as events of its conversations (ChatService.accept)
            assert event.workspace.platform == "discord" and event.event_id
            continue
        kind, stored = encode(event)
        assert decode(event.conversation, kind, stored) == event


def test_the_memory_command_is_an_admin_command_with_an_ephemeral_reply_handle() -> None:
    interaction = {
        "id": "51",
        "type": 2,
        "token": "tok",
        "application_id": "52",
        "guild_id": GUILD,
        "channel_id": CHANNEL,
        "member": {"user": user(), "nick": "Bobby", "permissions": str(MANAGE_GUILD)},
        "data": {
            "name": "memory",
            "options": [{"type": 1, "name": "about", "options": [{"type": 3, "name": "name", "value": "Maya Lee"}]}],
        },
    }
    event = payloads.admin_command(interaction)
    assert isinstance(event, AdminCommand)
    assert event.text == "about Maya Lee" and event.user.role == "admin" and event.user.name == "Bobby"
    assert event.reply.ephemeral and event.reply.handle == {"interaction_id": "51", "token": "tok", "application_id": "52"}
    assert payloads.admin_command({**interaction, "data": {"name": "other"}}) is None
    assert payloads.admin_command({**interaction, "guild_id": None}) is None


@given(st.text(max_size=3000), st.integers(min_value=0, max_value=40), st.booleans(), st.booleans())
def test_a_reply_fits_one_discord_message_and_keeps_whole_links(text: str, cited: int, ephemeral: bool, notes: bool) -> None:
    ref = payloads.conversation(GUILD, CHANNEL)
    when = datetime(2026, 3, 1, tzinfo=UTC)
    citations = tuple(
        CitedMessage(
            str(10**17 + i), "bob", when, f"E{i}", i % 3 == 1, CitedMessage(str(10**18 + i), "ann", when) if i % 3 == 1 else None
        )
        for i in range(cited)
    )
    reply = Reply(
        ref,
        ReplyTarget(message_id="61", ephemeral=ephemeral),
        text,
        "answer",
        citations,
        12,
        ("answer model unavailable",) if notes else (),
    )
    body = payloads.reply_body(reply)
    assert len(body["content"]) <= payloads.MESSAGE_LIMIT
    links = re.findall(r"https://discord\.com/channels/\S*", body["content"])
    assert all(re.fullmatch(rf"https://discord\.com/channels/{GUILD}/{CHANNEL}/\d{{18,19}}\)?", link) for link in links)
    assert body["content"].endswith("-# answer 12")
    assert body["allowed_mentions"] == {"parse": []}
    assert (body.get("flags") == 64) == ephemeral and ("message_reference" in body) != ephemeral


def test_a_reply_shows_who_said_what_when_with_message_links_and_the_correction() -> None:
    ref = payloads.conversation(GUILD, CHANNEL)
    when, later = datetime(2026, 3, 1, 12, tzinfo=UTC), datetime(2026, 3, 2, tzinfo=UTC)
    sources = (
        CitedMessage("71", "bob_*", when, "E2", True, CitedMessage("72", "ann", later)),
        CitedMessage("70", "cy", when, "E1"),
    )
    body = payloads.reply_body(Reply(ref, ReplyTarget(message_id="61"), "The offsite is in Porto [E2][E1].", "answer", sources))
    base = f"https://discord.com/channels/{GUILD}/{CHANNEL}"
    assert body["content"].splitlines() == [
        "The offsite is in Porto [1] [2].",
        f"1. **bob\\_\\***, <t:{int(when.timestamp())}:f> {base}/71 (outdated; corrected by **ann**, "
        f"<t:{int(later.timestamp())}:f> {base}/72)",
        f"2. **cy**, <t:{int(when.timestamp())}:f> {base}/70",
    ]


def test_snowflake_times_round_trip() -> None:
    moment = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
    assert payloads.snowflake_time(payloads.snowflake_at(moment)) == moment


# Shapes from Discord's message, embed and message snapshot objects (our own fixtures).
WEBHOOK = "410000000000000001"


def github_push() -> dict[str, Any]:
    """A webhook's commit notice: no content, everything in one rich embed."""
    return message(
        "",
        webhook_id=WEBHOOK,
        author={"id": WEBHOOK, "username": "GitHub", "avatar": None, "discriminator": "0000", "bot": True},
        embeds=[
            {
                "type": "rich",
                "title": "[stashbird:main] 2 new commits",
                "url": "https://github.com/example/stashbird/compare/a1b2c3d...d4e5f6a",
                "description": (
                    "[`a1b2c3d`](https://github.com/x) Fix the sweep guard - maya\n"
                    "[`d4e5f6a`](https://github.com/y) Bump aiohttp - tom"
                ),
                "color": 7506394,
                "author": {"name": "maya", "url": "https://github.com/maya", "icon_url": "https://example.org/a.png"},
            }
        ],
    )


def test_a_webhook_message_whose_content_is_an_embed_is_stored_as_a_bots_with_its_text() -> None:
    [event] = payloads.dispatch("MESSAGE_CREATE", github_push(), BOT, None)
    assert isinstance(event, MessagePosted) and event.message.author.role == "bot"
    assert event.message.text.splitlines() == [
        "maya",
        "[stashbird:main] 2 new commits",
        "[`a1b2c3d`](https://github.com/x) Fix the sweep guard - maya",
        "[`d4e5f6a`](https://github.com/y) Bump aiohttp - tom",
    ]


def test_a_bot_alert_reads_its_fields_and_footer_and_a_webhook_author_without_bot_is_a_bot() -> None:
    alert = {
        "type": "rich",
        "title": "Deploy failed",
        "fields": [
            {"name": "Service", "value": "billing", "inline": True},
            {"name": "\u200b", "value": "Rollback started at 14:02"},
        ],
        "footer": {"text": "PagerDuty", "icon_url": "https://example.org/p.png"},
        "timestamp": "2026-03-01T14:02:00.000Z",
    }
    author = {"id": WEBHOOK, "username": "alerts", "avatar": None}  # a webhook's author: no bot flag
    data = message("", webhook_id=WEBHOOK, author=author, embeds=[alert])
    chat = payloads.chat_message(data)
    assert chat.author.role == "bot"
    assert chat.text == "Deploy failed\nService: billing\nRollback started at 14:02\nPagerDuty"


def test_a_bots_answer_to_a_slash_command_is_remembered() -> None:
    data = message("", type=20, author=user("555000000000000001", "tickets", bot=True), embeds=[{"title": "Ticket #41 opened"}])
    [event] = payloads.dispatch("MESSAGE_CREATE", data, BOT, None)
    assert isinstance(event, MessagePosted) and event.message.text == "Ticket #41 opened"


def test_link_previews_are_not_part_of_what_a_person_wrote() -> None:
    preview = {"type": "article", "title": "Ten tips for gardens", "description": "Click here", "url": "https://example.org"}
    assert payloads.chat_message(message("read https://example.org", embeds=[preview])).text == "read https://example.org"


def forward(**snapshot: Any) -> dict[str, Any]:
    """A forwarded message: no content of its own, the original in ``message_snapshots``."""
    original = {
        "type": 0,
        "content": "",
        "embeds": [],
        "attachments": [],
        "timestamp": "2026-02-27T08:00:00.000000+00:00",
        "edited_timestamp": None,
        "flags": 0,
        "mentions": [],
        "mention_roles": [],
        **snapshot,
    }
    reference = {"type": 1, "message_id": "600000000000000099", "channel_id": "700000000000000099", "guild_id": GUILD}
    return message("", message_reference=reference, message_snapshots=[{"message": original}], flags=1 << 14)


def test_a_forward_is_stored_with_the_forwarded_text_and_files_marked_forwarded() -> None:
    data = forward(
        content="The offsite moved to <@200000000000000002>'s place in Porto",
        mentions=[user("200000000000000002", "ann")],
        attachments=[{"id": "3", "filename": "agenda.pdf", "size": 1200, "url": "https://cdn.example/agenda.pdf"}],
    )
    [event] = payloads.dispatch("MESSAGE_CREATE", data, BOT, None)
    assert isinstance(event, MessagePosted)
    assert event.message.text == "[forwarded] The offsite moved to @ann's place in Porto [attachment: agenda.pdf]"
    assert event.message.author.id == "100000000000000001" and event.message.reply_to is None  # not a reply
    assert payloads.dispatch("MESSAGE_CREATE", forward(), BOT, None) == []  # nothing forwarded, nothing to remember
    bot_notice = forward(embeds=[{"type": "rich", "title": "Build 212 green"}])
    assert payloads.chat_message(bot_notice).text == "[forwarded] Build 212 green"


def test_a_reply_still_refers_to_its_message_and_history_carries_the_edit_time() -> None:
    reference = {"type": 0, "message_id": "600000000000000002", "channel_id": CHANNEL, "guild_id": GUILD}
    reply = payloads.chat_message(message("yes", type=19, message_reference=reference))
    assert reply.reply_to == "600000000000000002" and reply.edited_at is None
    edited = payloads.chat_message(message("moved to 11", edited_timestamp="2026-03-01T11:30:00.000000+00:00"))
    assert edited.edited_at == datetime(2026, 3, 1, 11, 30, tzinfo=UTC)


def test_members_leaving_and_the_bot_removed_or_back_are_workspace_changes() -> None:
    server = Workspace("discord", GUILD)
    user = {"id": "600000000000000002", "username": "bob", "global_name": None, "avatar": None}
    left = payloads.dispatch("GUILD_MEMBER_REMOVE", {"guild_id": GUILD, "user": user}, BOT, None, "s1:7")
    assert left == [WorkspaceChange(server, "600000000000000002:member-removed:s1:7", "member_left", "600000000000000002")]
    ours = {"guild_id": GUILD, "user": {"id": BOT, "username": "stashbird", "bot": True}}
    assert payloads.dispatch("GUILD_MEMBER_REMOVE", ours, BOT, None, "s1:8") == []  # our removal is GUILD_DELETE's
    with pytest.raises(ValidationError, match="user.id"):
        payloads.dispatch("GUILD_MEMBER_REMOVE", {"guild_id": GUILD}, BOT, None, "s1:9")

    assert payloads.dispatch("GUILD_DELETE", {"id": GUILD, "unavailable": True}, BOT, None, "s1:10") == []  # an outage
    removed = WorkspaceChange(server, f"{GUILD}:guild-delete:s1:11", "bot_removed")
    assert payloads.dispatch("GUILD_DELETE", {"id": GUILD}, BOT, None, "s1:11") == [removed]
    assert payloads.dispatch("GUILD_DELETE", {"id": GUILD, "unavailable": False}, BOT, None, "s1:11") == [removed]
    joined = {"id": GUILD, "name": "Team", "joined_at": "2026-03-01T09:00:00.000000+00:00", "channels": []}
    back = WorkspaceChange(server, f"{GUILD}:guild-create:2026-03-01T09:00:00.000000+00:00", "bot_added")
    assert payloads.dispatch("GUILD_CREATE", joined, BOT, None, "s2:1") == [back]
    assert payloads.dispatch("GUILD_CREATE", joined, BOT, None, "s3:1") == [back]  # every reconnect: the same event
    old = payloads.dispatch("GUILD_CREATE", {"id": GUILD}, BOT, None, "s3:2")  # no joined_at: the delivery names it
    assert [e.event_id for e in old if isinstance(e, WorkspaceChange)] == [f"{GUILD}:guild-create:s3:2"]
    assert {"GUILD_MEMBER_REMOVE", "GUILD_DELETE", "GUILD_CREATE"} <= PARSED


def test_the_members_intent_is_asked_for_only_when_a_leave_is_acted_on() -> None:
    assert not intents().members and intents(members=True).members
    assert intents().message_content and intents(members=True).guilds
