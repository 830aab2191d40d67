"""Integration: the real discord.Client against the gateway + REST stand-in on loopback,
the chat service and the real memory core on the test Postgres.

Each test gets its own stand-in (a fresh guild, so fresh conversations) and client.
``settle`` waits until the client has read every frame the stand-in sent, the connector
has stored the events and the service has processed them all, so assertions run on a
quiet system rather than after a sleep.
"""

from __future__ import annotations

import random
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import select

from bot.service import running
from bot.settings import ChatSettings, Settings
from connectors import admin
from connectors.discord.client import DiscordConnector
from connectors.discord.payloads import conversation, message_link
from connectors.discord.rest import DiscordEndpoints
from connectors.service import ChatService
from lab.standins.discord_standin import GUILD_FORUM, DiscordStandIn, User, until
from memory import ConfigurationError, Memory, Principal, messages
from memory.store.residue import find_tokens
from memory.store.schema import InboxEvent

if TYPE_CHECKING:
    from tests.conftest import Discord


def _marker() -> str:
    return f"zd{uuid.uuid4().hex[:8]}7"


async def test_mention_answered_citing_links_then_deleted_source_is_never_cited_and_leaves_no_residue(
    discord_env: Discord, memory: Memory
) -> None:
    env, marker = discord_env, _marker()
    source = await env.standin.post(env.general, env.bob, f"The team offsite is in Lisbon at hotel {marker} on March 3.")
    await env.standin.post(env.general, env.owner, "I will bring the projector for the demo.")
    reply = await env.ask(env.general, env.carol, "where is the team offsite?")
    link = message_link(conversation(env.guild, env.general), source["id"])
    assert link in reply["content"] and reply["author"]["id"] == env.standin.bot.id

    await env.standin.delete(env.general, source["id"])
    await env.settle()
    again = await env.ask(env.general, env.carol, "where is the team offsite?")
    assert link not in again["content"] and marker not in again["content"]
    assert source["id"] not in await env.stored(env.general)
    async with memory._sessions() as session:
        assert marker not in await find_tokens(session, marker)


async def test_an_edit_changes_the_answer(discord_env: Discord) -> None:
    env = discord_env
    posted = await env.standin.post(env.general, env.bob, "The weekly standup meeting is at 9am in the blue room.")
    await env.settle()
    await env.standin.edit(env.general, posted["id"], "The weekly standup meeting is at 11am in the green room.")
    reply = await env.ask(env.general, env.carol, "when is the weekly standup meeting?")
    assert "11am" in reply["content"] and "9am" not in reply["content"]
    assert (await env.stored(env.general))[posted["id"]].startswith("The weekly standup meeting is at 11am")


async def test_events_replayed_after_a_resume_are_stored_once(discord_env: Discord) -> None:
    env = discord_env
    first = await env.standin.post(env.general, env.bob, "Deploys are frozen until Friday.")
    await env.standin.edit(env.general, first["id"], "Deploys are frozen until Monday.")
    await env.settle()
    await env.standin.reconnect(replay_overlap=2)  # the create and the edit arrive again
    second = await env.standin.post(env.general, env.bob, "The freeze covers the billing service too.")
    await env.settle()
    assert env.standin.resumes == 1 and env.standin.identifies == 1
    stored = await env.stored(env.general)
    assert sorted(stored) == sorted([first["id"], second["id"]])
    assert stored[first["id"]] == "Deploys are frozen until Monday."


async def test_a_delete_before_its_create_leaves_the_message_unstored(discord_env: Discord) -> None:
    env = discord_env
    late = env.standin.message_payload(env.general, env.bob, "This message was deleted before it arrived.")
    await env.standin.dispatch("MESSAGE_DELETE", {"id": late["id"], "channel_id": env.general, "guild_id": env.guild})
    await env.standin.dispatch("MESSAGE_CREATE", late)
    await env.settle()
    assert late["id"] not in await env.stored(env.general)


async def test_a_burst_of_create_edit_delete_stores_nothing(discord_env: Discord, memory: Memory) -> None:
    env, first, second = discord_env, _marker(), _marker()
    keep = await env.standin.post(env.general, env.owner, "Unrelated message that stays.")
    burst = await env.standin.post(env.general, env.bob, f"codename {first}")
    await env.standin.edit(env.general, burst["id"], f"codename {second}")
    await env.standin.delete(env.general, burst["id"])
    await env.settle()
    assert list(await env.stored(env.general)) == [keep["id"]]
    async with memory._sessions() as session:
        assert not await find_tokens(session, f"{first}|{second}")


