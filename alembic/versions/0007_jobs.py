"""Scheduled work shared by processes, and the state of community builds.

- ``job_claims``: one row per (conversation, claim); a process holds an item while
  ``lease_expires_at`` is in the future, so a process killed mid-job leaves an item that
  becomes claimable again when its lease runs out. Rows are claimed with
  ``FOR UPDATE SKIP LOCKED``. ``conversation_id`` 0 names work tied to no conversation
  (e.g. a VACUUM after deletions), so it carries no foreign key.
- ``job_runs``: the run log (who ran what, when, with which result: counts, never text).
- ``community_state``: per conversation, the entity and relation ids seen by the last
  full community build and by the last incremental pass, for the rebuild threshold.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_claims",
        sa.Column("conversation_id", sa.BigInteger, primary_key=True),
        sa.Column("job", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True)),
        sa.Column("claimed_at", sa.DateTime(timezone=True)),
    )
    op.create_table(
        "job_runs",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("conversation_id", sa.BigInteger, nullable=False),
        sa.Column("job", sa.Text, nullable=False),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False, server_default="running"),
        sa.Column("result", pg.JSONB, nullable=False, server_default="{}"),
        sa.Column("started_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint("status IN ('running', 'ok', 'failed', 'released', 'abandoned')", name="ck_job_run_status"),
    )
    op.create_index("ix_job_runs_scope", "job_runs", ["conversation_id", "job", "id"])
    op.create_table(
        "community_state",
        sa.Column(
            "conversation_id",
            sa.BigInteger,
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("built_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("built_entity_id", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("built_relation_id", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("seen_entity_id", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("seen_relation_id", sa.BigInteger, nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.drop_table("community_state")
    op.drop_index("ix_job_runs_scope", table_name="job_runs")
    op.drop_table("job_runs")
    op.drop_table("job_claims")
