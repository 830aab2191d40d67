"""Progress bars on standard error (off when it is not a terminal)."""

from __future__ import annotations

from tqdm import tqdm


def progress(total: int, description: str) -> tqdm:
    return tqdm(total=total, desc=description, unit="msg", file=None, disable=None, leave=False)
