"""The search documents partitioned by conversation on one server (16 hash partitions).

A custom plan opens every index of each table it scans and checks each partial
index's predicate: at 1M messages the 184 own indexes of the large conversations
(memory.store.vector_indexes) cost the largest conversation's search about 10 ms of
planning, and every other conversation's search the same. Partitioned, a statement
given its conversation plans against one partition and the own indexes built there
(a sixteenth of them on average; on 200 partial indexes a statement planned in
0.05-0.08 ms against 0.34-0.58 ms on one table).

The rows are copied into a new table (``LIKE``: the same columns and types, halfvec
since 0023, the generated ``tsv``), which then takes the old one's name, keys, full-text
index and sequence. The conversations' own indexes go with the old table and are made
again in the migration's transaction, each on the partition that holds its
conversation (with ``BUILD_MEMORY_MB`` of ``maintenance_work_mem``, as the run-time
builds), as migration 0023 does: a large conversation searches through its own index
as soon as the store is at 0024. The store is unavailable while it runs (the copy and
the builds; docs/architecture/scale.md has the time at 100K messages).

On a database with the ``citus`` extension nothing changes: no conversation gets own
indexes there, and a shard already holds a part of the store (a distributed table of
16 partitions would be 16 times the shards).

The downgrade makes them one plain table again, the own indexes made again on it.

Revision ID: 0024
Revises: 0023
"""

import re

import sqlalchemy as sa

from alembic import op
from memory.store.vector_indexes import BUILD_MEMORY_MB, own_index

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

PARTITIONS = 16
_CITUS = sa.text("SELECT count(*) FROM pg_extension WHERE extname = 'citus'")
_COLUMNS = "id, conversation_id, kind, ref_id, text, embedding, message_time, is_current"
# Every index on the table or on one of its partitions, with the statement that makes it.
_INDEXES = sa.text(
    "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "WHERE i.indrelid IN (SELECT CAST('search_documents' AS regclass) UNION ALL "
    "SELECT inhrelid FROM pg_inherits WHERE inhparent = CAST('search_documents' AS regclass)) ORDER BY 1"
)
# The table (the conversation's partition, or the plain table) that holds its rows.
_HOLDER = sa.text("SELECT CAST(CAST(tableoid AS regclass) AS text) FROM search_documents WHERE conversation_id = :c LIMIT 1")
# The table an index definition names (``ON ONLY`` for a partitioned table's own).
_ON = re.compile(r" ON (ONLY )?(\S+\.)?search_documents(_p\d+)? USING ")


def _own_indexes() -> list[tuple[int, str]]:
    """The conversations' own indexes: (conversation, the statement that made it)."""
    found = op.get_bind().execute(_INDEXES).all()
    return [(own[0], definition) for name, definition in found if (own := own_index(name)) is not None]


def _rebuild(partitioned: bool) -> None:
    """Copy search_documents into a new table, hash-partitioned or plain, and give it
    the old one's name, constraints, indexes and sequence."""
    bind = op.get_bind()
    if bind.execute(_CITUS).scalar():
        return
    own = _own_indexes()
    scheme = " PARTITION BY HASH (conversation_id)" if partitioned else ""
    op.execute("ALTER SEQUENCE search_documents_id_seq OWNED BY NONE")
    op.execute(
        "CREATE TABLE search_documents_new (LIKE search_documents INCLUDING DEFAULTS INCLUDING GENERATED "
        f"INCLUDING CONSTRAINTS){scheme}"
    )
    for remainder in range(PARTITIONS if partitioned else 0):
        op.execute(
            f"CREATE TABLE search_documents_p{remainder} PARTITION OF search_documents_new "
            f"FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {remainder})"
        )
    op.execute(f"INSERT INTO search_documents_new ({_COLUMNS}) SELECT {_COLUMNS} FROM search_documents")
    op.execute("DROP TABLE search_documents")
    op.execute("ALTER TABLE search_documents_new RENAME TO search_documents")
    op.execute(
        "ALTER TABLE search_documents ADD CONSTRAINT search_documents_pkey PRIMARY KEY (conversation_id, id), "
        "ADD CONSTRAINT uq_search_document_ref UNIQUE (conversation_id, kind, ref_id), "
        "ADD CONSTRAINT search_documents_conversation_id_fkey FOREIGN KEY (conversation_id) "
        "REFERENCES conversations (id) ON DELETE CASCADE"
    )
    op.execute("CREATE INDEX ix_search_documents_tsv ON search_documents USING gin (tsv)")
    op.execute("ALTER SEQUENCE search_documents_id_seq OWNED BY search_documents.id")
    op.execute(f"SET LOCAL maintenance_work_mem TO '{BUILD_MEMORY_MB}MB'")
    for conversation, definition in own:
        holder = bind.execute(_HOLDER, {"c": conversation}).scalar()
        if holder is not None:  # a conversation without documents has nothing to index
            op.execute(_ON.sub(f" ON {holder} USING ", definition, count=1))
    op.execute("ANALYZE search_documents")


def upgrade() -> None:
    _rebuild(partitioned=True)


def downgrade() -> None:
    _rebuild(partitioned=False)
