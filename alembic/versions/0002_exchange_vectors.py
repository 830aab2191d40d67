"""Episode documents are searched by the vector of their exchange.

``episodes.embedding`` keeps a message's own vector; its search document's
``embedding`` becomes the exchange vector, own plus a share of the previous message's
(see memory.episodes.exchange_vectors). Existing episodes are converted in place.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from pgvector.sqlalchemy import Vector

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# The share this revision applies to existing episodes (memory.episodes.exchange_vectors').
PREVIOUS_SHARE = 0.5


def _dim() -> int:
    return int(op.get_bind().execute(sa.text("SELECT value FROM store_settings WHERE key = 'embedding_dim'")).scalar_one())


def upgrade() -> None:
    op.add_column("episodes", sa.Column("embedding", Vector(_dim())))
    op.execute(
        "UPDATE episodes e SET embedding = d.embedding FROM search_documents d WHERE d.kind = 'episode' AND d.ref_id = e.id"
    )
    op.execute(
        "UPDATE search_documents d SET embedding = e.embedding + p.embedding * "
        f"CAST(array_fill(CAST({PREVIOUS_SHARE} AS real), ARRAY[vector_dims(p.embedding)]) AS vector) "
        "FROM episodes e JOIN episodes p ON p.id = e.prev_id "
        "WHERE d.kind = 'episode' AND d.ref_id = e.id AND e.embedding IS NOT NULL AND p.embedding IS NOT NULL"
    )


def downgrade() -> None:
    op.execute(
        "UPDATE search_documents d SET embedding = e.embedding FROM episodes e "
        "WHERE d.kind = 'episode' AND d.ref_id = e.id AND e.embedding IS NOT NULL"
    )
    op.drop_column("episodes", "embedding")
