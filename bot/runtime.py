"""Build a Memory from Settings: pick the database (configured or embedded), the
embedder (API or local) and, when configured, the LLM.

The memory core behind ``open_memory`` (sqlalchemy, the schema) and the LLM client
(pydantic, openai) are imported when a memory is opened, after the local model has
begun to load and the embedded server to start, each in a thread: the imports, the
server's start and the model's load overlap.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from functools import cache
from typing import TYPE_CHECKING, AsyncIterator

from bot.settings import Settings
from memory import ConfigurationError, Embedder, LocalEmbedder, OpenAIEmbedder, start_embedded

if TYPE_CHECKING:
    from memory import LLMClient, Memory


def build_embedder(settings: Settings) -> Embedder:
    if settings.embedding_base_url or settings.embedding_api_key:
        return OpenAIEmbedder(
            base_url=settings.embedding_base_url,
            api_key=settings.embedding_api_key or "unused",
            model=settings.embedding_model,
            dim=settings.embedding_dim,
        )
    if settings.embedding_dim != LocalEmbedder.dim:
        raise ConfigurationError(
            f"STASHBIRD_EMBEDDING_DIM is {settings.embedding_dim}, but the local embedder (no "
            f"STASHBIRD_EMBEDDING_BASE_URL) makes {LocalEmbedder.dim}-dimensional vectors; unset it or configure an endpoint"
        )
    return _local_embedder(settings.embedding_threads)


@cache
def _local_embedder(threads: int) -> LocalEmbedder:
    """One per process: loading the model is most of a short command's start-up, and a
    process that runs several commands (tests, a service) needs it once."""
    return LocalEmbedder(threads=threads)


def build_llm(settings: Settings) -> LLMClient | None:
    """The configured LLM, or None (offline mode) when no LLM base URL or key is set."""
    if not settings.llm_enabled:
        return None
    from memory import LLMClient

    return LLMClient(
        base_url=settings.llm_base_url,
        # A local OpenAI-compatible server usually needs no key, but the client wants one.
        api_key=settings.llm_api_key or "unused",
        model=settings.llm_model,
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
        response_format=settings.llm_response_format,
    )


def database_url(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    return start_embedded(settings.data_dir, settings.database_name)


@asynccontextmanager
async def memory_from_settings(settings: Settings, embedder: Embedder | None = None) -> AsyncIterator[Memory]:
    """The memory of ``settings``. The local embedder's model loads and the embedded
    server starts, each in a thread, while the core is imported; ``open_memory`` waits
    for the model, so that one that cannot load fails the command before its work
    begins, as the database does."""
    embedder = embedder or build_embedder(settings)  # first: its model loads meanwhile
    url = asyncio.get_running_loop().run_in_executor(None, database_url, settings)  # the server starts meanwhile
    llm = build_llm(settings)
    try:
        from memory import open_memory

        memory = await open_memory(
            await url, embedder, llm=llm, admin_ids=settings.admins, retention_days=settings.retention_days
        )
    except BaseException:
        if llm is not None:
            await llm.close()
        raise
    try:
        yield memory
    finally:
        await memory.close()
