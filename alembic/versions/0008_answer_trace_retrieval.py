"""Answer traces keep how the evidence was found: resolved times and, per evidence
item, its kind, record id, scores and the episodes it showed (ids and numbers only, so
a deleted message leaves no text here), for the audit's ``explain``.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("answer_traces", sa.Column("retrieval", pg.JSONB, nullable=False, server_default="{}"))


def downgrade() -> None:
    op.drop_column("answer_traces", "retrieval")
