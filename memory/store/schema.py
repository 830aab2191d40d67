"""ORM models for every table of the memory. The migrations (alembic/) make the schema,
and released databases hold what they made: these declarations follow them, indexes and
unique constraints by name included (a database at head and this schema are compared in
tests/database/test_migrations.py), except the vector indexes memory.store.vector_indexes makes at
run time. Check constraints and server defaults are the migrations' alone.

Every table but the reference tables (the conversations, the settings, the store-wide
audit log) carries ``conversation_id`` so that no query needs to cross conversations
and the schema can be sharded by conversation on Citus (memory.store.citus): in every
table but the reference tables, the key begins with ``conversation_id`` and every
foreign key between them carries it first on both sides (migration 0010).

Vectors are ``halfvec`` (migration 0023: two bytes per dimension, pgvector 0.7 or
later); a row's vector reads back as a list of floats.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import HALFVEC
from sqlalchemy import (
    BigInteger,
    Boolean,
    Computed,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    and_,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

TSV_EXPRESSION = "to_tsvector('english', text)"


class Base(DeclarativeBase):
    pass


def _conversation_fk() -> Mapped[int]:
    """The distribution column: first in the table's key, pointing at the conversation."""
    return mapped_column(BigInteger, ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True)


def _id() -> Mapped[int]:
    """An id the database generates (a column default from its own sequence, migration
    0015), second in the key after ``conversation_id``."""
    return mapped_column(BigInteger, primary_key=True, autoincrement=True)


def _same_conversation(columns: str, parent: str, ondelete: str | None = None) -> ForeignKeyConstraint:
    """A foreign key to ``parent`` within the conversation: ``(conversation_id, column)``
    references ``parent (conversation_id, id)``, as Citus requires between co-located tables."""
    return ForeignKeyConstraint(["conversation_id", columns], [f"{parent}.conversation_id", f"{parent}.id"], ondelete=ondelete)


class Conversation(Base):
    """One channel or thread on one platform; the unit of memory scoping."""

    __tablename__ = "conversations"
    __table_args__ = (UniqueConstraint("platform", "workspace_id", "channel_id", name="uq_conversation_platform_ids"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    platform: Mapped[str] = mapped_column(Text)
    workspace_id: Mapped[str] = mapped_column(Text, default="")
    channel_id: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    bot_left_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # the bot was removed: store nothing new


class Speaker(Base):
    __tablename__ = "speakers"
    __table_args__ = (UniqueConstraint("conversation_id", "platform_user_id", name="uq_speaker_platform_user"),)

    conversation_id: Mapped[int] = _conversation_fk()
    id: Mapped[int] = _id()
    platform_user_id: Mapped[str] = mapped_column(Text)
    display_name: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(Text)  # user | admin | bot


class Episode(Base):
    """One message. Bot messages are stored as context but never count as evidence.
    ``embedding`` is the message's own vector; its search document holds the vector it
    is searched by (``memory.episodes.exchange_vectors``)."""

    __tablename__ = "episodes"
    __table_args__ = (
        _same_conversation("speaker_id", "speakers"),
        _same_conversation("prev_id", "episodes"),
        _same_conversation("next_id", "episodes"),
        UniqueConstraint("conversation_id", "platform_message_id", name="uq_episode_platform_message"),
        Index("ix_episodes_chain_order", "conversation_id", "message_time", "id"),
        Index("ix_episodes_prev", "prev_id"),
        Index("ix_episodes_next", "next_id"),
        Index("ix_episodes_thread", "conversation_id", "thread_id", postgresql_where=text("thread_id IS NOT NULL")),  # 0025
    )

    conversation_id: Mapped[int] = _conversation_fk()
    id: Mapped[int] = _id()
    speaker_id: Mapped[int] = mapped_column(BigInteger)
    role: Mapped[str] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text)
    message_time: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    ingested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    edited_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    platform_message_id: Mapped[str] = mapped_column(Text)
    reply_to: Mapped[str | None] = mapped_column(Text)
    thread_id: Mapped[str | None] = mapped_column(Text)
    embedding: Mapped[Any] = mapped_column(HALFVEC(), nullable=True)
    # No ON DELETE action (Citus refuses SET NULL here): a deletion relinks the chain itself.
    prev_id: Mapped[int | None] = mapped_column(BigInteger)
    next_id: Mapped[int | None] = mapped_column(BigInteger)


class Tombstone(Base):
    """A deletion that arrived before its message: the late message is refused."""

    __tablename__ = "tombstones"

    conversation_id: Mapped[int] = _conversation_fk()
    platform_message_id: Mapped[str] = mapped_column(Text, primary_key=True)
    deleted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Entity(Base):
    """A person, place, thing or idea. ``is_anchor`` marks a connective anchor: its
    episode-derived metadata was cleared but surviving relations still need it."""

    __tablename__ = "entities"
    __table_args__ = (  # migration 0009: the names a consolidation run matches, and the anchors
        Index("ix_entities_names", "conversation_id", postgresql_include=["id", "name"], postgresql_where=text("NOT is_anchor")),
        Index("ix_entities_anchors", "conversation_id", postgresql_where=text("is_anchor")),
    )

    conversation_id: Mapped[int] = _conversation_fk()
    id: Mapped[int] = _id()
    name: Mapped[str] = mapped_column(Text)
    type: Mapped[str] = mapped_column(Text, default="thing")
    summary: Mapped[str] = mapped_column(Text, default="")
    attributes: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    embedding: Mapped[Any] = mapped_column(HALFVEC(), nullable=True)
    is_anchor: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class EntityProvenance(Base):
    """P(e): the episodes that mention an entity, each with the name form and type it
    used and its summary contribution (drawn from ``summary_sources``; memory.graph.wording)."""

    __tablename__ = "entity_provenance"
    __table_args__ = (
        _same_conversation("entity_id", "entities", "CASCADE"),
        _same_conversation("episode_id", "episodes", "CASCADE"),
        Index("ix_entity_provenance_episode", "episode_id"),
        Index("ix_entity_provenance_summary", "entity_id", "episode_id", postgresql_where=text("summary <> ''")),
    )

    conversation_id: Mapped[int] = _conversation_fk()
    entity_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    episode_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    name: Mapped[str] = mapped_column(Text, default="")
    type: Mapped[str] = mapped_column(Text, default="")
    summary: Mapped[str] = mapped_column(Text, default="")
    summary_sources: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), default=list)


