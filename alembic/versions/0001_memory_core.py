"""The memory core: conversations, episodes, the provenance graph, search documents,
checkpoints, usage ledger, audit log.

The embedding dimension is fixed here, per database, from the ``embedding_dim``
attribute that memory.store.database passes (or STASHBIRD_EMBEDDING_DIM, default 384), and
recorded in store_settings so that start-up can refuse a mismatched embedder.

Revision ID: 0001
Revises:
"""

import os

import sqlalchemy as sa
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql as pg

from alembic import context, op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _dim() -> int:
    configured = context.config.attributes.get("embedding_dim")
    return int(configured or os.environ.get("STASHBIRD_EMBEDDING_DIM", "384"))


def _id() -> sa.Column:
    return sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True)


def _conversation(primary_key: bool = False, nullable: bool = False) -> sa.Column:
    return sa.Column(
        "conversation_id",
        sa.BigInteger,
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        primary_key=primary_key,
        nullable=nullable,
    )


def _created(name: str = "created_at") -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False)


def _provenance(table: str, owner: str, owner_table: str) -> None:
    op.create_table(
        table,
        sa.Column(owner, sa.BigInteger, sa.ForeignKey(f"{owner_table}.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("episode_id", sa.BigInteger, sa.ForeignKey("episodes.id", ondelete="CASCADE"), primary_key=True),
        _conversation(),
    )
    op.create_index(f"ix_{table}_episode", table, ["episode_id"])
    op.create_index(f"ix_{table}_conversation", table, ["conversation_id"])


def upgrade() -> None:
    dim = _dim()
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "store_settings",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.execute(f"INSERT INTO store_settings (key, value) VALUES ('embedding_dim', '{dim}')")

    op.create_table(
        "conversations",
        _id(),
        sa.Column("platform", sa.Text, nullable=False),
        sa.Column("workspace_id", sa.Text, nullable=False, server_default=""),
        sa.Column("channel_id", sa.Text, nullable=False),
        _created(),
        sa.UniqueConstraint("platform", "workspace_id", "channel_id", name="uq_conversation_platform_ids"),
    )

    op.create_table(
        "speakers",
        _id(),
        _conversation(),
        sa.Column("platform_user_id", sa.Text, nullable=False),
        sa.Column("display_name", sa.Text, nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        sa.CheckConstraint("role IN ('user', 'admin', 'bot')", name="ck_speaker_role"),
        sa.UniqueConstraint("conversation_id", "platform_user_id", name="uq_speaker_platform_user"),
    )

    op.create_table(
        "episodes",
        _id(),
        _conversation(),
        sa.Column("speaker_id", sa.BigInteger, sa.ForeignKey("speakers.id"), nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("message_time", sa.DateTime(timezone=True), nullable=False),
        _created("ingested_at"),
        sa.Column("edited_at", sa.DateTime(timezone=True)),
        sa.Column("platform_message_id", sa.Text, nullable=False),
        sa.Column("reply_to", sa.Text),
        sa.Column("thread_id", sa.Text),
        sa.Column("prev_id", sa.BigInteger, sa.ForeignKey("episodes.id", ondelete="SET NULL")),
        sa.Column("next_id", sa.BigInteger, sa.ForeignKey("episodes.id", ondelete="SET NULL")),
        sa.CheckConstraint("role IN ('user', 'admin', 'bot')", name="ck_episode_role"),
        sa.CheckConstraint("length(text) > 0", name="ck_episode_text"),
        sa.UniqueConstraint("conversation_id", "platform_message_id", name="uq_episode_platform_message"),
    )
    op.create_index("ix_episodes_chain_order", "episodes", ["conversation_id", "message_time", "id"])
    op.create_index("ix_episodes_prev", "episodes", ["prev_id"])
    op.create_index("ix_episodes_next", "episodes", ["next_id"])

    op.create_table(
        "tombstones",
        _conversation(primary_key=True),
        sa.Column("platform_message_id", sa.Text, primary_key=True),
        _created("deleted_at"),
    )

    op.create_table(
        "entities",
        _id(),
        _conversation(),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("type", sa.Text, nullable=False, server_default="thing"),
        sa.Column("summary", sa.Text, nullable=False, server_default=""),
        sa.Column("attributes", pg.JSONB, nullable=False, server_default="{}"),
        sa.Column("embedding", Vector(dim)),
        sa.Column("is_anchor", sa.Boolean, nullable=False, server_default=sa.false()),
        _created(),
    )
    op.create_index("ix_entities_conversation", "entities", ["conversation_id"])
    _provenance("entity_provenance", "entity_id", "entities")

    op.create_table(
        "relations",
        _id(),
        _conversation(),
        sa.Column("subject_id", sa.BigInteger, sa.ForeignKey("entities.id", ondelete="CASCADE"), nullable=False),
        sa.Column("object_id", sa.BigInteger, sa.ForeignKey("entities.id", ondelete="CASCADE"), nullable=False),
        sa.Column("predicate", sa.Text, nullable=False),
        sa.Column("fact", sa.Text, nullable=False),
        sa.Column("valid_from", sa.DateTime(timezone=True)),
        sa.Column("invalid_at", sa.DateTime(timezone=True)),
        sa.Column("status", sa.Text, nullable=False, server_default="active"),
        sa.Column("superseded_by", sa.BigInteger, sa.ForeignKey("relations.id", ondelete="SET NULL")),
        _created(),
        sa.CheckConstraint("status IN ('active', 'superseded')", name="ck_relation_status"),
    )
    op.create_index("ix_relations_conversation", "relations", ["conversation_id"])
    op.create_index("ix_relations_subject", "relations", ["subject_id"])
    op.create_index("ix_relations_object", "relations", ["object_id"])
    op.create_index("ix_relations_superseded_by", "relations", ["superseded_by"])
    _provenance("relation_provenance", "relation_id", "relations")

    op.create_table(
        "communities",
        _id(),
        _conversation(),
        sa.Column("label", sa.Text, nullable=False, server_default=""),
        sa.Column("summary", sa.Text, nullable=False, server_default=""),
        sa.Column("dirty", sa.Boolean, nullable=False, server_default=sa.true()),
        _created("updated_at"),
    )
    op.create_index("ix_communities_conversation", "communities", ["conversation_id"])
    op.create_table(
        "community_members",
        sa.Column("community_id", sa.BigInteger, sa.ForeignKey("communities.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("entity_id", sa.BigInteger, sa.ForeignKey("entities.id", ondelete="CASCADE"), primary_key=True),
        _conversation(),
    )
    op.create_index("ix_community_members_entity", "community_members", ["entity_id"])

    op.create_table(
        "search_documents",
        _id(),
        _conversation(),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("ref_id", sa.BigInteger, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("tsv", pg.TSVECTOR, sa.Computed("to_tsvector('english', text)", persisted=True)),
        sa.Column("embedding", Vector(dim), nullable=False),
        sa.Column("message_time", sa.DateTime(timezone=True)),
        sa.Column("is_current", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.CheckConstraint("kind IN ('episode', 'entity', 'relation', 'community')", name="ck_search_kind"),
        sa.UniqueConstraint("kind", "ref_id", name="uq_search_document_ref"),
    )
    op.create_index("ix_search_documents_scope", "search_documents", ["conversation_id", "kind"])
    op.create_index("ix_search_documents_tsv", "search_documents", ["tsv"], postgresql_using="gin")
    op.execute("CREATE INDEX ix_search_documents_embedding ON search_documents USING hnsw (embedding vector_cosine_ops)")

    op.create_table(
        "checkpoints",
        _conversation(primary_key=True),
        sa.Column("summary", sa.Text, nullable=False, server_default=""),
        sa.Column("summary_episode_ids", pg.ARRAY(sa.BigInteger), nullable=False, server_default="{}"),
        sa.Column("summary_dirty", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("rolling_context", pg.JSONB, nullable=False, server_default="[]"),
        sa.Column("last_episode_id", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("pending_episode_ids", pg.ARRAY(sa.BigInteger), nullable=False, server_default="{}"),
        sa.Column("entity_count", sa.Integer, nullable=False, server_default="0"),
        _created("updated_at"),
    )

    op.create_table(
        "usage_ledger",
        _id(),
        _conversation(nullable=True),
        sa.Column("phase", sa.Text, nullable=False),
        sa.Column("operation", sa.Text, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("calls", sa.Integer, nullable=False, server_default="1"),
        sa.Column("prompt_tokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("completion_tokens", sa.Integer, nullable=False, server_default="0"),
        _created(),
    )
    op.create_index("ix_usage_ledger_conversation", "usage_ledger", ["conversation_id"])

    op.create_table(
        "audit_log",
        _id(),
        _conversation(),
        sa.Column("principal", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("details", pg.JSONB, nullable=False, server_default="{}"),
        _created(),
    )
    op.create_index("ix_audit_log_conversation", "audit_log", ["conversation_id", "created_at"])

    op.create_table(
        "answer_traces",
        _id(),
        _conversation(),
        sa.Column("principal", sa.Text, nullable=False),
        sa.Column("question", sa.Text, nullable=False),
        sa.Column("sub_queries", pg.JSONB, nullable=False, server_default="[]"),
        sa.Column("answer", sa.Text, nullable=False, server_default=""),
        sa.Column("usage", pg.JSONB, nullable=False, server_default="{}"),
        _created(),
    )
    op.create_index("ix_answer_traces_conversation", "answer_traces", ["conversation_id"])
    op.create_table(
        "answer_evidence",
        sa.Column("trace_id", sa.BigInteger, sa.ForeignKey("answer_traces.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("episode_id", sa.BigInteger, sa.ForeignKey("episodes.id", ondelete="CASCADE"), primary_key=True),
        _conversation(),
    )
    op.create_index("ix_answer_evidence_episode", "answer_evidence", ["episode_id"])


def downgrade() -> None:
    for table in (
        "answer_evidence",
        "answer_traces",
        "audit_log",
        "usage_ledger",
        "checkpoints",
        "search_documents",
        "community_members",
        "communities",
        "relation_provenance",
        "relations",
        "entity_provenance",
        "entities",
        "tombstones",
        "episodes",
        "speakers",
        "conversations",
        "store_settings",
    ):
        op.drop_table(table)
