"""Multi-workspace Slack: the tables of slack_sdk's async SQLAlchemy installation and
OAuth state stores (``connectors/slack/installations.py``), with the columns those stores
read and write. Created here, not by the stores' ``create_tables``, so that the schema has
one owner. Small and read by every process: reference tables on Citus.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def _bot_columns() -> list[sa.Column]:
    return [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("client_id", sa.String(32), nullable=False),
        sa.Column("app_id", sa.String(32), nullable=False),
        sa.Column("enterprise_id", sa.String(32)),
        sa.Column("enterprise_name", sa.String(200)),
        sa.Column("team_id", sa.String(32)),
        sa.Column("team_name", sa.String(200)),
        sa.Column("bot_token", sa.String(200)),
        sa.Column("bot_id", sa.String(32)),
        sa.Column("bot_user_id", sa.String(32)),
        sa.Column("bot_scopes", sa.String(1000)),
        sa.Column("bot_refresh_token", sa.String(200)),
        sa.Column("bot_token_expires_at", sa.DateTime),
    ]


def _end_columns() -> list[sa.Column]:
    return [
        sa.Column("is_enterprise_install", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("installed_at", sa.DateTime, nullable=False, server_default=sa.func.now()),
    ]


def upgrade() -> None:
    op.create_table(
        "slack_installations",
        *_bot_columns(),
        sa.Column("enterprise_url", sa.String(200)),
        sa.Column("user_id", sa.String(32), nullable=False),
        sa.Column("user_token", sa.String(200)),
        sa.Column("user_scopes", sa.String(1000)),
        sa.Column("user_refresh_token", sa.String(200)),
        sa.Column("user_token_expires_at", sa.DateTime),
        sa.Column("incoming_webhook_url", sa.String(200)),
        sa.Column("incoming_webhook_channel", sa.String(200)),
        sa.Column("incoming_webhook_channel_id", sa.String(200)),
        sa.Column("incoming_webhook_configuration_url", sa.String(200)),
        sa.Column("token_type", sa.String(32)),
        *_end_columns(),
    )
    op.create_index(
        "slack_installations_idx", "slack_installations", ["client_id", "enterprise_id", "team_id", "user_id", "installed_at"]
    )
    op.create_table("slack_bots", *_bot_columns(), *_end_columns())
    op.create_index("slack_bots_idx", "slack_bots", ["client_id", "enterprise_id", "team_id", "installed_at"])
    op.create_table(
        "slack_oauth_states",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("state", sa.String(200), nullable=False),
        sa.Column("expire_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("slack_oauth_states")
    op.drop_table("slack_bots")
    op.drop_table("slack_installations")