class Relation(Base):
    """A fact between two entities. Superseded relations are kept as history."""

    __tablename__ = "relations"
    __table_args__ = (
        _same_conversation("subject_id", "entities", "CASCADE"),
        _same_conversation("object_id", "entities", "CASCADE"),
        _same_conversation("superseded_by", "relations"),
        Index("ix_relations_conversation_status", "conversation_id", "status"),
        # Each end with the conversation, status and id (migration 0013).
        Index("ix_relations_subject_status", "conversation_id", "subject_id", "status", "id"),
        Index("ix_relations_object_status", "conversation_id", "object_id", "status", "id"),
        Index("ix_relations_superseded_by", "superseded_by"),
    )

    conversation_id: Mapped[int] = _conversation_fk()
    id: Mapped[int] = _id()
    subject_id: Mapped[int] = mapped_column(BigInteger)
    object_id: Mapped[int] = mapped_column(BigInteger)
    predicate: Mapped[str] = mapped_column(Text)
    fact: Mapped[str] = mapped_column(Text)
    valid_from: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    invalid_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    status: Mapped[str] = mapped_column(Text, default="active")  # active | superseded
    # No ON DELETE action: deleting the superseder clears the link first (apply_decision).
    superseded_by: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class RelationProvenance(Base):
    """P(r): the episodes that state a relation, each with its own wording: the fact
    sentence, valid-from and vector, drawn from ``sources`` ('' once a source is gone)."""

    __tablename__ = "relation_provenance"
    __table_args__ = (
        _same_conversation("relation_id", "relations", "CASCADE"),
        _same_conversation("episode_id", "episodes", "CASCADE"),
        Index("ix_relation_provenance_episode", "episode_id"),
        Index("ix_relation_provenance_worded", "relation_id", "episode_id", postgresql_where=text("fact <> ''")),
    )

    conversation_id: Mapped[int] = _conversation_fk()
    relation_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    episode_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    fact: Mapped[str] = mapped_column(Text, default="")
    valid_from: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    embedding: Mapped[Any] = mapped_column(HALFVEC(), nullable=True)
    sources: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), default=list)


