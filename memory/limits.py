"""Bounds every value the store holds is checked against before it reaches the database
(docs/reference/limits.md lists them; change them here only).

Why these numbers:

- ``MAX_TEXT_CHARS``: Slack, the most generous platform we serve, cuts a message at
  40,000 characters (Discord at 4,000). Far below what makes a message's search vector
  overflow Postgres' 1 MB ``tsvector``, and a megabyte-sized "message" is an export
  mistake, not a message.
- ``MAX_ID_CHARS``: platform message ids, user ids and conversation parts are short
  (a Slack ``ts`` is 17 characters, a Discord snowflake 19). They are unique-index keys,
  and a B-tree entry must fit in about 2,700 bytes: three conversation parts of 200
  characters of up to 4 bytes each still do.
- ``MAX_NAME_CHARS``: display names (Discord allows 32, Slack 80).
- Message times: Python's datetime holds years 1 to 9999 (in UTC), all inside Postgres'
  range (4713 BC to 294276 AD). ``MAX_EPOCH_SECONDS`` is the end of year 9999; a number
  above it that is a plausible time once divided by 1,000 was given in milliseconds.
"""

from __future__ import annotations

MAX_TEXT_CHARS = 40_000
MAX_ID_CHARS = 200
MAX_NAME_CHARS = 200
MAX_EPOCH_SECONDS = 253_402_300_799  # 9999-12-31T23:59:59Z
MIN_EPOCH_SECONDS = -62_135_596_800  # 0001-01-01T00:00:00Z
MAX_EVIDENCE_K = 500  # evidence items an answer may ask for
