"""Build a Memory from Settings: pick the database (configured or embedded), the
embedder (API or local) and, when configured, the LLM.

The memory core behind ``open_memory`` (sqlalchemy, the schema) and the LLM client
(pydantic, openai) are imported when a memory is opened, after the local model has
begun to load and the embedded server to start, each in a thread: the imports, the
server's start and the model's load overlap.
"""

from __future__ import annotations

import asyncio
import gc
from contextlib import asynccontextmanager
from functools import cache
from typing import TYPE_CHECKING, AsyncIterator

from bot.settings import DatabaseSettings, ModelSettings, Settings, revealed
from memory import ConfigurationError, Embedder, LocalEmbedder, OpenAIEmbedder, start_embedded

if TYPE_CHECKING:
    from memory import LLMClient, Memory


def build_embedder(models: ModelSettings) -> Embedder:
    if models.embedding_base_url or models.embedding_api_key:
        return OpenAIEmbedder(
            base_url=models.embedding_base_url,
            api_key=revealed(models.embedding_api_key) or "unused",
            model=models.embedding_model,
            dim=models.embedding_dim,
        )
    if models.embedding_dim != LocalEmbedder.dim:
        raise ConfigurationError(
            f"STASHBIRD_EMBEDDING_DIM is {models.embedding_dim}, but the local embedder (no "
            f"STASHBIRD_EMBEDDING_BASE_URL) makes {LocalEmbedder.dim}-dimensional vectors; unset it or configure an endpoint"
        )
    return _local_embedder(models.embedding_threads)


@cache
def _local_embedder(threads: int) -> LocalEmbedder:
    """One per process: loading the model is most of a short command's start-up, and a
    process that runs several commands (tests, a service) needs it once."""
    return LocalEmbedder(threads=threads)


def build_llm(models: ModelSettings) -> LLMClient | None:
    """The configured LLM, or None (offline mode) when no LLM base URL or key is set."""
    if not models.llm_enabled:
        return None
    from memory import LLMClient

    return LLMClient(
        base_url=models.llm_base_url,
        # A local OpenAI-compatible server usually needs no key, but the client wants one.
        api_key=revealed(models.llm_api_key) or "unused",
        model=models.llm_model,
        timeout=models.llm_timeout,
        max_retries=models.llm_max_retries,
        response_format=models.llm_response_format,
    )


def database_url(database: DatabaseSettings) -> str:
    if database.url:
        return database.url
    return start_embedded(database.data_dir, database.name)


@asynccontextmanager
async def memory_from_settings(settings: Settings, embedder: Embedder | None = None) -> AsyncIterator[Memory]:
    """The memory of ``settings``. The local embedder's model loads and the embedded
    server starts, each in a thread, while the core is imported; ``open_memory`` waits
    for the model, so that one that cannot load fails the command before its work
    begins, as the database does."""
    embedder = embedder or build_embedder(settings.models)  # first: its model loads meanwhile
    url = asyncio.get_running_loop().run_in_executor(None, database_url, settings.database)  # the server starts meanwhile
    llm = build_llm(settings.models)
    try:
        from memory import open_memory

        memory = await open_memory(
            await url, embedder, llm=llm, admin_ids=settings.chat.admins, retention_days=settings.chat.retention_days
        )
    except BaseException:
        if llm is not None:
            await llm.close()
        raise
    try:
        yield memory
    finally:
        await memory.close()


def settle_heap() -> None:
    """Keep what start-up made (the model's session, the ORM's mappers, imported modules:
    about 100K objects) out of the garbage collector's full collections. Each full
    collection walked them all, about 20 ms in which no request moved: the slowest
    searches of a million-message store (``gc.freeze``, as long-running servers do).
    For a process that serves, once, when it is ready."""
    gc.collect()
    gc.freeze()
