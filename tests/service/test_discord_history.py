"""Integration: Discord backfill and the missed-deletion sweep over REST against the stand-in (a REST-only client, as
``stashbird backfill`` uses), resumed after an interruption, and idempotent with the live
stream of the gateway client connected to the same stand-in."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import select

from connectors.discord import history
from connectors.discord.payloads import conversation
from connectors.discord.rest import DiscordEndpoints, rest_client
from lab.standins.discord_standin import User
from memory import Memory, Principal, ValidationError, resolve_conversation
from memory.store.schema import Episode

if TYPE_CHECKING:
    from tests.conftest import Discord


class Interrupted(Exception):
    pass


async def test_backfill_resumes_after_an_interruption_and_stores_each_message_once(
    discord_env: Discord, memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = discord_env
    monkeypatch.setattr(history, "PAGE", 10)
    live = await env.standin.post(env.general, env.bob, "The live stream brought this one.")
    await env.settle()
    # Written while the bot was away: in the channel's history, never sent on the gateway.
    missed = [env.standin.message_payload(env.general, env.carol, f"Missed note number {i}.") for i in range(22)]
    notice = {**env.standin.message_payload(env.general, env.bob, "joined"), "type": 7}
    env.standin.history[env.general] += [*missed, notice]
    endpoints = DiscordEndpoints(env.standin.token, env.standin.rest_base, env.standin.gateway_url)

    async with rest_client(endpoints) as client:
        assert client.user is not None
        bot_id = str(client.user.id)

        def stop_after_first_page(count: int) -> None:
            raise Interrupted

        with pytest.raises(Interrupted):
            await history.backfill(memory, client.http, env.general, bot_id, on_page=stop_after_first_page)
        report = await history.backfill(memory, client.http, env.general, bot_id)

    assert report.resumed_after is not None and report.stored == 22 - 9  # the first page held the live one + 9 missed
    assert report.skipped == 1
    stored = await env.stored(env.general)
    assert sorted(stored, key=int) == sorted([live["id"], *(m["id"] for m in missed)], key=int)

    await env.standin.dispatch("MESSAGE_CREATE", missed[0])  # a late live copy of a backfilled message
    await env.settle()
    assert await env.stored(env.general) == stored


async def test_backfill_since_a_date_and_a_channel_that_does_not_exist(discord_env: Discord, memory: Memory) -> None:
    env = discord_env
    ancient = env.standin.snowflake(at_ms=1_600_000_000_000)  # September 2020
    old = env.standin.message_payload(env.random, env.bob, "Ancient history.", message_id=ancient)
    new = env.standin.message_payload(env.random, env.bob, "Recent news.")
    env.standin.history[env.random] += [old, new]
    endpoints = DiscordEndpoints(env.standin.token, env.standin.rest_base, env.standin.gateway_url)
    async with rest_client(endpoints) as client:
        assert client.user is not None
        since = datetime(2024, 1, 1, tzinfo=UTC)
        report = await history.backfill(memory, client.http, env.random, str(client.user.id), since=since)
        with pytest.raises(ValidationError, match="--channel"):
            await history.backfill(memory, client.http, "123456789", str(client.user.id))
    assert report.stored == 1 and list(await env.stored(env.random)) == [new["id"]]


async def test_the_sweep_forgets_deletions_missed_while_offline_and_drops_vanished_channels(
    discord_env: Discord, memory: Memory
) -> None:
    env = discord_env
    kept = await env.standin.post(env.general, env.bob, "The pantry code changed to 7781.")
    missed = await env.standin.post(env.general, env.bob, "Temporary note that was deleted offline.")
    thread = await env.standin.add_thread(env.random, "Ideas", env.carol)
    await env.standin.post(thread, env.carol, "An idea in a thread that vanished.")
    await env.settle()
    await env.standin.delete(env.general, missed["id"], silently=True)  # no gateway event reaches the bot
    env.standin.channels.pop(thread)  # gone from Discord without a THREAD_DELETE seen
    general = await env.connector.sweep(memory, conversation(env.guild, env.general), 7)
    gone = await env.connector.sweep(memory, conversation(env.guild, thread), 7)

    assert general.forgotten == [missed["id"]] and general.checked == 2 and not general.dropped
    assert gone.dropped
    assert list(await env.stored(env.general)) == [kept["id"]] and await env.stored(thread) == {}


async def test_backfill_reads_bot_embeds_forwards_and_edit_times_as_the_live_stream(discord_env: Discord, memory: Memory) -> None:
    env = discord_env
    hook = User(env.standin.snowflake(), "Deploys", bot=True)
    embed = {"type": "rich", "title": "Deployed billing v2.14", "footer": {"text": "ArgoCD"}}
    snapshot = {"type": 0, "content": "Office closed on Friday.", "embeds": [], "attachments": []}
    snapshot |= {"timestamp": "2026-03-02T08:00:00+00:00", "edited_timestamp": None, "mentions": []}
    reference = {"type": 1, "message_id": env.standin.snowflake(), "channel_id": env.random, "guild_id": env.guild}
    edited_at = "2026-03-03T12:00:00+00:00"
    page = [
        env.standin.message_payload(env.general, hook, "", extra={"webhook_id": hook.id, "embeds": [embed]}),
        env.standin.message_payload(
            env.general, env.bob, "", extra={"message_reference": reference, "message_snapshots": [{"message": snapshot}]}
        ),
        env.standin.message_payload(env.general, env.carol, "Standup is at 10 now.", extra={"edited_timestamp": edited_at}),
    ]
    env.standin.history[env.general] += page
    endpoints = DiscordEndpoints(env.standin.token, env.standin.rest_base, env.standin.gateway_url)
    async with rest_client(endpoints) as client:
        assert client.user is not None
        report = await history.backfill(memory, client.http, env.general, str(client.user.id))
    assert report.stored == 3 and report.skipped == 0
    stored = await env.stored(env.general)
    assert [stored[m["id"]] for m in page] == [
        "Deployed billing v2.14\nArgoCD",
        "[forwarded] Office closed on Friday.",
        "Standup is at 10 now.",
    ]
    conversation_id = await resolve_conversation(
        memory, conversation(env.guild, env.general), principal=Principal.operator("test")
    )
    async with memory._sessions() as session:
        edit = await session.scalar(
            select(Episode.edited_at).where(
                Episode.conversation_id == conversation_id, Episode.platform_message_id == page[2]["id"]
            )
        )
    assert edit == datetime(2026, 3, 3, 12, tzinfo=UTC)
