"""Fixtures: a real embedded Postgres with pgvector (fresh data folder per test run),
migrated to head, the real local embedder, and one fresh conversation per test (memory
is scoped per conversation, so tests do not see each other's data)."""

from __future__ import annotations

import dataclasses
import os
import tempfile
import uuid
from pathlib import Path

import pytest

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

from bot.testing.scripted_llm import ScriptedLLMServer  # noqa: E402
from memory.core import Memory, open_memory  # noqa: E402
from memory.models.embedder import LocalEmbedder  # noqa: E402
from memory.models.llm import LLMClient  # noqa: E402
from memory.store.conversations import ConversationRef, ensure_conversation  # noqa: E402
from memory.store.embedded import start_embedded  # noqa: E402


@pytest.fixture(scope="session")
def pg_data_dir() -> Path:
    """Outside pytest's rotating temp folders, which a concurrent pytest run may prune
    while this run's server still uses them."""
    return Path(tempfile.mkdtemp(prefix="stashbird-test-pg-"))


@pytest.fixture(scope="session")
def database_url(pg_data_dir: Path) -> str:
    return start_embedded(pg_data_dir, "stashbird_test")


@pytest.fixture(scope="session")
def new_database(pg_data_dir: Path):
    """Factory for an extra empty database on the test server (migration tests)."""

    def make() -> str:
        return start_embedded(pg_data_dir, f"scratch_{uuid.uuid4().hex[:8]}")

    return make


@pytest.fixture(scope="session")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


@pytest.fixture(scope="session")
async def memory(database_url: str, embedder: LocalEmbedder) -> Memory:
    handle = await open_memory(database_url, embedder)
    yield handle
    await handle.close()


@pytest.fixture
def conversation_ref() -> ConversationRef:
    return ConversationRef("test", "", f"c-{uuid.uuid4().hex[:12]}")


@pytest.fixture
async def conversation_id(memory: Memory, conversation_ref: ConversationRef) -> int:
    async with memory.sessions.begin() as session:
        return await ensure_conversation(session, conversation_ref)


@pytest.fixture
def scripted_llm() -> ScriptedLLMServer:
    """A started scripted OpenAI-compatible server on loopback, fresh per test."""
    with ScriptedLLMServer() as server:
        yield server


@pytest.fixture
async def llm_client(scripted_llm: ScriptedLLMServer) -> LLMClient:
    """The real LLM client pointed at ``scripted_llm``, with short timeouts and backoff."""
    client = LLMClient(
        base_url=scripted_llm.base_url, api_key="test", model="scripted", timeout=2, max_retries=2, backoff=0.01
    )
    yield client
    await client.close()


@pytest.fixture
def llm_memory(memory: Memory, llm_client: LLMClient) -> Memory:
    """The shared test Memory with ``llm_client`` as its LLM (do not close it: the engine is shared)."""
    return dataclasses.replace(memory, llm=llm_client)