async def test_memory_command_is_refused_to_non_admins_and_answered_to_admins_ephemerally(discord_env: Discord) -> None:
    env = discord_env
    await env.standin.post(env.general, env.bob, "The release train leaves on Tuesday.")
    await env.settle()
    replies: dict[str, dict[str, Any]] = {}
    for user in (env.bob, env.mod, env.owner, env.carol):  # user, Manage Guild, owner, configured admin id
        interaction = await env.standin.invoke(env.general, user, "memory", [{"type": 1, "name": "stats", "options": []}])
        await env.standin.wait_for(lambda i=interaction: any(r["interaction_id"] == i for r in env.standin.interaction_replies))
        await env.settle()
        answered = [r for r in env.standin.interaction_replies if r["interaction_id"] == interaction]
        assert answered[0]["type"] == 5 and answered[0]["flags"] == 64  # deferred, ephemeral
        replies[user.name] = answered[-1]
    assert replies["bob"]["content"] == admin.refusal("stats") and replies["bob"]["flags"] == 64
    assert "server" in admin.refusal("stats")  # Discord has servers (guilds), not workspaces
    for name in ("maya", "olga", "carol"):
        assert replies[name]["content"] != admin.refusal("stats") and "1 messages by 1 speakers" in replies[name]["content"]
    await until(lambda: env.connector.connected)  # READY came (discord.py waits 2 s for guilds first)
    assert (await env.service.health())["connectors"] == {"discord": True}


async def test_an_interaction_replayed_after_a_resume_is_neither_answered_nor_run_again(
    discord_env: Discord, memory: Memory
) -> None:
    env = discord_env
    await env.standin.post(env.general, env.bob, "The release train leaves on Tuesday.")
    await env.settle()
    interaction = await env.standin.invoke(env.general, env.owner, "memory", [{"type": 1, "name": "stats", "options": []}])
    await env.standin.wait_for(lambda: env.standin.interaction_replies)  # deferred
    await env.settle()  # answered
    await env.standin.reconnect(replay_overlap=1)  # INTERACTION_CREATE arrives again
    await env.standin.post(env.general, env.bob, "The train has six carriages.")  # the client reads past the replay
    await env.settle()
    assert env.standin.resumes == 1 and env.standin.refused_callbacks == []
    assert [r["type"] for r in env.standin.interaction_replies if r["interaction_id"] == interaction] == [5, "edit"]
    async with memory._sessions() as session:
        rows = (await session.execute(select(InboxEvent.outcome).where(InboxEvent.event_id == f"{interaction}:command"))).all()
    assert [tuple(row) for row in rows] == [("done",)]


async def test_a_question_in_one_channel_never_cites_another(discord_env: Discord) -> None:
    env = discord_env
    other = await env.standin.post(env.random, env.bob, "The parking garage code is 4521 this month.")
    await env.standin.post(env.general, env.bob, "Lunch today is pizza in the kitchen.")
    reply = await env.ask(env.general, env.carol, "what is the parking garage code?")
    assert other["id"] not in reply["content"] and "4521" not in reply["content"]
    assert f"/{env.random}/" not in reply["content"]


async def test_bulk_delete_thread_delete_and_channel_delete_forget(discord_env: Discord) -> None:
    env = discord_env
    kept = await env.standin.post(env.general, env.bob, "Keep this one.")
    gone = [await env.standin.post(env.general, env.bob, f"Spam number {i}.") for i in range(3)]
    forum = await env.standin.add_channel(env.guild, "ideas", kind=GUILD_FORUM)
    post = await env.standin.add_thread(forum, "Dark mode", env.carol)
    thread = await env.standin.add_thread(env.general, "Planning", env.bob)
    await env.standin.post(post, env.carol, "Dark mode should follow the system setting.")
    await env.standin.post(thread, env.bob, "Planning starts next week.")
    await env.settle()
    assert len(await env.stored(post)) == 1 and len(await env.stored(thread)) == 1

    await env.standin.bulk_delete(env.general, [m["id"] for m in gone])
    await env.standin.delete_thread(post)
    await env.settle()
    assert list(await env.stored(env.general)) == [kept["id"]] and await env.stored(post) == {}
    assert len(await env.stored(thread)) == 1

    await env.standin.delete_channel(env.general)  # its thread goes with it
    await env.settle()
    assert await env.stored(thread) == {} and await env.stored(env.general) == {}


async def test_a_refused_token_fails_at_start_with_one_clear_error(memory: Memory) -> None:
    standin = DiscordStandIn()
    await standin.start()
    try:
        endpoints = DiscordEndpoints("not-the-token", standin.rest_base, standin.gateway_url)
        connector = DiscordConnector(ChatService(memory), endpoints)
        with pytest.raises(ConfigurationError, match="DISCORD_BOT_TOKEN was refused"):
            await connector.start()
        assert not connector.connected and standin.identifies == 0
    finally:
        await standin.stop()


