"""Engine creation, migration to head and the start-up checks of a store."""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import NullPool

from memory.errors import ConfigurationError
from memory.store.locks import lock_migrations

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "alembic"
_REVISION_LINE = re.compile(r"^(revision|down_revision)(?:: [^=]+)? = (.+)$", re.MULTILINE)


log = logging.getLogger(__name__)


def async_url(url: str) -> str:
    """Accept plain ``postgresql://`` URLs as users write them and use asyncpg; any
    other kind of URL is refused (only Postgres with pgvector holds the memory)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    if not url.startswith("postgresql+asyncpg://"):
        scheme = url.split("://")[0][:20] if "://" in url else "no scheme"
        raise ConfigurationError(f"database URL must start with postgresql:// (got {scheme})")
    return url


# Citus hides its shards from a session's catalogue reads by filtering pg_class through a
# function, row by row. asyncpg reads pg_class once per connection for each type it has no
# codec for yet (halfvec, bigint[], float8[], name[]: the composite types' attributes, for
# every type in the database), and on a Citus node that read took 0.4-1 s instead of 2 ms:
# a command that opens a few connections waited seconds on it (the cluster suite's
# slowdown). Only that read goes without the filter; the session's own reads keep it, so a
# coordinator that holds shards still never lists them as tables of its own.
_SHARDS_SHOWN = (
    "SELECT set_config('citus.override_table_visibility', 'off', false) "
    "WHERE current_setting('citus.override_table_visibility', true) = 'on'"
)
_SHARDS_HIDDEN = "SELECT set_config('citus.override_table_visibility', 'on', false)"


class _Connection(asyncpg.Connection):  # type: ignore[misc]
    """asyncpg's connection whose type lookups on a Citus node skip the shard filter.
    ``_introspect_types`` is asyncpg's own (unchanged since 0.22): pyproject.toml keeps
    asyncpg below the next minor version, to be checked against it."""

    async def _introspect_types(self, typeoids: Any, timeout: Any) -> Any:
        # asyncpg's own statement path, as its lookup uses: a lookup may come in the middle
        # of another operation (an executemany), where the public methods refuse to run.
        execute = self._Connection__execute
        shown, _ = await execute(_SHARDS_SHOWN, (), 0, timeout, ignore_custom_codec=True)
        try:
            return await super()._introspect_types(typeoids, timeout)
        finally:
            if shown:
                await execute(_SHARDS_HIDDEN, (), 0, timeout, ignore_custom_codec=True)


def create_engine(url: str, pool_size: int | None = 5) -> AsyncEngine:
    """An engine on ``url`` with a pool of ``pool_size`` connections (None: a connection
    per use, for a one-off job or a loop of its own)."""
    pooling: dict[str, Any] = (
        {"poolclass": NullPool} if pool_size is None else {"pool_size": pool_size, "max_overflow": 10, "pool_pre_ping": True}
    )
    return create_async_engine(async_url(url), connect_args={"connection_class": _Connection}, **pooling)


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


_CUSTOM_PLANS = text("SELECT set_config('plan_cache_mode', 'force_custom_plan', true)")


async def custom_plans(session: AsyncSession) -> None:
    """Plan the rest of this transaction's statements with their values. asyncpg
    prepares every statement, and after five runs Postgres may keep a generic plan,
    which knows no conversation: conversations' sizes are skewed (Zipf), so a plan
    costed for an average one is wrong for the largest, and it cannot use a
    conversation's own partial indexes (memory.store.vector_indexes)."""
    await session.execute(_CUSTOM_PLANS)


def _alembic_config(connection: Connection, embedding_dim: int) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    config.attributes["embedding_dim"] = embedding_dim
    return config


async def _run_migration(engine: AsyncEngine, embedding_dim: int, step: Callable[[Config], None]) -> None:
    """Run one alembic command on a connection of ours.

    A transaction-level advisory lock keeps two processes from migrating at once.
    Migrations change every conversation's rows at once, from the coordinator under
    Citus: their statements carry the ``stashbird_migration`` execution option, which
    the test suite's routing check (tests/routing.py) leaves out.
    """

    def run(connection: Connection) -> None:
        lock_migrations(connection)
        step(_alembic_config(connection, embedding_dim))

    async with engine.begin() as connection:
        await connection.execution_options(stashbird_migration=True)
        await connection.run_sync(run)


