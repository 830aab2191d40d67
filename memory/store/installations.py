"""The writer of the Slack app's installations (multi-workspace mode): the only module
that writes ``slack_installations``, ``slack_bots`` and ``slack_oauth_states``
(tests/architecture/test_writers.py). Rows are plain column dictionaries; turning slack_sdk's
``Installation`` and ``Bot`` into them, and back, is the connector's
(connectors/slack/installations.py, the adapter Bolt's OAuth flow calls).

``AppInstallations`` has an engine of its own without a pool: the connector uses it from
two event loops (the HTTP thread's, where Bolt runs the OAuth redirect, and the
service's, where replies are posted), and an asyncpg connection belongs to the loop that
opened it. Lookups are cached in the connector, so a connection per lookup is rare.
These are the app's credentials, not memory: no principal, no audit row.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, desc, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memory.store.database import create_engine
from memory.store.schema import SlackBot, SlackInstallation, SlackOAuthState

Row = dict[str, Any]


def _naive_utc(value: datetime | None) -> datetime | None:
    """The columns hold naive UTC times, as slack_sdk's stores write them."""
    return value.astimezone(UTC).replace(tzinfo=None) if value is not None and value.tzinfo else value


async def _save(connection: AsyncConnection, model: type[SlackInstallation] | type[SlackBot], row: Row) -> None:
    """Insert the row, or update the one of the same app, org, workspace and install time."""
    values = {**row, **{k: _naive_utc(v) for k, v in row.items() if isinstance(v, datetime)}}
    same = and_(
        model.client_id == values["client_id"],
        model.enterprise_id.is_not_distinct_from(values.get("enterprise_id")),
        model.team_id.is_not_distinct_from(values.get("team_id")),
        model.installed_at == values.get("installed_at"),
    )
    found = (await connection.execute(select(model.id).where(same).limit(1))).scalar()
    if found is None:
        await connection.execute(insert(model).values(**values))
    else:
        await connection.execute(update(model).where(model.id == found).values(**values))


class AppInstallations:
    """The Slack app's installations and OAuth states on the memory's database."""

    def __init__(self, database_url: str, client_id: str) -> None:
        self.client_id = client_id
        self.engine: AsyncEngine = create_engine(database_url, pool_size=None)

    async def save(self, installation: Row, bot: Row | None) -> None:
        """An install (and its bot): its columns but ``client_id``, which is the app's."""
        async with self.engine.begin() as connection:
            await _save(connection, SlackInstallation, {**installation, "client_id": self.client_id})
            if bot is not None:
                await _save(connection, SlackBot, {**bot, "client_id": self.client_id})

    async def bot(self, team: str | None, enterprise: str | None = None) -> Row | None:
        """The newest bot installed for ``team``: its own install, else the org-wide
        install of ``enterprise`` (or, when the enterprise is not known, of any org)."""
        org = and_(
            SlackBot.is_enterprise_install.is_(True),
            SlackBot.enterprise_id == enterprise if enterprise else SlackBot.enterprise_id.is_not(None),
        )
        query = (
            select(SlackBot.__table__)
            .where(SlackBot.client_id == self.client_id, or_(SlackBot.team_id == team, org))
            .order_by(SlackBot.team_id.is_(None), desc(SlackBot.installed_at))  # the workspace's own first
            .limit(1)
        )
        async with self.engine.connect() as connection:
            row = (await connection.execute(query)).mappings().first()
        return None if row is None else dict(row)

    async def remove(self, team: str | None, enterprise: str | None) -> None:
        """Every installation and bot of a workspace (or of an org-wide install)."""
        async with self.engine.begin() as connection:
            for model in (SlackInstallation, SlackBot):
                scope = (
                    model.team_id == team
                    if team
                    else and_(model.enterprise_id == enterprise, model.is_enterprise_install.is_(True))
                )
                await connection.execute(delete(model).where(model.client_id == self.client_id, scope))

    async def issue_state(self, seconds: float) -> str:
        """A new state of the install flow, valid for ``seconds``."""
        state = str(uuid.uuid4())
        expire_at = _naive_utc(datetime.now(UTC) + timedelta(seconds=seconds))
        async with self.engine.begin() as connection:
            await connection.execute(insert(SlackOAuthState).values(state=state, expire_at=expire_at))
        return state

    async def consume_state(self, state: str) -> bool:
        """Whether ``state`` was issued and has not expired; used once."""
        now = _naive_utc(datetime.now(UTC))
        async with self.engine.begin() as connection:
            used = await connection.execute(
                delete(SlackOAuthState)
                .where(SlackOAuthState.state == state, SlackOAuthState.expire_at > now)
                .returning(SlackOAuthState.id)
            )
            return used.first() is not None

    async def close(self) -> None:
        await self.engine.dispose()