class Community(Base):
    __tablename__ = "communities"

    conversation_id: Mapped[int] = _conversation_fk()
    id: Mapped[int] = _id()
    label: Mapped[str] = mapped_column(Text, default="")
    summary: Mapped[str] = mapped_column(Text, default="")
    dirty: Mapped[bool] = mapped_column(Boolean, default=True)
    # When it was summarised last, or, while dirty, when it became dirty (or was created).
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # Uses by answers, decayed, as they stood at used_at (migration 0019, memory/communities/use.py).
    used_score: Mapped[float] = mapped_column(Float, server_default="0")
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class CommunityMember(Base):
    __tablename__ = "community_members"
    __table_args__ = (
        _same_conversation("community_id", "communities", "CASCADE"),
        _same_conversation("entity_id", "entities", "CASCADE"),
        Index("ix_community_members_entity", "entity_id"),
    )

    conversation_id: Mapped[int] = _conversation_fk()
    community_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    entity_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)


class CommunityState(Base):
    """Per conversation: the newest entity and relation ids the last full community build
    and the last incremental pass saw (migration 0007), and the entities whose relations
    were removed or restored since the build (0012), for the rebuild threshold."""

    __tablename__ = "community_state"

    conversation_id: Mapped[int] = _conversation_fk()
    built_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    built_entity_id: Mapped[int] = mapped_column(BigInteger, default=0)
    built_relation_id: Mapped[int] = mapped_column(BigInteger, default=0)
    seen_entity_id: Mapped[int] = mapped_column(BigInteger, default=0)
    seen_relation_id: Mapped[int] = mapped_column(BigInteger, default=0)
    # Entities whose edges changed other than by a new relation since the last build: the
    # ends of relations deleted or restored by forgetting (migration 0012).
    changed_entity_ids: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), default=list)


class SearchDocument(Base):
    """One row per retrievable thing. Removing something from the index deletes its row.

    ``tsv`` is a generated column (English full-text vector of ``text``).
    ``is_current`` is false for superseded relations so retrieval can prefer current facts.
    For an episode, ``embedding`` is the vector of its exchange (``memory.episodes.exchange_vectors``).
    On one server the table is hash-partitioned by conversation (migration 0024: the
    large conversations' own indexes are on their partitions, memory.store.vector_indexes).
    """

    __tablename__ = "search_documents"
    # The vector indexes are not declared: memory.store.vector_indexes makes them at run time.
    __table_args__ = (
        UniqueConstraint("conversation_id", "kind", "ref_id", name="uq_search_document_ref"),
        Index("ix_search_documents_tsv", "tsv", postgresql_using="gin"),
    )

    conversation_id: Mapped[int] = _conversation_fk()
    id: Mapped[int] = _id()
    kind: Mapped[str] = mapped_column(Text)  # episode | entity | relation | community
    ref_id: Mapped[int] = mapped_column(BigInteger)
    text: Mapped[str] = mapped_column(Text)
    tsv: Mapped[Any] = mapped_column(TSVECTOR, Computed(TSV_EXPRESSION, persisted=True))
    embedding: Mapped[Any] = mapped_column(HALFVEC())
    message_time: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    is_current: Mapped[bool] = mapped_column(Boolean, default=True)


class Checkpoint(Base):
    """Per conversation consolidation state; consolidation resumes from it after a crash.

    ``summary_episode_ids`` are the episodes the running summary drew on, so that a
    deletion can clear what rested on the deleted message. The rolling context is in
    ``RollingContextEntry`` rows (memory.store.rolling_context).
    """

    __tablename__ = "checkpoints"

    conversation_id: Mapped[int] = _conversation_fk()
    summary: Mapped[str] = mapped_column(Text, default="")
    summary_episode_ids: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), default=list)
    summary_dirty: Mapped[bool] = mapped_column(Boolean, default=False)
    last_episode_id: Mapped[int] = mapped_column(BigInteger, default=0)
    # Episodes at or below last_episode_id to consolidate again (edited messages).
    pending_episode_ids: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), default=list)
    entity_count: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class RollingContextEntry(Base):
    """One entry of a conversation's rolling context, carrying the episodes its text
    rests on so that a deletion can drop or rewrite it; ordered by ``position``."""

    __tablename__ = "rolling_context_entries"

    conversation_id: Mapped[int] = _conversation_fk()
    entity_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    position: Mapped[int] = mapped_column(BigInteger)
    name: Mapped[str] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text)
    episode_ids: Mapped[list[int]] = mapped_column(ARRAY(BigInteger))


