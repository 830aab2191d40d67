"""Multi-workspace Slack: the installations (one bot token per workspace, or per Enterprise
Grid org for an org-wide install) and the OAuth states of the install flow. The memory
core writes them (``memory.AppInstallations``, tables ``slack_installations``,
``slack_bots``, ``slack_oauth_states``); here are the adapters Bolt's OAuth flow calls
(slack_sdk's ``AsyncInstallationStore`` and ``AsyncOAuthStateStore``), turning its
``Installation`` and ``Bot`` into column rows and back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.installation_store.models.bot import Bot
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore

from memory import AppInstallations

INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
# What deploy/slack-manifest.yml asks for: the install flow requests the same.
BOT_SCOPES = (
    "app_mentions:read",
    "channels:history",
    "channels:read",
    "chat:write",
    "commands",
    "groups:history",
    "groups:read",
    "users:read",
)
STATE_SECONDS = 600


@dataclass(frozen=True)
class OAuthConfig:
    """Multi-workspace mode: the app's OAuth credentials and what an uninstall does (the
    secret and the URL, which may hold a password, left out of the repr)."""

    client_id: str
    client_secret: str = field(repr=False)
    database_url: str = field(repr=False)
    forget_on_uninstall: bool = False  # drop a workspace's memory when the app is removed from it


def authorize_url(api_url: str) -> str:
    """Slack's authorize page beside its Web API (``…/api/`` → ``…/oauth/v2/authorize``). Pure."""
    return urljoin(api_url if api_url.endswith("/") else api_url + "/", "../oauth/v2/authorize")


def _bot(row: dict[str, Any]) -> Bot:
    """A stored bot row as slack_sdk's ``Bot``. Pure."""
    names = ("app_id", "enterprise_id", "enterprise_name", "team_id", "team_name", "bot_token", "bot_id", "bot_user_id")
    more = ("bot_scopes", "bot_refresh_token", "bot_token_expires_at", "is_enterprise_install", "installed_at")
    return Bot(**{name: row[name] for name in (*names, *more)})


class _InstallationStore(AsyncInstallationStore):
    """Where Bolt's OAuth flow saves an install (the connector's own authorization looks
    the bots up: Bolt calls nothing else here)."""

    def __init__(self, installations: AppInstallations) -> None:
        self.installations = installations

    async def async_save(self, installation: Installation) -> None:
        await self.installations.save(installation.to_dict(), installation.to_bot().to_dict())


class _StateStore(AsyncOAuthStateStore):
    """The install flow's states, each valid for ``STATE_SECONDS`` and used once."""

    def __init__(self, installations: AppInstallations) -> None:
        self.installations = installations

    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        return await self.installations.issue_state(STATE_SECONDS)

    async def async_consume(self, state: str) -> bool:
        return await self.installations.consume_state(state)


class Installations:
    """The stores Bolt is given, and the one lookup the connector needs: the bot of a workspace."""

    def __init__(self, config: OAuthConfig) -> None:
        self.installations = AppInstallations(config.database_url, config.client_id)
        self.store = _InstallationStore(self.installations)
        self.states = _StateStore(self.installations)

    async def bot(self, team: str, enterprise: str | None = None) -> Bot | None:
        """The newest bot installed for ``team``: its own install, else the org-wide
        install of ``enterprise`` (or, when the enterprise is not known, of any org)."""
        row = await self.installations.bot(team, enterprise)
        return None if row is None else _bot(row)

    async def remove(self, team: str | None, enterprise: str | None) -> None:
        """Every installation and bot of a workspace (or of an org-wide install)."""
        await self.installations.remove(team, enterprise)

    async def close(self) -> None:
        await self.installations.close()
