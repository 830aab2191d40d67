"""The Memory handle: one database, one embedder, an optional LLM, the parameters and
the platform user ids allowed to audit every conversation.

Every core command takes a Memory; the bot layer builds it from settings (the core
reads no environment).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memory.errors import ConfigurationError
from memory.models.embedder import Embedder
from memory.models.llm import LLMClient
from memory.params import MemoryParams
from memory.privacy.optouts import OptoutCache
from memory.store.database import (
    check_embedding_dim,
    create_engine,
    session_factory,
    upgrade,
    warn_if_pgvector_is_old,
    warn_if_vectors_are_stale,
)


@dataclass
class Memory:
    """The handle every command takes. The database handles are private: code outside
    memory/ reaches the tables through the core's commands only (tests/architecture/test_public_imports.py)."""

    _engine: AsyncEngine
    _sessions: async_sessionmaker[AsyncSession]
    embedder: Embedder
    llm: LLMClient | None = None
    params: MemoryParams = field(default_factory=MemoryParams)
    admin_ids: frozenset[str] = frozenset()  # platform user ids allowed to audit (STASHBIRD_ADMIN_IDS)
    retention_days: int | None = None  # the default retention window (STASHBIRD_RETENTION_DAYS; None: keep)
    _optouts: OptoutCache = field(default_factory=OptoutCache, repr=False, compare=False)

    @property
    def database_url(self) -> str:
        """The database's URL, password included: for a part that keeps tables of its own
        in the same database (the Slack installation store), never the core's tables."""
        return self._engine.url.render_as_string(hide_password=False)

    async def on_this_loop(self) -> Memory:
        """The same memory with a connection pool of its own, for another thread's event
        loop (a pool belongs to the loop that made it): same database, embedder,
        parameters and admins, no LLM. Close it with ``close_database`` (the embedder
        stays this one's)."""
        return await open_memory(
            self.database_url,
            self.embedder,
            params=self.params,
            migrate=False,
            admin_ids=self.admin_ids,
            retention_days=self.retention_days,
        )

    async def close_database(self) -> None:
        """Close the database pool only."""
        await self._engine.dispose()

    async def close(self) -> None:
        """Close the database pool, the embedder and the LLM client."""
        await self._engine.dispose()
        await self.embedder.close()
        if self.llm is not None:
            await self.llm.close()


async def open_memory(
    database_url: str,
    embedder: Embedder,
    llm: LLMClient | None = None,
    params: MemoryParams | None = None,
    migrate: bool = True,
    admin_ids: frozenset[str] = frozenset(),
    retention_days: int | None = None,
) -> Memory:
    """Connect, migrate to head (by default), check the embedding dimension, then wait
    until the embedder is loaded (the local model loads in a thread meanwhile). A URL
    that cannot be used or a server that cannot be reached or refuses us is one
    ``ConfigurationError`` naming the URL (without its password)."""
    try:
        engine = create_engine(database_url)
    except (ArgumentError, ValueError) as error:  # NoSuchModuleError is an ArgumentError
        raise ConfigurationError(f"database URL cannot be used: {error}") from None
    try:
        await _check_database(engine, embedder.dim, migrate)
        await embedder.loaded()  # after: a model file that cannot be read is not the database's fault
    except BaseException:
        await engine.dispose()
        raise
    return Memory(engine, session_factory(engine), embedder, llm, params or MemoryParams(), admin_ids, retention_days)


async def _check_database(engine: AsyncEngine, dim: int, migrate: bool) -> None:
    """Migrate (when asked), check the embedding dimension and warn of stale vectors; a
    server that cannot be reached or refuses us is one ``ConfigurationError``."""
    try:
        if migrate:
            await upgrade(engine, dim)
        await check_embedding_dim(engine, dim)
        await warn_if_vectors_are_stale(engine)
        await warn_if_pgvector_is_old(engine)
    except (OSError, TimeoutError, DBAPIError) as error:
        detail = str(error.orig if isinstance(error, DBAPIError) else error).strip().splitlines()[0]
        where = engine.url.render_as_string(hide_password=True)
        raise ConfigurationError(f"cannot open the database at {where}: {detail}") from error
