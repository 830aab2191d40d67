"""The Discord connector's shell (connectors/discord/client.py): its imports, and replies
posted through discord.py's REST client while the stand-in rate-limits them."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import TYPE_CHECKING

from sqlalchemy import select

from memory import Memory
from memory.store.schema import InboxEvent

if TYPE_CHECKING:
    from tests.conftest import Discord


def test_the_connector_does_not_import_the_process_settings() -> None:
    """Connectors sit below ``bot/``: the client reads its settings through a protocol."""
    probe = "import sys, connectors.discord.client; print(sorted(m for m in sys.modules if m.split('.')[0] == 'bot'))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


POST_MESSAGE = "POST /channels/{id}/messages"


async def test_a_reply_rate_limited_per_route_is_posted_once_when_discord_allows(discord_env: Discord) -> None:
    """discord.py waits out a route's 429 by its ``retry_after``; the reply is posted once."""
    env = discord_env
    await env.standin.post(env.general, env.bob, "The demo is on Thursday in room 4.")
    env.standin.rate_limit(POST_MESSAGE, times=2, retry_after=0.3)
    reply = await env.ask(env.general, env.carol, "when is the demo?")
    assert "Thursday" in reply["content"]
    assert env.standin.limited == [POST_MESSAGE, POST_MESSAGE] and env.standin.early_retries == 0
    assert len(env.standin.posted) == 1


async def test_a_global_rate_limit_holds_every_request_until_it_resets(discord_env: Discord) -> None:
    env = discord_env
    await env.standin.post(env.general, env.bob, "The office closes at six on Fridays.")
    env.standin.rate_limit("*", times=1, retry_after=0.4, scope="global")
    reply = await env.ask(env.general, env.carol, "when does the office close on Fridays?")
    assert "six" in reply["content"] and len(env.standin.posted) == 1
    assert env.standin.limited == [POST_MESSAGE] and env.standin.early_retries == 0


async def test_a_reply_rate_limited_past_discord_py_s_five_tries_is_still_posted(discord_env: Discord, memory: Memory) -> None:
    """discord.py raises after five 429s; the connector keeps waiting as Discord asks
    (here with the service allowed a single attempt, so giving up would lose the reply)."""
    env = discord_env
    env.service.config = dataclasses.replace(env.service.config, max_attempts=1)
    await env.standin.post(env.general, env.bob, "The parking permits renew in April.")
    env.standin.rate_limit(POST_MESSAGE, times=7, retry_after=0.1)
    reply = await env.ask(env.general, env.carol, "when do the parking permits renew?")
    assert "April" in reply["content"] and len(env.standin.posted) == 1
    assert len(env.standin.limited) == 7 and env.standin.early_retries == 0
    asked = f"{reply['message_reference']['message_id']}:create"
    async with memory._sessions() as session:
        outcomes = (await session.execute(select(InboxEvent.outcome).where(InboxEvent.event_id == asked))).scalars().all()
    assert outcomes == ["done"]
