"""The rules every value the store is asked to hold passes first, so the database never
refuses a value half-way through a write (limits in ``memory.limits``).

One identifier rule (``normalize_id``) serves platform message ids, user ids and the
parts of a conversation's name on every path: ingest, forget, edit, ask and the
connectors. Surrounding whitespace is stripped, not refused: no platform issues an id
with leading or trailing blanks, so they are always a copy, paste or export artefact
and never tell two messages apart, and stripping keeps an otherwise good line of an
export. Because every path strips, the id a message was stored under is the id that
deletes it. Control characters (a NUL among them) are refused in ids: no platform
issues them either, and an id is shown back to people.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

from memory.errors import ValidationError
from memory.limits import (
    MAX_EPOCH_SECONDS,
    MAX_ID_CHARS,
    MAX_NAME_CHARS,
    MAX_TEXT_CHARS,
    MIN_EPOCH_SECONDS,
)

_CONTROL = re.compile(r"[\x01-\x1f\x7f-\x9f]")  # NUL is named by check_text
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", bool: "true/false", type(None): "null"}.get(type(value), type(value).__name__)


def check_text(value: object, field: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    """``value`` if it is text Postgres can store: not blank, at most ``max_chars``
    characters, no NUL (text columns cannot hold it) and no lone surrogate (not
    Unicode, so it cannot be encoded as UTF-8)."""
    if not isinstance(value, str):
        raise ValidationError(field, f"must be text, got {_kind(value)}")
    if not value.strip():
        raise ValidationError(field, "is missing or empty")
    if len(value) > max_chars:
        raise ValidationError(field, f"is {len(value):,} characters long; the limit is {max_chars:,}")
    if "\x00" in value:
        raise ValidationError(field, f"contains a NUL character (\\u0000) at position {value.index(chr(0))}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValidationError(
            field, f"contains a lone surrogate {value[error.start]!a} at position {error.start} (not valid Unicode)"
        ) from None
    return value


def check_name(value: object, field: str) -> str:
    """A display name: text within ``MAX_NAME_CHARS``, surrounding whitespace stripped."""
    return check_text(value.strip() if isinstance(value, str) else value, field, MAX_NAME_CHARS)


def normalize_id(value: object, field: str = "id") -> str:
    """The one form of a platform identifier (message id, user id, conversation part):
    text or a whole number, surrounding whitespace stripped, no control characters, at
    most ``MAX_ID_CHARS`` characters. True/false, fractions, lists and objects are
    refused rather than turned into their Python spelling."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > 4 * MAX_ID_CHARS:  # str() of a huge int is slow, and then refused anyway
            raise ValidationError(field, f"is longer than {MAX_ID_CHARS} characters")
        value = str(value)
    elif not isinstance(value, str):
        raise ValidationError(field, f"must be text or a whole number, got {_kind(value)}")
    text = value.strip()
    control = _CONTROL.search(text[: MAX_ID_CHARS + 1])
    if control:
        raise ValidationError(field, f"contains the control character {control.group()!a} at position {control.start()}")
    return check_text(text, field, MAX_ID_CHARS)


def _from_epoch(seconds: float, field: str) -> datetime:
    if not math.isfinite(seconds):
        raise ValidationError(field, f"is not a finite number ({seconds})")
    if not MIN_EPOCH_SECONDS <= seconds <= MAX_EPOCH_SECONDS:
        if MIN_EPOCH_SECONDS <= seconds / 1000 <= MAX_EPOCH_SECONDS:
            raise ValidationError(field, f"{seconds:.0f} looks like epoch milliseconds; give seconds ({seconds / 1000:.3f})")
        raise ValidationError(field, f"epoch seconds {seconds:g} are outside the years 1 to 9999")
    return datetime.fromtimestamp(seconds, tz=UTC)


def _epoch_number(value: int | float, field: str) -> datetime:
    if isinstance(value, int) and not MIN_EPOCH_SECONDS * 1000 <= value <= MAX_EPOCH_SECONDS * 1000:
        raise ValidationError(field, "epoch seconds are outside the years 1 to 9999")  # float() would overflow
    return _from_epoch(float(value), field)


def parse_time(value: Any, field: str = "ts") -> datetime:
    """A message time, in UTC: ISO 8601 text (naive means UTC), epoch seconds as a number
    or text (Slack's ``"1712345678.000100"`` too), or a datetime. Refused: times outside
    the years 1 to 9999 once in UTC, numbers that are not finite, and epoch
    milliseconds given by mistake (named as such)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _epoch_number(value, field)
    if isinstance(value, str) and value.strip():
        text = value.strip()
        if len(text) > 64:
            raise ValidationError(field, f"is {len(text):,} characters long; not a message time")
        if _NUMBER.fullmatch(text):
            return _from_epoch(float(text), field)
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValidationError(field, f"cannot parse message time {text!a}") from None
    if not isinstance(value, datetime):
        raise ValidationError(field, "message time is missing or not a time")
    try:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:
        raise ValidationError(field, f"{value.isoformat()} is outside the years 1 to 9999 in UTC") from None


def check_json(value: object, field: str) -> None:
    """Refuse what a ``jsonb`` column cannot hold: NUL characters and lone surrogates in
    strings (keys too), and numbers that are not finite."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationError(field, "contains a NUL character (\\u0000)")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError(field, "contains a lone surrogate (not valid Unicode)") from None
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(field, f"is not a finite number ({value})")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_json(key, field)
            check_json(item, f"{field}.{key}")
    elif isinstance(value, (list, tuple)):
        for item in value:
            check_json(item, field)


def storable(value: Any) -> Any:
    """A model's reply (text, or parsed JSON) made storable: NUL characters dropped and
    lone surrogates replaced. Generated text is cleaned rather than refused, since
    refusing would lose a whole extraction or answer for one stray character."""
    if isinstance(value, str):
        return value.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [storable(item) for item in value]
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    return value
