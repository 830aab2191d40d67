"""The store-wide audit log: who did what to the store as a whole, or to what outlives a
conversation's own audit log (a dropped conversation, a person across conversations,
an opt-out). The per-conversation ``audit_log`` cascades from its conversation, so a
``drop_conversation`` could not be recorded there; this table has no conversation key
and names the conversation (or the platform and workspace) in text.

Small and written rarely: a reference table on Citus (readable and writable through any
node, as the conversations are); ``memory.store.citus.reference_new_table`` makes it one
on a database ``citus-plan`` distributed already, and the plan does on any other.

Revision ID: 0018
Revises: 0016
"""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from alembic import op
from memory.store.citus import reference_new_table

revision = "0018"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "store_audit_log",
        sa.Column("id", sa.BigInteger, primary_key=True),  # bigserial: a sequence, not an identity column
        sa.Column("principal", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("platform", sa.Text),
        sa.Column("workspace_id", sa.Text),
        sa.Column("channel_id", sa.Text),
        sa.Column("details", pg.JSONB, nullable=False, server_default="{}"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index("ix_store_audit_log_created", "store_audit_log", ["created_at"])
    op.create_index("ix_store_audit_log_where", "store_audit_log", ["platform", "workspace_id", "channel_id", "created_at"])
    reference_new_table(op.get_bind(), "store_audit_log")


def downgrade() -> None:
    op.drop_table("store_audit_log")