@cache
def head_revision(versions: Path = MIGRATIONS_DIR / "versions") -> str | None:
    """The one head of the migration chain, read from the scripts' ``revision`` and
    ``down_revision`` lines without loading alembic (None: not exactly one head)."""
    revisions: set[str] = set()
    below: set[str] = set()
    for script in versions.glob("*.py"):
        found = dict(_REVISION_LINE.findall(script.read_text(encoding="utf-8")))
        if "revision" in found:
            revisions.add(ast.literal_eval(found["revision"]))
        down = ast.literal_eval(found.get("down_revision", "None"))
        below |= {down} if isinstance(down, str) else set(down or ())
    heads = revisions - below
    return heads.pop() if len(heads) == 1 else None


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at (None: never migrated)."""
    async with engine.connect() as connection:
        if (await connection.execute(text("SELECT to_regclass('alembic_version')"))).scalar() is None:
            return None
        return (await connection.execute(text("SELECT version_num FROM alembic_version"))).scalar()


async def upgrade(engine: AsyncEngine, embedding_dim: int, revision: str = "head") -> None:
    """Migrate to ``revision``. A database already at head costs two small queries and
    alembic is not loaded (it is most of a short command's start-up otherwise)."""
    if revision == "head" and (head := head_revision()) is not None and await current_revision(engine) == head:
        return
    from alembic import command

    await _run_migration(engine, embedding_dim, lambda config: command.upgrade(config, revision))


async def downgrade(engine: AsyncEngine, revision: str = "base") -> None:
    from alembic import command

    await _run_migration(engine, 0, lambda config: command.downgrade(config, revision))


async def check_embedding_dim(engine: AsyncEngine, embedding_dim: int) -> None:
    """Refuse to run an embedder whose vectors do not fit the store's columns."""
    async with engine.connect() as connection:
        stored = (await connection.execute(text("SELECT value FROM store_settings WHERE key = 'embedding_dim'"))).scalar()
    if stored is not None and int(stored) != embedding_dim:
        raise ConfigurationError(
            f"embedding dimension mismatch: this database stores {stored}-dimensional vectors "
            f"but the configured embedder produces {embedding_dim}; use a matching "
            "embedding model, set STASHBIRD_EMBEDDING_DIM accordingly, or use a new database"
        )


# pgvector's release from which the store takes what it offers (iterative index scans);
# 0.7 still serves every search, by the plans it has.
RECOMMENDED_PGVECTOR = (0, 8)
# The first release with ``halfvec``, the type the store's vectors have since migration
# 0023: an older one cannot hold the store at all.
REQUIRED_PGVECTOR = (0, 7)


def _release(version: str | None) -> tuple[int, ...]:
    return tuple(int(part) for part in (version or "0").split(".")[:2] if part.isdigit())


def pgvector_advice(version: str | None) -> str | None:
    """What to tell an operator whose ``vector`` extension is at ``version`` (None when
    it is recent enough). Pure."""
    if _release(version) >= RECOMMENDED_PGVECTOR:
        return None
    wanted = ".".join(map(str, RECOMMENDED_PGVECTOR))
    return (
        f"pgvector {version} on this server: {wanted} or later is recommended (iterative index scans); "
        "searches keep working. Install it, then run ALTER EXTENSION vector UPDATE as the extension's owner"
    )


def halfvec_refusal(version: str | None) -> str | None:
    """Why the store's vectors cannot become ``halfvec`` (migration 0023) with the
    ``vector`` extension at ``version`` (None: not installed), in one line that says what
    to do; None when they can. Pure."""
    if _release(version) >= REQUIRED_PGVECTOR:
        return None
    wanted = ".".join(map(str, REQUIRED_PGVECTOR))
    return (
        f"pgvector {version} on this server has no halfvec type, which the store's vectors need from migration 0023: "
        f"install pgvector {wanted} or later (0.8 recommended), run ALTER EXTENSION vector UPDATE as the extension's "
        "owner, then start again"
    )


async def warn_if_pgvector_is_old(engine: AsyncEngine) -> None:
    """Say so at start-up when the server's pgvector is older than recommended (an
    external server; the embedded one ships 0.8)."""
    async with engine.connect() as connection:
        version = (await connection.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'"))).scalar()
    if (advice := pgvector_advice(version)) is not None:
        log.warning(advice)


async def warn_if_vectors_are_stale(engine: AsyncEngine) -> None:
    """Say so at start-up while message vectors still hold the speaker's name (migration
    0004 changed what is indexed; ``stashbird reindex`` embeds them again)."""
    async with engine.connect() as connection:
        stale = (await connection.execute(text("SELECT value FROM store_settings WHERE key = 'episode_vectors'"))).scalar()
    if stale is not None:
        log.warning(
            "message vectors were embedded with the speaker's name (before migration 0004); "
            "run `stashbird reindex` once to embed them again"
        )
