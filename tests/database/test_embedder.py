"""Integration: the local embedder's model loads in a thread, and ``open_memory`` waits
for it, so a model that cannot load fails opening the memory, as before, with its own
error (the other tests embed through the session-wide embedder of conftest)."""

from __future__ import annotations

from pathlib import Path

import pytest

import memory.models.embedder as embedder_module
from memory import ConfigurationError, LocalEmbedder, open_memory


@pytest.mark.parametrize("fault", ["swapped", "missing"])
async def test_a_model_that_cannot_load_fails_opening_the_memory_with_its_own_error(
    fault: str, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A swapped model file (its hash no longer the pinned one) or a missing one is the
    loader's error, not a database error (a missing file is an OSError, as a refused
    connection is), and ``open_memory`` raises it, not a later embedding."""
    if fault == "swapped":
        monkeypatch.setattr(embedder_module, "MODEL_SHA256", "0" * 64)
        expected: type[Exception] = ValueError
    else:
        monkeypatch.setattr(embedder_module, "_package_dir", lambda name: tmp_path)  # installed without its files
        expected = FileNotFoundError
    broken = LocalEmbedder()
    with pytest.raises(expected, match="local embedding file") as raised:
        await open_memory(database_url, broken)
    assert not isinstance(raised.value, ConfigurationError)
    with pytest.raises(expected):
        broken.embed_sync(["never embedded"])
