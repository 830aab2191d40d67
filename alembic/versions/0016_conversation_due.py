"""When each conversation's background work should next be looked at, so that the
scheduler's discovery reads the conversations that are due through an index instead of
computing every conversation's backlog on every tick (memory.store.backlog).

``due_at`` is a column of the conversation's lock rows: every transaction that takes a
CHAIN or GRAPH lock (every writer: new messages, deletions, edits, consolidation,
community passes) sets it to now on the rows it holds, in the same transaction, so
marking waits on no one (memory.store.locks); discovery clears it when nothing is left,
or moves it to when waiting messages become due. Existing conversations start due, so
the first tick looks at each of them once. A partial index holds the marked rows only.

On a distributed database Citus adds the column and the index to every shard.

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("conversation_locks", sa.Column("due_at", sa.DateTime(timezone=True)))
    op.execute("UPDATE conversation_locks SET due_at = now() WHERE purpose IN (1, 2)")  # CHAIN, GRAPH
    op.create_index("ix_conversation_locks_due", "conversation_locks", ["due_at"], postgresql_where=sa.text("due_at IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_conversation_locks_due", "conversation_locks")
    op.drop_column("conversation_locks", "due_at")
