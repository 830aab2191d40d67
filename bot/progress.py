"""Progress bars on standard error (off when it is not a terminal)."""

from __future__ import annotations

from typing import Never

from tqdm import tqdm


def progress(total: int | None, description: str) -> tqdm[Never]:
    """A bar to ``total`` (None: a count of unknown end, e.g. a channel's history)."""
    return tqdm(total=total, desc=description, unit="msg", file=None, disable=None, leave=False)
