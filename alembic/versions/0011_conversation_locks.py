"""Conversation locks as rows, so that they hold across the nodes of a Citus cluster.

Until now a conversation was locked with ``pg_advisory_xact_lock(purpose, conversation)``
(or the session-level ``pg_try_advisory_lock`` for its inbox). Advisory locks live in
the memory of the server that took them: under Citus, two processes connected to two
different nodes would both get the lock. A row lock on a distributed table is taken on
the shard that holds the row, whichever node the statement came through, so
``memory.store.locks`` now locks the conversation's row of the purpose here
(``SELECT ... FOR UPDATE``). Rows are made on first use; this migration makes those of
the existing conversations.

No foreign key to ``conversations``: dropping a conversation would then have to delete
its lock rows, and would wait for the lock held by whoever drops it (a channel deletion
is processed under the conversation's inbox lock). The rows of a dropped conversation
hold two numbers and stay; conversation ids are never reused.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# memory.store.locks.LockPurpose: CHAIN, GRAPH, INBOX
_PURPOSES = "{1,2,4}"


def upgrade() -> None:
    op.create_table(
        "conversation_locks",
        sa.Column("conversation_id", sa.BigInteger, nullable=False),
        sa.Column("purpose", sa.SmallInteger, nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "purpose", name="pk_conversation_locks"),
    )
    op.execute(
        "INSERT INTO conversation_locks (conversation_id, purpose) "
        f"SELECT c.id, p FROM conversations c CROSS JOIN unnest(CAST('{_PURPOSES}' AS smallint[])) AS p"
    )


def downgrade() -> None:
    op.drop_table("conversation_locks")
