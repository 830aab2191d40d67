"""Keys that Citus accepts when the tables are distributed by ``conversation_id``.

Citus requires the distribution column in every PRIMARY KEY and UNIQUE constraint of
a distributed table, and at the same position on both sides of every foreign key
between distributed tables; it refuses ``ON DELETE SET NULL`` on such a key (it would
null the distribution column too). So, for every table but the reference tables
(``conversations``, ``store_settings``; memory.store.citus lists them):

- the primary key becomes ``(conversation_id, id)``, or ``conversation_id`` first in
  the natural composite key (provenance, membership and evidence links);
- ``uq_search_document_ref`` becomes ``(conversation_id, kind, ref_id)``;
- every foreign key between these tables carries ``conversation_id`` first on both
  sides, self-references included (``episodes.prev_id/next_id``,
  ``relations.superseded_by``); those three were ``ON DELETE SET NULL`` and are now
  ``NO ACTION``: the code that deletes an episode or a relation clears the links to it
  in the same transaction (memory.forgetting.deletion), and a link it missed makes
  the deletion fail instead of leaving a dangling id;
- ``usage_ledger.conversation_id`` becomes NOT NULL. No code has ever written a row
  without a conversation, and every read of the ledger is per conversation, so rows
  without one (none are expected) could never be reported: they are deleted.

Indexes on ``(conversation_id)`` alone, or ``(conversation_id, kind)`` of search
documents, are dropped: each is a leading prefix of the new primary key or unique
index of its table, which serves the same scans. The single-column indexes on the
foreign-key columns (``episode_id``, ``entity_id``, ``prev_id`` ...) stay: ids are
unique across conversations, so they are as selective as a composite index would be.

The downgrade restores the keys of 0004 (the rows deleted from the ledger excepted).

Revision ID: 0010
Revises: 0004
"""

from alembic import op

revision = "0010"
down_revision = "0004"
branch_labels = None
depends_on = None

# table -> (old primary key, new primary key)
PRIMARY_KEYS = {
    "speakers": ("id", "conversation_id, id"),
    "episodes": ("id", "conversation_id, id"),
    "entities": ("id", "conversation_id, id"),
    "relations": ("id", "conversation_id, id"),
    "communities": ("id", "conversation_id, id"),
    "search_documents": ("id", "conversation_id, id"),
    "usage_ledger": ("id", "conversation_id, id"),
    "audit_log": ("id", "conversation_id, id"),
    "answer_traces": ("id", "conversation_id, id"),
    "job_runs": ("id", "conversation_id, id"),
    "entity_provenance": ("entity_id, episode_id", "conversation_id, entity_id, episode_id"),
    "relation_provenance": ("relation_id, episode_id", "conversation_id, relation_id, episode_id"),
    "community_members": ("community_id, entity_id", "conversation_id, community_id, entity_id"),
    "answer_evidence": ("trace_id, episode_id", "conversation_id, trace_id, episode_id"),
}

# (table, column, referenced table, ON DELETE before, ON DELETE after)
FOREIGN_KEYS = (
    ("episodes", "speaker_id", "speakers", "NO ACTION", "NO ACTION"),
    ("episodes", "prev_id", "episodes", "SET NULL", "NO ACTION"),
    ("episodes", "next_id", "episodes", "SET NULL", "NO ACTION"),
    ("entity_provenance", "entity_id", "entities", "CASCADE", "CASCADE"),
    ("entity_provenance", "episode_id", "episodes", "CASCADE", "CASCADE"),
    ("relations", "subject_id", "entities", "CASCADE", "CASCADE"),
    ("relations", "object_id", "entities", "CASCADE", "CASCADE"),
    ("relations", "superseded_by", "relations", "SET NULL", "NO ACTION"),
    ("relation_provenance", "relation_id", "relations", "CASCADE", "CASCADE"),
    ("relation_provenance", "episode_id", "episodes", "CASCADE", "CASCADE"),
    ("community_members", "community_id", "communities", "CASCADE", "CASCADE"),
    ("community_members", "entity_id", "entities", "CASCADE", "CASCADE"),
    ("answer_evidence", "trace_id", "answer_traces", "CASCADE", "CASCADE"),
    ("answer_evidence", "episode_id", "episodes", "CASCADE", "CASCADE"),
)

# index -> (table, columns): each a leading prefix of the table's new key
REDUNDANT_INDEXES = {
    "ix_entities_conversation": ("entities", "conversation_id"),
    "ix_relations_conversation": ("relations", "conversation_id"),
    "ix_communities_conversation": ("communities", "conversation_id"),
    "ix_answer_traces_conversation": ("answer_traces", "conversation_id"),
    "ix_usage_ledger_conversation": ("usage_ledger", "conversation_id"),
    "ix_entity_provenance_conversation": ("entity_provenance", "conversation_id"),
    "ix_relation_provenance_conversation": ("relation_provenance", "conversation_id"),
    "ix_search_documents_scope": ("search_documents", "conversation_id, kind"),
}


def _drop_foreign_keys() -> None:
    for table, column, _, _, _ in FOREIGN_KEYS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_{column}_fkey")


def _set_primary_keys(which: int) -> None:
    for table, keys in PRIMARY_KEYS.items():
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, ADD CONSTRAINT {table}_pkey PRIMARY KEY ({keys[which]})")


def upgrade() -> None:
    op.execute("DELETE FROM usage_ledger WHERE conversation_id IS NULL")
    _drop_foreign_keys()
    _set_primary_keys(1)  # which makes usage_ledger.conversation_id NOT NULL
    op.execute(
        "ALTER TABLE search_documents DROP CONSTRAINT uq_search_document_ref, "
        "ADD CONSTRAINT uq_search_document_ref UNIQUE (conversation_id, kind, ref_id)"
    )
    for table, column, parent, _, action in FOREIGN_KEYS:
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {table}_{column}_fkey FOREIGN KEY (conversation_id, {column}) "
            f"REFERENCES {parent} (conversation_id, id) ON DELETE {action}"
        )
    for index in REDUNDANT_INDEXES:
        op.execute(f"DROP INDEX {index}")


def downgrade() -> None:
    for index, (table, columns) in REDUNDANT_INDEXES.items():
        op.execute(f"CREATE INDEX {index} ON {table} ({columns})")
    _drop_foreign_keys()
    _set_primary_keys(0)
    op.execute("ALTER TABLE usage_ledger ALTER COLUMN conversation_id DROP NOT NULL")
    op.execute(
        "ALTER TABLE search_documents DROP CONSTRAINT uq_search_document_ref, "
        "ADD CONSTRAINT uq_search_document_ref UNIQUE (kind, ref_id)"
    )
    for table, column, parent, action, _ in FOREIGN_KEYS:
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {table}_{column}_fkey FOREIGN KEY ({column}) "
            f"REFERENCES {parent} (id) ON DELETE {action}"
        )
