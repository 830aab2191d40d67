"""The store's vectors as ``halfvec``: two bytes per dimension instead of four.

Every vector column, ``vector(dim)`` until now, becomes ``halfvec(dim)`` (pgvector 0.7 or
later): a message's own vector (``episodes.embedding``), the entities' name vectors, the
relation links' fact vectors (``relation_provenance.embedding``) and what is searched
(``search_documents.embedding``). Each value is rounded to half precision (about three
significant digits); cosine distances, and so the search's order, barely move
(docs/architecture/data-model.md has the measured figures). A server whose ``vector``
extension is older than 0.7 is refused in one line that says what to do.

An HNSW index of ``vector_cosine_ops`` cannot outlive the change: the vector indexes
Stashbird made at run time (the conversations' own, memory.store.vector_indexes, and the
shared one Citus keeps, migration 0021) are dropped first and made again, each as it was
but with ``halfvec_cosine_ops``, in the migration's transaction (with
``BUILD_MEMORY_MB`` of ``maintenance_work_mem``, as the run-time builds): a large
conversation searches through its own index again as soon as the store is at 0023,
whether or not it gets new messages. The builds take most of the migration's time on a
large store (at 1M messages over 1,000 conversations, ``bench scale`` built 184 own
indexes in about 6 minutes); on Citus every shard's index is built anew.

Another index over an embedding column (one made by hand) is not ours to drop: the
migration refuses, naming it. Each ALTER rewrites its table under an exclusive lock, so
the store is unavailable while it runs (time grows with the store; a distributed table's
shards are rewritten one after another). The full-text indexes are not touched.

The downgrade makes the columns ``vector(dim)`` again (with the half-precision values:
the dropped digits do not come back) and the same indexes again with ``vector_cosine_ops``.

Revision ID: 0023
Revises: 0022
"""

import sqlalchemy as sa

from alembic import op
from memory.errors import ConfigurationError
from memory.store.database import halfvec_refusal
from memory.store.vector_indexes import BUILD_MEMORY_MB, made_at_run_time

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

# Every vector column of the store.
TABLES = ("episodes", "entities", "relation_provenance", "search_documents")

# The indexes over those columns (the conversations' own, the shared one, or made by
# hand), each with the statement that makes it.
_INDEXES = sa.text(
    "SELECT c.relname, t.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "JOIN pg_class t ON t.oid = i.indrelid "
    "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
    "WHERE t.relname = ANY(:tables) AND t.relnamespace = CAST(current_schema() AS regnamespace) "
    "AND a.attname = 'embedding' ORDER BY 1"
)
_VERSION = sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
_DIM = sa.text("SELECT value FROM store_settings WHERE key = 'embedding_dim'")


def _drop_vector_indexes() -> list[str]:
    """Drop the run-time vector indexes over the vector columns; the statements that made them."""
    found = op.get_bind().execute(_INDEXES, {"tables": list(TABLES)}).all()
    foreign = [f"{name} on {table}" for name, table, _ in found if not made_at_run_time(name)]
    if foreign:
        raise ConfigurationError(
            f"migration 0023 changes the vector columns to halfvec and would have to drop {', '.join(foreign)}, "
            "which Stashbird did not make: drop it (or make it again after the migration), then start again"
        )
    for name, _, _ in found:
        op.execute(f'DROP INDEX "{name}"')
    return [definition for _, _, definition in found]


def _convert(type_: str, opclass: str, other: str) -> None:
    """The columns to ``type_``; each dropped index made again with ``opclass`` for ``other``."""
    dim = int(op.get_bind().execute(_DIM).scalar_one())
    made = _drop_vector_indexes()
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE {type_}({dim}) USING CAST(embedding AS {type_}({dim}))")
    op.execute(f"SET LOCAL maintenance_work_mem TO '{BUILD_MEMORY_MB}MB'")
    for definition in made:
        op.execute(definition.replace(other, opclass))


def upgrade() -> None:
    refusal = halfvec_refusal(op.get_bind().execute(_VERSION).scalar())
    if refusal is not None:
        raise ConfigurationError(refusal)
    _convert("halfvec", "halfvec_cosine_ops", "vector_cosine_ops")


def downgrade() -> None:
    _convert("vector", "vector_cosine_ops", "halfvec_cosine_ops")
