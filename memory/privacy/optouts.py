"""The opt-out flags as ingest reads them: cached per workspace, so that storing a message
does not cost a query for the flags each time.

A workspace's flags are read whole (few people opt out) and kept for ``seconds``; a
change made through this process drops its entry at once, and ``set_optout`` returns only
once ``seconds`` have passed since it committed, so that by then every process's entry
read before the change has expired: a message checked after ``set_optout`` returns, in any
process, is checked against the new flag. An entry's age counts from before its read
began, so a read that raced the change is never kept past that bound either.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from memory.store.conversations import Workspace

CACHE_SECONDS = 1.0


class OptoutCache:
    """Workspace -> (monotonic time its read began, the ids opted out there)."""

    def __init__(self, seconds: float = CACHE_SECONDS) -> None:
        self.seconds = seconds
        self._held: dict[Workspace, tuple[float, frozenset[str]]] = {}

    async def get(self, workspace: Workspace, read: Callable[[], Awaitable[frozenset[str]]]) -> frozenset[str]:
        """The ids opted out of ``workspace``: the cached ones while fresh, else ``read()``."""
        held = self._held.get(workspace)
        now = time.monotonic()
        if held is not None and now - held[0] < self.seconds:
            return held[1]
        ids = await read()
        self._held[workspace] = (now, ids)
        return ids

    def drop(self, workspace: Workspace) -> None:
        """This process changed the workspace's flags: read them again next time."""
        self._held.pop(workspace, None)
