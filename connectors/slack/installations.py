"""Multi-workspace Slack: the installations (one bot token per workspace, or per Enterprise
Grid org for an org-wide install) and the OAuth states of the install flow, on our
Postgres through slack_sdk's async SQLAlchemy stores (tables ``slack_installations``,
``slack_bots``, ``slack_oauth_states``, created by our migrations, not by the stores).

Why an engine of its own without a pool: the stores are used from two event loops (the
HTTP thread's, where Bolt authorizes each request and runs the OAuth redirect, and the
service's, where replies are posted), and an asyncpg connection belongs to the loop that
opened it. Lookups are cached in the connector, so a connection per lookup is rare.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin

from slack_sdk.oauth.installation_store.models.bot import Bot
from slack_sdk.oauth.installation_store.sqlalchemy import AsyncSQLAlchemyInstallationStore, SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import AsyncSQLAlchemyOAuthStateStore
from sqlalchemy import and_, delete, desc, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

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
    """Multi-workspace mode: the app's OAuth credentials and what an uninstall does."""

    client_id: str
    client_secret: str
    database_url: str
    forget_on_uninstall: bool = False  # drop a workspace's memory when the app is removed from it


def authorize_url(api_url: str) -> str:
    """Slack's authorize page beside its Web API (``…/api/`` → ``…/oauth/v2/authorize``). Pure."""
    return urljoin(api_url if api_url.endswith("/") else api_url + "/", "../oauth/v2/authorize")


class Installations:
    """The stores, and the one lookup the connector needs: the bot of a workspace."""

    def __init__(self, config: OAuthConfig) -> None:
        self.engine: AsyncEngine = create_async_engine(config.database_url, poolclass=NullPool)
        self.store = AsyncSQLAlchemyInstallationStore(config.client_id, self.engine)
        self.states = AsyncSQLAlchemyOAuthStateStore(STATE_SECONDS, self.engine)

    async def bot(self, team: str, enterprise: str | None = None) -> Bot | None:
        """The newest bot installed for ``team``: its own install, else the org-wide
        install of ``enterprise`` (or, when the enterprise is not known, of any org)."""
        bots = self.store.bots
        c = bots.c
        org = and_(
            c.is_enterprise_install.is_(True), c.enterprise_id == enterprise if enterprise else c.enterprise_id.isnot(None)
        )
        query = (
            select(bots)
            .where(c.client_id == self.store.client_id, or_(c.team_id == team, org))
            .order_by(c.team_id.is_(None), desc(c.installed_at))  # the workspace's own first
            .limit(1)
        )
        async with self.engine.connect() as connection:
            row = (await connection.execute(query)).mappings().first()
        return None if row is None else SQLAlchemyInstallationStore.build_bot_entity(row)

    async def remove(self, team: str | None, enterprise: str | None) -> None:
        """Every installation and bot of a workspace (or of an org-wide install)."""
        for table in (self.store.installations, self.store.bots):
            c = table.c
            scope = c.team_id == team if team else and_(c.enterprise_id == enterprise, c.is_enterprise_install.is_(True))
            async with self.engine.begin() as connection:
                await connection.execute(delete(table).where(c.client_id == self.store.client_id, scope))

    async def close(self) -> None:
        await self.engine.dispose()
