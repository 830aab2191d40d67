"""Where more than two people talk, a message is searched by its own vector.

Until now every message was searched by its own vector plus half its predecessor's in
the chain (migration 0002). Where more than two people talk, the message before is most
often another conversation's, so a message is now searched with its predecessor only
when it replies in a thread after a message of that thread
(memory.episodes.exchange_vectors.joins_predecessor). This migration applies the rule to
the stored documents of every conversation with more than two speakers: each of their
messages whose predecessor does not join is given its own vector as its searched one
(messages without an own vector, bulk benchmark rows, keep theirs). A conversation at
most two people talk in is not touched. Each conversation is one statement (on Citus,
routed to its shard); a rewritten document is a new entry in its conversation's vector
index, so a store whose busy channels hold most of its messages spends about as long
here as on building those indexes.

The downgrade gives those messages their predecessor's share back, as 0002 computed it.

Revision ID: 0026
Revises: 0025
"""

import sqlalchemy as sa

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

_GROUPS = sa.text("SELECT conversation_id FROM speakers GROUP BY conversation_id HAVING count(*) > 2 ORDER BY 1")
# The predecessor joins a reply in a thread after a message of that thread.
_JOINS = "COALESCE(e.thread_id <> e.platform_message_id AND e.thread_id IN (p.thread_id, p.platform_message_id), false)"
_OWN = "e.embedding"
_WITH_PREVIOUS = (
    "CASE WHEN p.embedding IS NULL THEN e.embedding ELSE CAST(CAST(e.embedding AS vector) + CAST(p.embedding AS vector) "
    "* CAST(array_fill(CAST(0.5 AS real), ARRAY[vector_dims(p.embedding)]) AS vector) AS halfvec) END"
)


def _rewrite(searched: str) -> None:
    statement = sa.text(
        f"UPDATE search_documents d SET embedding = {searched} FROM episodes e "
        "JOIN episodes p ON p.conversation_id = :c AND p.id = e.prev_id "
        f"WHERE e.conversation_id = :c AND e.embedding IS NOT NULL AND NOT {_JOINS} "
        "AND d.conversation_id = :c AND d.kind = 'episode' AND d.ref_id = e.id"
    )
    bind = op.get_bind()
    for (conversation,) in bind.execute(_GROUPS).all():
        bind.execute(statement, {"c": conversation})


def upgrade() -> None:
    _rewrite(_OWN)


def downgrade() -> None:
    _rewrite(_WITH_PREVIOUS)
