"""An index of each conversation's messages by thread.

A question asked inside a thread searches that thread's messages as one more ranked list
(memory.retrieval.search): without this index, finding a thread's messages reads every
message of the conversation (134K in the largest of ``bench scale``'s 1M). Messages
outside threads are left out of it, so that it stays small in a channel without threads.
Built in the migration's transaction (on Citus, on every shard).

Revision ID: 0025
Revises: 0024
"""

import sqlalchemy as sa

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_episodes_thread", "episodes", ["conversation_id", "thread_id"], postgresql_where=sa.text("thread_id IS NOT NULL")
    )


def downgrade() -> None:
    op.drop_index("ix_episodes_thread", table_name="episodes")
