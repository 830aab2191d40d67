"""Discord over REST: where Discord is (``DiscordEndpoints``, read from the settings
through a protocol), logging in, a client without a gateway, and a request posted
however long Discord rate-limits it. Apart from the connector (connectors.discord.client)
because backfill and the sweep from the CLI use it with no gateway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route
from pydantic import SecretStr

from connectors.discord.gateway import intents
from memory import ConfigurationError

log = logging.getLogger(__name__)

# How long a reply waits out Discord's rate limits (beyond discord.py's own five tries)
# before the failure goes to the service's retries: a reply is posted late, not given up.
REPLY_PATIENCE = 300.0


@dataclass(frozen=True)
class DiscordEndpoints:
    """Where Discord is: the REST base and gateway URL differ behind a rate-limit proxy
    (nirn-proxy) and in tests (the loopback stand-in). The token is left out of the repr."""

    token: str = field(repr=False)
    api_base: str
    gateway_url: str

    def apply(self) -> None:
        """discord.py reads both from class attributes: one Discord per process."""
        Route.BASE = self.api_base.rstrip("/")
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.gateway_url)


async def post(client: discord.Client, route: Route, body: dict[str, Any]) -> None:
    """One REST request, however long Discord rate-limits it (up to ``REPLY_PATIENCE``).
    discord.py waits out each 429 itself (per route and global, by ``retry_after``),
    but raises after five tries; then this waits as Discord asks and tries again."""
    waited = 0.0
    while True:
        try:
            await client.http.request(route, json=body)
            return
        except discord.HTTPException as error:
            wait = retry_after(error.response.headers) if error.status == 429 else None
            if wait is None or waited + wait > REPLY_PATIENCE:
                raise
            log.info("Discord still rate-limits %s %s: trying again in %.2fs", route.method, route.path, wait)
            await asyncio.sleep(wait)
            waited += wait


def retry_after(headers: Mapping[str, str]) -> float:
    """Seconds a 429 asks to wait: ``X-RateLimit-Reset-After`` (precise), else
    ``Retry-After`` (whole seconds), else one second."""
    for name in ("X-RateLimit-Reset-After", "Retry-After"):
        try:
            return max(0.0, float(headers[name]))
        except (KeyError, ValueError):
            continue
    return 1.0


async def login(client: discord.Client, token: str) -> None:
    """Log in over REST; a token Discord refuses closes the client and says so."""
    try:
        await client.login(token)
    except discord.LoginFailure:
        await client.close()
        raise ConfigurationError("DISCORD_BOT_TOKEN was refused by Discord (401): check the bot token") from None


@asynccontextmanager
async def rest_client(endpoints: DiscordEndpoints) -> AsyncIterator[discord.Client]:
    """A client logged in over REST only, no gateway (backfill, the sweep from the CLI)."""
    endpoints.apply()
    client = discord.Client(intents=intents())
    await login(client, endpoints.token)
    try:
        yield client
    finally:
        await client.close()


class DiscordSettings(Protocol):
    """The settings the connector reads (``bot.settings.Settings`` has them); a protocol,
    so that connectors do not import the process's settings."""

    @property
    def discord_bot_token(self) -> SecretStr | None: ...

    @property
    def discord_api_base(self) -> str: ...

    @property
    def discord_gateway_url(self) -> str: ...


def endpoints_from(settings: DiscordSettings) -> DiscordEndpoints:
    """The endpoints the settings name; without a bot token the connector cannot start."""
    if not settings.discord_bot_token:
        raise ConfigurationError("DISCORD_BOT_TOKEN is not set: the Discord connector needs the bot's token")
    token = settings.discord_bot_token.get_secret_value()
    return DiscordEndpoints(token, settings.discord_api_base, settings.discord_gateway_url)
