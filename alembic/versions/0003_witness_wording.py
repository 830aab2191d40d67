"""Each provenance link keeps what its own message said about the record.

``relation_provenance`` gains the link's fact sentence, valid-from, the sentence's
vector and ``sources`` (the episodes the sentence was drawn from: an extraction may
cite several lines). ``entity_provenance`` gains the name form and type the message
used, and its summary contribution with ``summary_sources``. A record's displayed text
is rendered from these (memory.graph.wording), so a deletion can re-render it from the
witnesses that survive.

Pre-existing links inherit the record's current text, since which message worded it was
never recorded:

- a relation link gets the relation's fact, valid-from and its search document's vector,
  with *every* witness of the relation as its sources, so deleting any witness clears
  the inherited sentence and the relation is re-rendered from its structure;
- an entity link gets the entity's name and type; the summary goes only to the links of
  ``attributes.summary_episode_ids`` (the episodes it was written from), with those as
  its sources. A summary whose episodes are unknown goes to no link, so the first
  deletion that touches the entity clears it (as before this revision).

Partial indexes serve the deletion path's look-ups of links that still carry wording.

The rolling context moves out of the checkpoint row into ``rolling_context_entries``,
one row per entry (memory.store.rolling_context): inside the checkpoint row it was
copied whole, with every message's words in it, at every consolidation chunk.

Revision ID: 0003
Revises: 0008
"""

import sqlalchemy as sa
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql as pg

from alembic import op

revision = "0003"
down_revision = "0008"
branch_labels = None
depends_on = None


def _dim() -> int:
    return int(op.get_bind().execute(sa.text("SELECT value FROM store_settings WHERE key = 'embedding_dim'")).scalar_one())


def _sources(name: str) -> sa.Column:
    return sa.Column(name, pg.ARRAY(sa.BigInteger), nullable=False, server_default="{}")


def upgrade() -> None:
    op.add_column("relation_provenance", sa.Column("fact", sa.Text, nullable=False, server_default=""))
    op.add_column("relation_provenance", sa.Column("valid_from", sa.DateTime(timezone=True)))
    op.add_column("relation_provenance", sa.Column("embedding", Vector(_dim())))
    op.add_column("relation_provenance", _sources("sources"))
    op.add_column("entity_provenance", sa.Column("name", sa.Text, nullable=False, server_default=""))
    op.add_column("entity_provenance", sa.Column("type", sa.Text, nullable=False, server_default=""))
    op.add_column("entity_provenance", sa.Column("summary", sa.Text, nullable=False, server_default=""))
    op.add_column("entity_provenance", _sources("summary_sources"))
    op.execute(
        """
        UPDATE relation_provenance p SET fact = r.fact, valid_from = r.valid_from, embedding = d.embedding,
               sources = w.witnesses
        FROM relations r
        LEFT JOIN search_documents d ON d.kind = 'relation' AND d.ref_id = r.id
        JOIN (SELECT relation_id, array_agg(episode_id ORDER BY episode_id) AS witnesses
              FROM relation_provenance GROUP BY relation_id) w ON w.relation_id = r.id
        WHERE r.id = p.relation_id
        """
    )
    op.execute(
        """
        UPDATE entity_provenance p SET name = e.name, type = e.type,
               summary = CASE WHEN s.ids @> ARRAY[p.episode_id] THEN e.summary ELSE '' END,
               summary_sources = CASE WHEN s.ids @> ARRAY[p.episode_id] THEN s.ids ELSE '{}' END
        FROM entities e
        CROSS JOIN LATERAL (
            SELECT CASE WHEN e.summary <> '' AND jsonb_typeof(e.attributes -> 'summary_episode_ids') = 'array'
                   THEN ARRAY(SELECT jsonb_array_elements_text(e.attributes -> 'summary_episode_ids')::bigint)
                   ELSE '{}'::bigint[] END AS ids
        ) s
        WHERE e.id = p.entity_id
        """
    )
    op.create_table(
        "rolling_context_entries",
        sa.Column("conversation_id", sa.BigInteger, sa.ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("entity_id", sa.BigInteger, primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("episode_ids", pg.ARRAY(sa.BigInteger), nullable=False),
    )
    op.execute(
        """
        INSERT INTO rolling_context_entries (conversation_id, entity_id, position, name, text, episode_ids)
        SELECT DISTINCT ON (c.conversation_id, (e.item ->> 'entity_id')::bigint)
               c.conversation_id, (e.item ->> 'entity_id')::bigint, e.position, e.item ->> 'name', e.item ->> 'text',
               ARRAY(SELECT jsonb_array_elements_text(e.item -> 'episode_ids')::bigint)
        FROM checkpoints c CROSS JOIN LATERAL jsonb_array_elements(c.rolling_context) WITH ORDINALITY AS e(item, position)
        ORDER BY c.conversation_id, (e.item ->> 'entity_id')::bigint, e.position DESC
        """
    )
    op.drop_column("checkpoints", "rolling_context")
    op.execute("CREATE INDEX ix_relation_provenance_worded ON relation_provenance (relation_id, episode_id) WHERE fact <> ''")
    op.execute("CREATE INDEX ix_entity_provenance_summary ON entity_provenance (entity_id, episode_id) WHERE summary <> ''")


def downgrade() -> None:
    op.add_column("checkpoints", sa.Column("rolling_context", pg.JSONB, nullable=False, server_default="[]"))
    op.execute(
        """
        UPDATE checkpoints c SET rolling_context = coalesce((
            SELECT jsonb_agg(jsonb_build_object('entity_id', r.entity_id, 'name', r.name, 'text', r.text,
                                                'episode_ids', to_jsonb(r.episode_ids)) ORDER BY r.position)
            FROM rolling_context_entries r WHERE r.conversation_id = c.conversation_id), '[]')
        """
    )
    op.drop_table("rolling_context_entries")
    op.drop_index("ix_entity_provenance_summary", table_name="entity_provenance")
    op.drop_index("ix_relation_provenance_worded", table_name="relation_provenance")
    for column in ("summary_sources", "summary", "type", "name"):
        op.drop_column("entity_provenance", column)
    for column in ("sources", "embedding", "valid_from", "fact"):
        op.drop_column("relation_provenance", column)
