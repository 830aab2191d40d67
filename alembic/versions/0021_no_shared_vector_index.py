"""No vector index over every conversation on one server.

memory.store.vector_indexes says why: no search could use it (a conversation large
enough for its share of it to serve has an index of its own) while every insert, edit
and deletion paid for it. On a database with the ``citus`` extension it stays: each
shard's serves the conversations of that shard.

Revision ID: 0021
Revises: 0020
"""

from sqlalchemy import text

from alembic import op
from memory.store.vector_indexes import SHARED_INDEX

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_CITUS = "SELECT count(*) FROM pg_extension WHERE extname = 'citus'"
# As it stood at this revision (the columns were ``vector`` until 0023).
_SHARED_INDEX_SQL = f"CREATE INDEX IF NOT EXISTS {SHARED_INDEX} ON search_documents USING hnsw (embedding vector_cosine_ops)"


def upgrade() -> None:
    if not op.get_bind().execute(text(_CITUS)).scalar():
        op.execute(f"DROP INDEX IF EXISTS {SHARED_INDEX}")


def downgrade() -> None:
    op.execute(_SHARED_INDEX_SQL)
