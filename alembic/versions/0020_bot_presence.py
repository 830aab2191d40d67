"""When the bot was removed from a conversation: ``conversations.bot_left_at``.

Set when the platform says the bot left a channel or a server (memory/commands/presence.py),
cleared when it is added back; while it is set, nothing new is stored there, on any path
(``memory.ingest`` checks it). ``conversations`` is a reference table on Citus; a column
added to it is added on every node.

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("conversations", sa.Column("bot_left_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    op.drop_column("conversations", "bot_left_at")
