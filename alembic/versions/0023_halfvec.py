"""The store's vectors as ``halfvec``: two bytes per dimension instead of four.

Every vector column, ``vector(dim)`` until now, becomes ``halfvec(dim)`` (pgvector 0.7 or
later): a message's own vector (``episodes.embedding``), the entities' name vectors, the
relation links' fact vectors (``relation_provenance.embedding``) and what is searched
(``search_documents.embedding``). Each value is rounded to half precision (about three
significant digits); cosine distances, and so the search's order, barely move
(docs/architecture/data-model.md has the measured figures). A server whose ``vector``
extension is older than 0.7 is refused in one line that says what to do.

An HNSW index of ``vector_cosine_ops`` cannot outlive the change, so first:

- the conversations' own vector indexes (memory.store.vector_indexes, one server) are
  dropped. The scheduler builds them again with ``halfvec_cosine_ops`` after each
  conversation's next consolidation run (``memory.index_conversation``: nothing to do
  for a conversation below ``own_index_rows(kind)`` documents). Meanwhile a large
  conversation's searches scan its documents exactly, as a small one's always do:
  correct, but slower the larger it is (35-40 ms at 13,700 messages, where its own index
  served in 3 ms). A conversation that gets no new message keeps the exact scan until
  ``memory.index_conversation`` is called for it; no command of the command line does;
- the shared index (Citus keeps one, migration 0021) is dropped and made again here with
  ``halfvec_cosine_ops``, in the migration's transaction: every shard's index is built
  anew, with the server's ``maintenance_work_mem``, before the migration ends.

Another index over an embedding column (one made by hand) is not ours to drop: the
migration refuses, naming it. Each ALTER rewrites its table under an exclusive lock, so
the store is unavailable while it runs (time grows with the store; a distributed table's
shards are rewritten one after another). The full-text indexes are not touched.

The downgrade makes the columns ``vector(dim)`` again (with the half-precision values:
the dropped digits do not come back) and the shared index, where there was one, of
``vector_cosine_ops``; the own indexes are again left to the scheduler.

Revision ID: 0023
Revises: 0022
"""

import sqlalchemy as sa

from alembic import op
from memory.errors import ConfigurationError
from memory.store.database import halfvec_refusal
from memory.store.vector_indexes import SHARED_INDEX, made_at_run_time

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

# Every vector column of the store.
TABLES = ("episodes", "entities", "relation_provenance", "search_documents")

# The indexes over those columns: the conversations' own, the shared one, or made by hand.
_INDEXES = sa.text(
    "SELECT c.relname, t.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "JOIN pg_class t ON t.oid = i.indrelid "
    "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
    "WHERE t.relname = ANY(:tables) AND t.relnamespace = CAST(current_schema() AS regnamespace) "
    "AND a.attname = 'embedding' ORDER BY 1"
)
_VERSION = sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
_DIM = sa.text("SELECT value FROM store_settings WHERE key = 'embedding_dim'")


def _drop_vector_indexes() -> bool:
    """Drop the run-time vector indexes over the vector columns; whether the shared one was there."""
    found = op.get_bind().execute(_INDEXES, {"tables": list(TABLES)}).all()
    foreign = [f"{name} on {table}" for name, table in found if not made_at_run_time(name)]
    if foreign:
        raise ConfigurationError(
            f"migration 0023 changes the vector columns to halfvec and would have to drop {', '.join(foreign)}, "
            "which Stashbird did not make: drop it (or make it again after the migration), then start again"
        )
    for name, _ in found:
        op.execute(f'DROP INDEX "{name}"')
    return SHARED_INDEX in {name for name, _ in found}


def _convert(type_: str, opclass: str) -> None:
    dim = int(op.get_bind().execute(_DIM).scalar_one())
    shared = _drop_vector_indexes()
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE {type_}({dim}) USING CAST(embedding AS {type_}({dim}))")
    if shared:  # Citus (0021): every shard's index, built now
        op.execute(f"CREATE INDEX {SHARED_INDEX} ON search_documents USING hnsw (embedding {opclass})")


def upgrade() -> None:
    refusal = halfvec_refusal(op.get_bind().execute(_VERSION).scalar())
    if refusal is not None:
        raise ConfigurationError(refusal)
    _convert("halfvec", "halfvec_cosine_ops")


def downgrade() -> None:
    _convert("vector", "vector_cosine_ops")
