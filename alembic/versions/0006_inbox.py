"""The durable inbox of platform events, and connector cursors.

``inbox_events``: every platform event a connector acknowledges is written here first
(memory.store.inbox) and processed from here, so an acknowledged event survives a crash.
Rows are keyed by their conversation (``conversation_id``, then an arrival id): the
inbox shards with the conversation it belongs to, so that processing an event and the
core's writes for it stay on one shard, and ``(conversation_id, event_id)`` is the
durable redelivery check. A finished row keeps its ids (the redelivery check) and loses
its payload (the message text), so nothing of a deleted message stays here.

``connector_cursors``: where a resumable job (a channel backfill) got to, per
conversation and job name.

Revision ID: 0006
Revises: 0002
"""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from alembic import op

revision = "0006"
down_revision = "0002"
branch_labels = None
depends_on = None


def _conversation() -> sa.Column:
    return sa.Column("conversation_id", sa.BigInteger, sa.ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True)


def upgrade() -> None:
    op.create_table(
        "inbox_events",
        _conversation(),
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("event_id", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("message_id", sa.Text),
        sa.Column("payload", pg.JSONB),
        sa.Column("received_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("not_before", sa.DateTime(timezone=True)),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("processed_at", sa.DateTime(timezone=True)),
        sa.Column("outcome", sa.Text),
        sa.Column("error", sa.Text),
        sa.UniqueConstraint("conversation_id", "event_id", name="uq_inbox_event"),
        sa.CheckConstraint("outcome IN ('done', 'rejected', 'failed')", name="ck_inbox_outcome"),
    )
    op.create_index(
        "ix_inbox_events_pending",
        "inbox_events",
        ["conversation_id", "id"],
        postgresql_where=sa.text("processed_at IS NULL"),
    )
    op.create_index("ix_inbox_events_processed", "inbox_events", ["processed_at"])
    op.create_table(
        "connector_cursors",
        _conversation(),
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("value", pg.JSONB, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("connector_cursors")
    op.drop_table("inbox_events")
