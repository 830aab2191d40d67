"""Indexes for the audit's counts and name matching on large conversations: each count
of ``stats`` and the name list of ``about`` becomes an index-only scan, instead of a
scan of the entity and relation rows (an entity row carries its 1.5 KB name vector).

Revision ID: 0009
Revises: 0003
"""

from alembic import op

revision = "0009"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX ix_entities_names ON entities (conversation_id) INCLUDE (id, name) WHERE NOT is_anchor")
    op.execute("CREATE INDEX ix_entities_anchors ON entities (conversation_id) WHERE is_anchor")
    op.create_index("ix_relations_conversation_status", "relations", ["conversation_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_relations_conversation_status", "relations")
    op.execute("DROP INDEX ix_entities_anchors")
    op.execute("DROP INDEX ix_entities_names")
