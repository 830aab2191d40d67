"""The Memory handle: one database, one embedder, an optional LLM, the parameters and
the platform user ids allowed to audit every conversation.

Every core command takes a Memory; the bot layer builds it from settings (the core
reads no environment).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memory.models.embedder import Embedder
from memory.models.llm import LLMClient
from memory.params import MemoryParams
from memory.store.database import (
    check_embedding_dim,
    create_engine,
    session_factory,
    upgrade,
)


@dataclass
class Memory:
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    embedder: Embedder
    llm: LLMClient | None = None
    params: MemoryParams = field(default_factory=MemoryParams)
    admin_ids: frozenset[str] = frozenset()  # platform user ids allowed to audit (STASHBIRD_ADMIN_IDS)

    async def close(self) -> None:
        await self.engine.dispose()
        if self.llm is not None:
            await self.llm.close()


async def open_memory(
    database_url: str,
    embedder: Embedder,
    llm: LLMClient | None = None,
    params: MemoryParams | None = None,
    migrate: bool = True,
    admin_ids: frozenset[str] = frozenset(),
) -> Memory:
    """Connect, migrate to head (by default) and check the embedding dimension."""
    engine = create_engine(database_url)
    try:
        if migrate:
            await upgrade(engine, embedder.dim)
        await check_embedding_dim(engine, embedder.dim)
    except BaseException:
        await engine.dispose()
        raise
    return Memory(engine, session_factory(engine), embedder, llm, params or MemoryParams(), admin_ids)
