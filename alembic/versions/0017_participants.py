"""Participants decide: who opted out of being remembered, and how long a conversation
keeps its messages.

- ``participant_optouts``: one row per person (platform user id) who opted out in one
  workspace (a Slack team, a Discord guild), with when and by whom. A row is the flag:
  opting back in deletes it. A person is one person across every conversation of the
  workspace, so the table has no conversation key: small, read by every node that
  ingests, a reference table on Citus (``reference_new_table`` makes it one on a
  database ``citus-plan`` distributed already; the plan does on any other).
- ``conversation_retention``: a conversation's own retention window, overriding the
  store's default (``STASHBIRD_RETENTION_DAYS``); ``days`` NULL keeps everything (the
  window is off for this conversation whatever the default). Per conversation, so
  distributed with the others (``distribute_new_table``, then its foreign key).

Revision ID: 0017
Revises: 0018
"""

import sqlalchemy as sa

from alembic import op
from memory.store.citus import distribute_new_table, reference_new_table

revision = "0017"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "participant_optouts",
        sa.Column("platform", sa.Text, primary_key=True),
        sa.Column("workspace_id", sa.Text, primary_key=True),
        sa.Column("platform_user_id", sa.Text, primary_key=True),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("set_by", sa.Text, nullable=False),
    )
    reference_new_table(op.get_bind(), "participant_optouts")
    op.create_table(
        "conversation_retention",
        sa.Column("conversation_id", sa.BigInteger, primary_key=True),
        sa.Column("days", sa.Integer),
        sa.Column("set_by", sa.Text, nullable=False),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint("days IS NULL OR days > 0", name="ck_conversation_retention_days"),
    )
    distribute_new_table(op.get_bind(), "conversation_retention")
    op.create_foreign_key(
        "fk_conversation_retention_conversation",
        "conversation_retention",
        "conversations",
        ["conversation_id"],
        ["id"],
        ondelete="CASCADE",
    )


def downgrade() -> None:
    op.drop_table("conversation_retention")
    op.drop_table("participant_optouts")
