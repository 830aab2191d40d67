"""How much each community was used lately, so that dirty communities are regenerated
most used first (memory/communities/use.py).

``used_score`` is a count of uses decayed with a 7-day half-life, as it stood at
``used_at`` (NULL: never used); an answer adds one use to each community its evidence
came from (memory.store.communities.record_use). Both columns are plain additions with a
constant default or none: existing communities start unused, and on a distributed
database Citus adds them to every shard.

Revision ID: 0019
Revises: 0017
"""

import sqlalchemy as sa

from alembic import op

revision = "0019"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("communities", sa.Column("used_score", sa.Float, nullable=False, server_default="0"))
    op.add_column("communities", sa.Column("used_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    op.drop_column("communities", "used_at")
    op.drop_column("communities", "used_score")
