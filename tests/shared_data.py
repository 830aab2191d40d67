"""The shared data beside the checkout (../shared/data; a worktree sits one level deeper
than main), for test modules that need a LoCoMo file: absent, the module is skipped at
collection, with the reason, instead of failing to import."""

from __future__ import annotations

from pathlib import Path

import pytest


def shared_file(relative: str, start: Path | None = None) -> Path:
    """``shared/data/<relative>`` in the nearest parent of ``start`` (this file) that
    has it; skips the calling module when none has."""
    here = (start or Path(__file__)).resolve()
    for parent in here.parents:
        candidate = parent / "shared" / "data" / relative
        if candidate.is_file():
            return candidate
    pytest.skip(f"shared/data/{relative} is not beside the checkout", allow_module_level=True)
