"""Integration: the real discord.Client against the gateway + REST stand-in on loopback,
the chat service and the real memory core on the test Postgres.

Each test gets its own stand-in (a fresh guild, so fresh conversations) and client.
``settle`` waits until the client has read every frame the stand-in sent, the connector
has stored the events and the service has processed them all, so assertions run on a
quiet system rather than after a sleep.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from bot.testing.discord_standin import GUILD_FORUM, MANAGE_GUILD, DiscordStandIn, User
from connectors import admin
from connectors.discord.client import DiscordConnector, DiscordEndpoints
from connectors.discord.payloads import conversation, message_link
from connectors.service import ChatService, ServiceConfig
from memory import Memory, Principal, UnknownConversation, messages
from memory.store.residue import find_tokens

OPERATOR = Principal.operator("test")


@dataclass
class Discord:
    standin: DiscordStandIn
    connector: DiscordConnector
    service: ChatService
    guild: str
    general: str
    random: str
    owner: User
    bob: User
    carol: User
    mod: User

    async def settle(self) -> None:
        client = self.connector.client
        await _until(lambda: client.ws is not None and (client.ws.sequence or 0) >= self.standin.sequence)
        await self.connector.settled()
        await self.service.drain()

    async def stored(self, channel: str) -> dict[str, str]:
        """message id -> text of what memory holds for a channel."""
        try:
            rows = await messages(self.service.memory, conversation(self.guild, channel), principal=OPERATOR)
        except UnknownConversation:
            return {}
        return {str(row["message_id"]): str(row["text"]) for row in rows}

    async def ask(self, channel: str, user: User, question: str) -> dict[str, Any]:
        """Mention the bot; return the reply it posted to that message."""
        asked = await self.standin.post(channel, user, f"<@{self.standin.bot.id}> {question}", mentions=[self.standin.bot])
        await self.settle()
        return next(m for m in self.standin.posted if (m.get("message_reference") or {}).get("message_id") == asked["id"])


async def _until(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.01)


@pytest.fixture
async def discord_env(memory: Memory) -> AsyncIterator[Discord]:
    standin = DiscordStandIn()
    await standin.start()
    owner = User(standin.snowflake(), "olga")
    bob, carol = User(standin.snowflake(), "bob"), User(standin.snowflake(), "carol")
    mod = User(standin.snowflake(), "maya", permissions=MANAGE_GUILD)
    guild = standin.add_guild("Team", owner)
    for user in (bob, carol, mod):
        standin.add_member(guild, user)
    general, random = await standin.add_channel(guild, "general"), await standin.add_channel(guild, "random")
    connector = DiscordConnector(DiscordEndpoints(standin.token, standin.rest_base, standin.gateway_url))
    service = ChatService(memory, [connector], ServiceConfig(admin_ids=frozenset({carol.id})))
    running = asyncio.create_task(connector.run(service.accept))
    await standin.connected()  # parsing needs only the login's user and the guild cache, not READY's 2 s wait
    env = Discord(standin, connector, service, guild, general, random, owner, bob, carol, mod)
    yield env
    await connector.close()
    await asyncio.wait_for(running, 10)
    await standin.stop()


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
    async with memory.sessions() as session:
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
    async with memory.sessions() as session:
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
    assert replies["bob"]["content"] == admin.REFUSAL and replies["bob"]["flags"] == 64
    for name in ("maya", "olga", "carol"):
        assert replies[name]["content"] != admin.REFUSAL and "1 messages stored" in replies[name]["content"]


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
