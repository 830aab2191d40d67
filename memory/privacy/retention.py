"""Retention windows, the pure rules: which window applies to a conversation, and which
messages are past it.

A conversation's own window (``/memory retention``, ``stashbird retention``) overrides the
store's default (``STASHBIRD_RETENTION_DAYS``), and may be "off" (keep everything) even
when a default is set: a channel whose people want its history kept says so. A message
is past the window when it was *said* (its message time, not when it reached us) more
than the window's days before now; a message exactly at the boundary is kept. So a
backfilled year of history in a 90-day conversation keeps its last 90 days.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from memory.errors import ValidationError

MAX_DAYS = 36_500  # a hundred years: anything longer is "off"

Source = Literal["conversation", "default", "none"]


@dataclass(frozen=True)
class Retention:
    """The window that applies to a conversation: ``days`` None keeps everything;
    ``source`` says where it comes from (its own setting, the store's default, neither)."""

    days: int | None
    source: Source

    def describe(self) -> str:
        """How long messages are kept, in words (the CLI, ``/memory privacy``)."""
        if self.days is None:
            return "until deleted" + (" (set for this conversation)" if self.source == "conversation" else "")
        where = "this conversation's setting" if self.source == "conversation" else "the default"
        return f"for {self.days} days ({where})"


def check_days(days: int | None, name: str = "days") -> int | None:
    """A window's days: a whole number from 1 to ``MAX_DAYS``, or None (off)."""
    if days is None:
        return None
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise ValidationError(name, f"must be a whole number of days from 1 to {MAX_DAYS}, or off, got {days!r}")
    return days


def parse_days(value: str, name: str = "days") -> int | None:
    """A window as people type it: ``N`` or ``Nd`` (``90``, ``90d``) days, or ``off``
    (None), checked as ``check_days``; anything else is refused naming ``name``. Pure."""
    word = value.strip().lower() if isinstance(value, str) else ""
    if word == "off":
        return None
    number = word.removesuffix("d")
    if not (number.isascii() and number.isdigit()):  # "²" is a digit to isdigit, not to int
        raise ValidationError(name, f"must be a number of days (90, 90d) or off, got {value!r}")
    return check_days(int(number), name)


def window(own: tuple[int | None] | None, default: int | None) -> Retention:
    """The window that applies: the conversation's own (``own``: ``(days,)``, None when it
    has none), else the default, else none. Pure."""
    if own is not None:
        return Retention(own[0], "conversation")
    return Retention(default, "default") if default is not None else Retention(None, "none")


def cutoff(now: datetime, days: int) -> datetime:
    """Messages said before this are past a window of ``days``. Pure."""
    return now - timedelta(days=days)


def past_window(messages: Sequence[tuple[int, datetime]], now: datetime, days: int | None, limit: int) -> list[int]:
    """Of ``(episode id, message time)`` pairs, the ids past the window, oldest first (ties
    by id), at most ``limit``: what one batch of the retention job forgets. Pure."""
    if days is None:
        return []
    before = cutoff(now, days)
    due = sorted((at, episode_id) for episode_id, at in messages if at < before)
    return [episode_id for _, episode_id in due[: max(0, limit)]]


def expires_at(oldest: datetime | None, days: int | None) -> datetime | None:
    """When the oldest message passes the window (None: nothing will): when the retention
    job next has work in the conversation, unless older messages arrive. Pure."""
    if oldest is None or days is None:
        return None
    return oldest + timedelta(days=days)
