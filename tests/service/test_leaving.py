"""When people and the bot leave, live through both connectors (the real slack-bolt and
discord.py clients against their stand-ins) and the core: a member who leaves with
STASHBIRD_ON_MEMBER_LEAVE=forget is forgotten across the workspace; the bot removed
from a channel or a server stops storing there (a late event, an import: not stored)
until it is added back, and with STASHBIRD_ON_BOT_REMOVED=forget the channel's memory is
dropped; a Discord outage (``unavailable``) is not a removal."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Set
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from bot.service import Running, running
from bot.settings import Settings
from connectors.discord.payloads import conversation as discord_conversation
from connectors.service import ServiceConfig
from connectors.slack.payloads import conversation
from lab.standins.discord_standin import DiscordStandIn
from lab.standins.slack_standin import BOT_USER, SlackStandIn, service_settings
from memory import (
    ConversationRef,
    Memory,
    Principal,
    UnknownConversation,
    ingest,
    messages,
    set_bot_present,
    store_audit,
    validate_message,
)

TEST = Principal.operator("test")
TEAM = f"TL{uuid.uuid4().hex[:8].upper()}"
LEAVER = f"UL{uuid.uuid4().hex[:8].upper()}"


async def stored(memory: Memory, ref: ConversationRef) -> set[str]:
    try:
        return {str(m["text"]) for m in await messages(memory, ref, principal=TEST)}
    except UnknownConversation:
        return set()


async def test_while_the_bot_is_out_nothing_is_stored_on_any_path_until_it_is_back(memory: Memory) -> None:
    ref = ConversationRef("local", "", f"presence-{uuid.uuid4().hex[:8]}")
    event = Principal.event("Ev-left")
    assert await set_bot_present(memory, ref, False, principal=event)  # a conversation not in memory yet: created, marked
    assert not await set_bot_present(memory, ref, False, principal=event)  # already out
    late = validate_message({"id": "1", "author": "ann", "text": "Said while the bot was out.", "ts": "2026-03-01T09:00:00Z"})
    report = await ingest(memory, ref, [late], principal=TEST)
    assert (report.stored, report.bot_removed, report.attempted) == (0, 1, 1)
    assert await stored(memory, ref) == set()
    assert await set_bot_present(memory, ref, True, principal=event)
    assert (await ingest(memory, ref, [late], principal=TEST)).stored == 1
    unknown = ConversationRef("local", "", f"presence-{uuid.uuid4().hex[:8]}")
    assert not await set_bot_present(memory, unknown, True, principal=event)  # back where it never was: nothing


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    """A workspace of its own (the member's forgetting reaches all of it), knowing the leaver."""
    async with SlackStandIn(team=TEAM, tokens={"xoxb-standin": TEAM}, names={"U1": "Maya", LEAVER: "Lee"}) as stand_in:
        yield stand_in


@pytest.fixture
async def forgetting(memory: Memory, slack: SlackStandIn) -> AsyncIterator[Running]:
    """``serve`` with STASHBIRD_ON_MEMBER_LEAVE=forget and STASHBIRD_ON_BOT_REMOVED=forget."""
    chat = service_settings(slack).chat.model_copy(update={"on_member_leave": "forget", "on_bot_removed": "forget"})
    async with running(memory, Settings(chat=chat), "127.0.0.1", 0) as state:
        slack.events_url = f"http://127.0.0.1:{state.port}/slack/events"
        yield state


async def test_live_slack_a_deactivated_member_is_forgotten_and_a_removed_bot_forgets_the_channel(
    forgetting: Running, slack: SlackStandIn, memory: Memory
) -> None:
    from test_slack_integration import settle

    general, other = conversation(TEAM, "CGENERAL"), conversation(TEAM, "COTHER")

    async def settled() -> None:  # read only once the service is done: a drop is under way otherwise
        await settle(memory, forgetting, ["CGENERAL", "COTHER"], team=TEAM)

    await slack.post("CGENERAL", "U1", "The offsite is in Porto.")
    await slack.post("CGENERAL", LEAVER, "I booked the Porto train.")
    await slack.post("COTHER", LEAVER, "My desk is by the window.")
    await settled()
    assert (len(await stored(memory, general)), len(await stored(memory, other))) == (2, 1)

    profile_edit = {"type": "user_change", "user": {"id": LEAVER, "deleted": False, "profile": {"title": "PM"}}}
    assert (await slack.deliver(slack.envelope(profile_edit))).status == 200
    deactivated = {"type": "user_change", "user": {"id": LEAVER, "team_id": TEAM, "deleted": True}}
    assert (await slack.deliver(slack.envelope(deactivated))).status == 200
    await settled()
    assert await stored(memory, other) == set()
    assert await stored(memory, general) == {"The offsite is in Porto."}  # everywhere in the workspace, theirs only

    # Someone else leaving the channel is nothing; the bot removed from it drops the channel's memory.
    someone = {"type": "member_left_channel", "user": "U1", "channel": "CGENERAL", "channel_type": "C", "team": TEAM}
    assert (await slack.deliver(slack.envelope(someone))).status == 200
    await settled()
    assert await stored(memory, general) == {"The offsite is in Porto."}
    removed = {"type": "member_left_channel", "user": BOT_USER, "channel": "CGENERAL", "channel_type": "C", "team": TEAM}
    assert (await slack.deliver(slack.envelope(removed))).status == 200
    await slack.post("CGENERAL", "U1", "A late delivery after the removal.")
    await settled()
    assert await stored(memory, general) == set()
    assert (await slack.deliver(slack.envelope({"type": "channel_joined", "channel": {"id": "CGENERAL"}}))).status == 200
    await slack.post("CGENERAL", "U1", "Back: the offsite moved to Braga.")
    await settled()
    assert await stored(memory, general) == {"Back: the offsite moved to Braga."}


async def test_live_discord_a_member_who_leaves_is_forgotten_and_the_bot_removed_stops_remembering(
    discord_worlds: Callable[..., AbstractAsyncContextManager[Any]], memory: Memory
) -> None:
    async with discord_worlds(DiscordStandIn(), config=ServiceConfig(on_member_leave="forget")) as env:
        assert env.standin.intents & (1 << 1)  # asked for the members intent: the setting needs it
        general = discord_conversation(env.guild, env.general)
        await env.standin.post(env.general, env.carol, "The release train leaves on Thursday.")
        await env.standin.post(env.general, env.bob, "I will miss the release train.")
        await env.settle()
        await env.standin.remove_member(env.guild, env.bob)
        await env.settle()
        assert await stored(memory, general) == {"The release train leaves on Thursday."}

        await env.standin.remove_bot(env.guild, outage=True)  # unavailable: an outage, not a removal
        await env.standin.add_bot(env.guild)
        await env.standin.post(env.general, env.carol, "Stored through the outage.")
        await env.settle()
        assert "Stored through the outage." in await stored(memory, general)

        await env.standin.remove_bot(env.guild)
        await env.settle()
        await env.standin.post(env.general, env.carol, "Sent after the removal.")  # a late event
        await env.settle()
        kept: Set[str] = await stored(memory, general)
        assert "Sent after the removal." not in kept and len(kept) == 2  # stop: what was stored stays
        await env.standin.add_bot(env.guild)
        await env.standin.post(env.general, env.carol, "Back in the server.")
        await env.settle()
        assert "Back in the server." in await stored(memory, general)
        rows = (await store_audit(memory, principal=TEST)).entries
        logged = [(e.action, e.principal.split(":")[0]) for e in rows if e.details.get("author") == env.bob.id]
        assert logged == [("forget_author", "event")]  # the member's forgetting, by the leave event


async def test_the_members_intent_is_not_asked_for_by_default(discord_env: Any) -> None:
    assert not (discord_env.standin.intents or 0) & (1 << 1)