async def test_a_burst_of_mixed_events_leaves_memory_equal_to_the_platform(discord_env: Discord) -> None:
    """Creates, edits, deletes and a bulk delete in two channels, sent without waiting,
    with a RESUME that replays the last eight events: memory ends as Discord's history."""
    env, rng = discord_env, random.Random(12)
    live: dict[str, list[str]] = {env.general: [], env.random: []}
    for step in range(30):
        channel = rng.choice([env.general, env.random])
        action = rng.random()
        if action < 0.55 or not live[channel]:
            author = rng.choice([env.bob, env.carol])
            posted = await env.standin.post(channel, author, f"note {step} about topic {rng.randint(1, 9)}")
            live[channel].append(posted["id"])
        elif action < 0.8:
            await env.standin.edit(channel, rng.choice(live[channel]), f"note {step} corrected")
        else:
            gone = live[channel].pop(rng.randrange(len(live[channel])))
            await env.standin.delete(channel, gone)
        if step == 20:
            await env.standin.reconnect(replay_overlap=8)
    doomed = live[env.general][:2]
    await env.standin.bulk_delete(env.general, doomed)
    await env.settle()
    for channel in (env.general, env.random):
        platform = {m["id"]: m["content"] for m in env.standin.history[channel]}
        assert await env.stored(channel) == platform


async def test_serve_runs_the_discord_connector_from_its_settings(memory: Memory) -> None:
    """``stashbird serve``'s process wiring: Discord from DISCORD_* settings, answered
    through the service's own worker, reported by /healthz."""
    standin = DiscordStandIn()
    await standin.start()
    bob = User(standin.snowflake(), "bob")
    guild = standin.add_guild("Serve", bob)
    channel = await standin.add_channel(guild, "general")
    settings = Settings(
        chat=ChatSettings(
            discord_bot_token=standin.token,
            discord_api_base=standin.rest_base,
            discord_gateway_url=standin.gateway_url,
            slack_bot_token=None,
            serve_jobs=False,
        )
    )
    try:
        async with running(memory, settings, "127.0.0.1", 0) as state:
            await standin.connected()
            source = await standin.post(channel, bob, "The quarterly review is on the fifth floor.")
            await standin.post(channel, bob, f"<@{standin.bot.id}> where is the quarterly review?", mentions=[standin.bot])
            reply = await standin.wait_for(lambda: next(iter(standin.posted), None))
            assert source["id"] in reply["content"]
            await until(lambda: state.connectors[0].connected)
            health = await state.service.health()
            assert health["connectors"] == {"discord": True}
    finally:
        await standin.stop()


def alert_embed() -> dict[str, Any]:
    return {
        "type": "rich",
        "title": "Incident opened: checkout latency",
        "description": "p99 above 2 s since 09:40",
        "fields": [{"name": "Owner", "value": "payments team", "inline": True}],
        "footer": {"text": "Statuspage"},
    }


def forwarded(text: str, standin: DiscordStandIn, guild: str) -> dict[str, Any]:
    snapshot = {"type": 0, "content": text, "embeds": [], "attachments": [], "timestamp": "2026-03-02T08:00:00+00:00"}
    snapshot |= {"edited_timestamp": None, "flags": 0, "mentions": [], "mention_roles": []}
    reference = {"type": 1, "message_id": standin.snowflake(), "channel_id": standin.snowflake(), "guild_id": guild}
    return {"message_reference": reference, "message_snapshots": [{"message": snapshot}], "flags": 1 << 14}


async def test_webhook_embeds_and_forwards_are_remembered_from_the_gateway(discord_env: Discord, memory: Memory) -> None:
    env = discord_env
    hook = User(env.standin.snowflake(), "Statuspage", bot=True)
    notice = await env.standin.post(env.general, hook, "", extra={"webhook_id": hook.id, "embeds": [alert_embed()]})
    forward = await env.standin.post(
        env.general, env.bob, "", extra=forwarded("The freeze ends on Monday.", env.standin, env.guild)
    )
    await env.settle()
    stored = await env.stored(env.general)
    assert (
        stored[notice["id"]] == "Incident opened: checkout latency\np99 above 2 s since 09:40\nOwner: payments team\nStatuspage"
    )
    assert stored[forward["id"]] == "[forwarded] The freeze ends on Monday."
    rows = await messages(memory, conversation(env.guild, env.general), principal=Principal.operator("test"))
    assert {row["message_id"]: row["role"] for row in rows} == {notice["id"]: "bot", forward["id"]: "user"}
