"""The rebuild threshold counts removed relations: ``community_state.changed_entity_ids``
holds the entities whose relations a deletion removed (or restored) since the last full
community build; a new relation's ends are found by id, a removed one leaves no row.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "community_state",
        sa.Column("changed_entity_ids", pg.ARRAY(sa.BigInteger), nullable=False, server_default="{}"),
    )


def downgrade() -> None:
    op.drop_column("community_state", "changed_entity_ids")
