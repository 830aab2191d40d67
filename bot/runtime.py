"""Build a Memory from Settings: pick the database (configured or embedded), the
embedder (API or local) and, when configured, the LLM."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import AsyncIterator

from bot.settings import Settings
from memory.core import Memory, open_memory
from memory.embedded import start_embedded
from memory.embedder import Embedder, LocalEmbedder, OpenAIEmbedder


def build_embedder(settings: Settings) -> Embedder:
    if settings.embedding_base_url or settings.embedding_api_key:
        return OpenAIEmbedder(
            base_url=settings.embedding_base_url,
            api_key=settings.embedding_api_key or "unused",
            model=settings.embedding_model,
            dim=settings.embedding_dim,
        )
    return LocalEmbedder()


def database_url(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    return start_embedded(settings.data_dir, settings.database_name)


@asynccontextmanager
async def memory_from_settings(settings: Settings, embedder: Embedder | None = None) -> AsyncIterator[Memory]:
    memory = await open_memory(database_url(settings), embedder or build_embedder(settings))
    try:
        yield memory
    finally:
        await memory.close()
