"""The missed-deletion sweep, platform-neutral part: compare a conversation's recently
stored messages with what the platform still lists, and forget what it no longer does.

Slack gives up on an event after three failed deliveries and has no API listing
deletions; Discord's gateway misses deletes while the bot is offline. So every stored
message of the last N days (``STASHBIRD_SWEEP_DAYS``, default 7) is checked against the
platform's history. The stored ids are read *before* the history is fetched: a message
stored in between is then not among those checked, rather than wrongly missing from a
history fetched before it existed. A history fetch that fails forgets nothing.

A history that comes back short for a reason other than deletion (a proxy answering
``ok`` with no messages, a platform incident, a paging bug) must not forget a week of a
channel at once: when more than ``max_share`` of a channel's checked messages (and at
least ``min_missing``) are missing in one pass, the sweep forgets nothing there, logs it
at error level, counts it (``stashbird_sweep_refused_total``) and says so in its report
(``stashbird sweep`` prints it; the scheduler's job result keeps it). The channel itself
being gone is the one case that drops it all (the platform connector's sweep decides
that, as before).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from connectors import metrics
from memory import ConversationRef, Memory, Principal, StoredMessage, conversations, forget, stored_messages

SWEEP = Principal.job("missed-deletion-sweep")
log = logging.getLogger(__name__)

# (conversation, the stored messages checked, the window's start) -> ids the platform still lists
PresentIds = Callable[[ConversationRef, Sequence[StoredMessage], datetime], Awaitable[set[str]]]


@dataclass
class SweepReport:
    conversation: str
    checked: int = 0
    forgotten: list[str] = field(default_factory=list)
    dropped: bool = False  # the channel itself is gone from the platform: its whole memory was dropped
    refused: str | None = None  # why this pass forgot nothing although messages were missing

    def as_dict(self) -> dict[str, object]:
        return {
            "conversation": self.conversation,
            "checked": self.checked,
            "forgotten": self.forgotten,
            "dropped": self.dropped,
            "refused": self.refused,
        }


@dataclass(frozen=True)
class SweepLimit:
    """Above ``max_share`` of the checked messages missing, and at least ``min_missing``,
    a pass forgets nothing (``STASHBIRD_SWEEP_MAX_SHARE``, ``STASHBIRD_SWEEP_MIN_MISSING``)."""

    max_share: float = 0.5
    min_missing: int = 5


_limit = SweepLimit()


def set_limit(limit: SweepLimit) -> None:
    """The limit every sweep of this process uses (``stashbird serve`` and ``stashbird
    sweep`` set it from the settings; the platform connectors' sweeps read it here)."""
    global _limit
    _limit = limit


def too_many_missing(checked: int, missing: int, limit: SweepLimit) -> bool:
    """Whether ``missing`` of ``checked`` messages is more than one pass may forget. Pure."""
    return missing >= limit.min_missing and missing > limit.max_share * checked


def missed_deletions(stored: Sequence[StoredMessage], present: Collection[str]) -> list[str]:
    """Ids of stored messages the platform no longer lists, in stored order. Pure."""
    return [m.message_id for m in stored if m.message_id not in present]


async def sweep_conversation(
    memory: Memory,
    conversation: ConversationRef,
    present_ids: PresentIds,
    days: int,
    now: datetime | None = None,
    limit: SweepLimit | None = None,
) -> SweepReport:
    """Forget the conversation's messages of the last ``days`` days that the platform no
    longer has, unless that is too many for one pass (see the module doc)."""
    since = (now or datetime.now(UTC)) - timedelta(days=days)
    stored = await stored_messages(memory, conversation, principal=SWEEP, since=since)
    report = SweepReport(str(conversation), len(stored))
    if not stored:
        return report
    present = await present_ids(conversation, stored, since)
    missing = missed_deletions(stored, present)
    if too_many_missing(len(stored), len(missing), limit or _limit):
        report.refused = (
            f"the platform's history lacks {len(missing)} of {len(stored)} checked messages: "
            "more than one pass may forget; nothing forgotten (check the history, then run `stashbird sweep`)"
        )
        log.error("sweep of %s forgot nothing: %s", conversation, report.refused)
        metrics.SWEEP_REFUSED.labels(conversation.platform).inc()
        return report
    for message_id in missing:
        await forget(memory, conversation, message_id, principal=SWEEP)
        report.forgotten.append(message_id)
    return report


# (memory, conversation, days) -> the sweep of one conversation of a platform
ConversationSweep = Callable[[Memory, ConversationRef, int], Awaitable[SweepReport]]


async def sweep_platform(memory: Memory, platform: str, sweep: ConversationSweep, days: int) -> list[SweepReport]:
    """Sweep every conversation of ``platform``; one whose history cannot be read is
    skipped and logged, not fatal."""
    reports: list[SweepReport] = []
    for conversation in await conversations(memory, principal=SWEEP, platform=platform):
        try:
            reports.append(await sweep(memory, conversation, days))
        except Exception as error:  # noqa: BLE001 - one unreadable channel must not stop the sweep
            log.warning("sweep of %s skipped: %s", conversation, error)
    return reports
