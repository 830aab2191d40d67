"""A relation's ends indexed within its conversation, with its status and id: ``about``
reads an entity's newest current relations per end (``ORDER BY id DESC LIMIT``) and counts
them, which for a speaker, the end of thousands of relations, read and sorted every one of
them through the single-column indexes; these serve every lookup by end those did (each
query names the conversation), so they replace them.

Revision ID: 0013
Revises: 0012
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_relations_subject_status", "relations", ["conversation_id", "subject_id", "status", "id"])
    op.create_index("ix_relations_object_status", "relations", ["conversation_id", "object_id", "status", "id"])
    op.drop_index("ix_relations_subject", "relations")
    op.drop_index("ix_relations_object", "relations")


def downgrade() -> None:
    op.create_index("ix_relations_object", "relations", ["object_id"])
    op.create_index("ix_relations_subject", "relations", ["subject_id"])
    op.drop_index("ix_relations_object_status", "relations")
    op.drop_index("ix_relations_subject_status", "relations")
