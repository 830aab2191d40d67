"""Episode search documents hold the message text alone, without "Speaker: " first.

The full-text vector follows at once (``tsv`` is generated from ``text``). The vectors
were embedded from the prefixed text and cannot be recomputed in SQL: they stay usable,
with the speaker's pull they had, until ``stashbird reindex`` embeds the messages again
(memory.episodes.reindex). Databases holding such vectors are marked in store_settings
(``episode_vectors = speaker-prefixed``); start-up logs a warning while the mark is
there, and a reindex of every conversation removes it. Downgrading puts the prefix
back in the text; vectors already re-embedded stay as they are.

Revision ID: 0004
Revises: 0009
"""

from alembic import op

revision = "0004"
down_revision = "0009"
branch_labels = None
depends_on = None


_PREFIXED = (
    "FROM episodes e WHERE d.kind = 'episode' AND d.ref_id = e.id AND d.conversation_id = e.conversation_id AND d.text <> e.text"
)


def upgrade() -> None:
    # Marked only where documents still held the prefix: their vectors were embedded from it.
    op.execute(
        "INSERT INTO store_settings (key, value) SELECT 'episode_vectors', 'speaker-prefixed' "
        f"WHERE EXISTS (SELECT 1 FROM search_documents d, episodes e {_PREFIXED.removeprefix('FROM episodes e ')}) "
        "ON CONFLICT (key) DO NOTHING"
    )
    op.execute(f"UPDATE search_documents d SET text = e.text {_PREFIXED}")


def downgrade() -> None:
    op.execute(
        "UPDATE search_documents d SET text = s.display_name || ': ' || e.text FROM episodes e "
        "JOIN speakers s ON s.id = e.speaker_id "
        "WHERE d.kind = 'episode' AND d.ref_id = e.id AND d.conversation_id = e.conversation_id"
    )
    op.execute("DELETE FROM store_settings WHERE key = 'episode_vectors'")