class UsageEntry(Base):
    """One LLM or embedding call (or a batch of them) and its token cost."""

    __tablename__ = "usage_ledger"

    conversation_id: Mapped[int] = _conversation_fk()
    id: Mapped[int] = _id()
    phase: Mapped[str] = mapped_column(Text)  # ingestion | retrieval | community
    operation: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    calls: Mapped[int] = mapped_column(Integer, default=1)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class AuditEntry(Base):
    """Who asked or removed what. ``details`` holds ids and counts, never deleted text."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_conversation", "conversation_id", "created_at"),)

    conversation_id: Mapped[int] = _conversation_fk()
    id: Mapped[int] = _id()
    principal: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class StoreAuditEntry(Base):
    """Who did what to the store as a whole, or to what outlives a conversation's audit
    log (a dropped conversation, a person across conversations): no conversation key,
    the conversation or workspace named in text (migration 0018). ``details`` holds ids
    and counts, never deleted text."""

    __tablename__ = "store_audit_log"
    __table_args__ = (
        Index("ix_store_audit_log_created", "created_at"),
        Index("ix_store_audit_log_where", "platform", "workspace_id", "channel_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    principal: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(Text)
    platform: Mapped[str | None] = mapped_column(Text)
    workspace_id: Mapped[str | None] = mapped_column(Text)
    channel_id: Mapped[str | None] = mapped_column(Text)
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class AnswerTrace(Base):
    """The question, sub-queries and usage of one answer; its evidence is linked below."""

    __tablename__ = "answer_traces"

    conversation_id: Mapped[int] = _conversation_fk()
    id: Mapped[int] = _id()
    principal: Mapped[str] = mapped_column(Text)
    question: Mapped[str] = mapped_column(Text)
    sub_queries: Mapped[list[str]] = mapped_column(JSONB, default=list)
    answer: Mapped[str] = mapped_column(Text, default="")
    usage: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    # resolved times and evidence items (kind, record id, scores, episode ids): no text
    retrieval: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class AnswerEvidence(Base):
    """An episode an answer used. Deleting the episode drops the link (ON DELETE CASCADE)."""

    __tablename__ = "answer_evidence"
    __table_args__ = (
        _same_conversation("trace_id", "answer_traces", "CASCADE"),
        _same_conversation("episode_id", "episodes", "CASCADE"),
        Index("ix_answer_evidence_episode", "episode_id"),
    )

    conversation_id: Mapped[int] = _conversation_fk()
    trace_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    episode_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)


class StoreSetting(Base):
    """Facts fixed per database, such as the embedding dimension."""

    __tablename__ = "store_settings"

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class ParticipantOptout(Base):
    """A person who opted out of being remembered in one workspace (migration 0017): while
    the row exists their new messages are acknowledged and not stored. No conversation
    key: a reference table on Citus (memory.store.citus)."""

    __tablename__ = "participant_optouts"

    platform: Mapped[str] = mapped_column(Text, primary_key=True)
    workspace_id: Mapped[str] = mapped_column(Text, primary_key=True)
    platform_user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    since: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    set_by: Mapped[str] = mapped_column(Text)  # the principal, ``kind:id``


class ConversationRetention(Base):
    """A conversation's own retention window (migration 0017), overriding the store's
    default; ``days`` None keeps everything, whatever the default."""

    __tablename__ = "conversation_retention"

    conversation_id: Mapped[int] = _conversation_fk()
    days: Mapped[int | None] = mapped_column(Integer)
    set_by: Mapped[str] = mapped_column(Text)
    set_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class InboxEvent(Base):
    """A platform event as its connector normalised it, stored before it was
    acknowledged; ``payload`` is cleared once the event is processed (memory.store.inbox)."""

    __tablename__ = "inbox_events"
    __table_args__ = (
        UniqueConstraint("conversation_id", "event_id", name="uq_inbox_event"),
        Index("ix_inbox_events_pending", "conversation_id", "id", postgresql_where=text("processed_at IS NULL")),
        Index("ix_inbox_events_processed", "processed_at"),
    )

    conversation_id: Mapped[int] = _conversation_fk()
    id: Mapped[int] = _id()
    event_id: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text)
    message_id: Mapped[str | None] = mapped_column(Text)
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    not_before: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    processed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    outcome: Mapped[str | None] = mapped_column(Text)  # done | rejected | failed
    error: Mapped[str | None] = mapped_column(Text)


class ConnectorCursor(Base):
    """Where a resumable connector job (a backfill) got to in one conversation."""

    __tablename__ = "connector_cursors"

    conversation_id: Mapped[int] = _conversation_fk()
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[dict[str, Any]] = mapped_column(JSONB)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ConversationLock(Base):
    """One row per (conversation, lock purpose), locked ``FOR UPDATE`` to hold the lock
    (memory.store.locks): a row lock holds across a Citus cluster, an advisory lock does
    not. No foreign key: migration 0011 says why."""

    __tablename__ = "conversation_locks"
    __table_args__ = (Index("ix_conversation_locks_due", "due_at", postgresql_where=text("due_at IS NOT NULL")),)

    conversation_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    purpose: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    # When the scheduler's discovery should look at the conversation next (migration 0016,
    # memory.store.backlog); set by every writer lock, cleared when nothing is left.
    due_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class JobClaim(Base):
    """A work item of the scheduler: one row per (conversation, job), held by the
    process whose lease has not run out (memory.store.claims). ``conversation_id`` 0 is
    work tied to no conversation (a VACUUM after deletions), hence no foreign key."""

    __tablename__ = "job_claims"

    conversation_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    job: Mapped[str] = mapped_column(Text, primary_key=True)
    owner: Mapped[str | None] = mapped_column(Text)
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class JobRun(Base):
    """The run log: who ran which job for which conversation, when, and its result
    (counts, never text)."""

    __tablename__ = "job_runs"
    __table_args__ = (Index("ix_job_runs_scope", "conversation_id", "job", "id"),)

    conversation_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    id: Mapped[int] = _id()
    job: Mapped[str] = mapped_column(Text)
    owner: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default="running")  # running | ok | failed | released | abandoned
    result: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class _SlackBotColumns:
    """The columns an installation and a bot share (migration 0014: the shapes slack_sdk's
    installation store reads and writes; naive UTC times, as it stores them)."""

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    client_id: Mapped[str] = mapped_column(String(32))
    app_id: Mapped[str] = mapped_column(String(32))
    enterprise_id: Mapped[str | None] = mapped_column(String(32))
    enterprise_name: Mapped[str | None] = mapped_column(String(200))
    team_id: Mapped[str | None] = mapped_column(String(32))
    team_name: Mapped[str | None] = mapped_column(String(200))
    bot_token: Mapped[str | None] = mapped_column(String(200))
    bot_id: Mapped[str | None] = mapped_column(String(32))
    bot_user_id: Mapped[str | None] = mapped_column(String(32))
    bot_scopes: Mapped[str | None] = mapped_column(String(1000))
    bot_refresh_token: Mapped[str | None] = mapped_column(String(200))
    bot_token_expires_at: Mapped[datetime | None] = mapped_column(DateTime)
    is_enterprise_install: Mapped[bool] = mapped_column(Boolean, server_default="false")
    installed_at: Mapped[datetime] = mapped_column(DateTime, server_default=func.now())


class SlackInstallation(_SlackBotColumns, Base):
    """One install of the Slack app (multi-workspace mode), by the user who installed it."""

    __tablename__ = "slack_installations"
    __table_args__ = (Index("slack_installations_idx", "client_id", "enterprise_id", "team_id", "user_id", "installed_at"),)

    enterprise_url: Mapped[str | None] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(32))
    user_token: Mapped[str | None] = mapped_column(String(200))
    user_scopes: Mapped[str | None] = mapped_column(String(1000))
    user_refresh_token: Mapped[str | None] = mapped_column(String(200))
    user_token_expires_at: Mapped[datetime | None] = mapped_column(DateTime)
    incoming_webhook_url: Mapped[str | None] = mapped_column(String(200))
    incoming_webhook_channel: Mapped[str | None] = mapped_column(String(200))
    incoming_webhook_channel_id: Mapped[str | None] = mapped_column(String(200))
    incoming_webhook_configuration_url: Mapped[str | None] = mapped_column(String(200))
    token_type: Mapped[str | None] = mapped_column(String(32))


class SlackBot(_SlackBotColumns, Base):
    """The bot of a workspace's (or an org's) newest install: what answering there needs."""

    __tablename__ = "slack_bots"
    __table_args__ = (Index("slack_bots_idx", "client_id", "enterprise_id", "team_id", "installed_at"),)


class SlackOAuthState(Base):
    """A state of the OAuth install flow, until it is used or expires."""

    __tablename__ = "slack_oauth_states"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    state: Mapped[str] = mapped_column(String(200))
    expire_at: Mapped[datetime] = mapped_column(DateTime)


# An episode's speaker, joined on the conversation too, so that the join stays on one
# shard when tables are distributed by conversation (both keys carry it).
EPISODE_SPEAKER = and_(Speaker.conversation_id == Episode.conversation_id, Speaker.id == Episode.speaker_id)
