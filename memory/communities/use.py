"""How much a community was used lately: the order dirty communities are regenerated in.

Each answer counts one use of every community its evidence came from (a community
document it retrieved, or a community of an entity in its evidence: an entity or a
relation's end it showed, or an entity a message it showed supports). The count decays
with a half-life of ``HALF_LIFE_SECONDS`` (7 days): ``communities.used_score`` is the
score at ``used_at`` (migration 0019), and at a later time it is
``score * 0.5 ** (age / half_life)``; a use adds 1 to the decayed score. Exponential decay
scales every score by the same factor over the same time, so the order of two scores
never changes as time passes, only as uses arrive: ranking needs no periodic rewrite.

A community is made with one use (``BIRTH_USES``): a new topic gets its first summary
while it is new, without waiting for a question to find it (none could: a dirty
community has no search document).

The scheduler regenerates the most used dirty community first (ties: the one dirty the
longest), at most ``STASHBIRD_COMMUNITY_REGENERATE_MAX`` per conversation and run, and
only warm ones: a community whose decayed score is below ``COLD_BELOW`` is *cold* and
stays dirty (its stale summary hidden, out of search and shown as dirty by the audit)
until an answer uses it through its members (an entity, a relation's end, a message
that supports one), which warms it and marks its conversation due.

Why ``COLD_BELOW`` is 0.25, two half-lives of one use: a community is warm for 14 days
after it was made or used once, ``14 + 7·log2(k)`` days after ``k`` uses at once; a topic
used at least every two weeks never goes cold (its score just before each use tends to
1/3), while one used less often than every 16 days (``log2(5)`` half-lives) goes cold
before each next use, a monthly one about two weeks after each (its members still
answer meanwhile: only the summary waits). A higher threshold (one half-life) would let
a fortnightly topic go cold between uses; a lower one would keep monthly topics
regenerated after every deletion or join nobody asks about.

``decayed`` and ``cold`` are the rule; ``decayed_sql`` and ``warm_sql`` are the same
rule for statements that rank, select or update rows in the database
(tests/database/test_community_use.py checks they agree).
"""

from __future__ import annotations

HALF_LIFE_SECONDS = 7 * 24 * 3600.0
COLD_BELOW = 0.25  # two half-lives of one use: see the module docstring
BIRTH_USES = 1.0  # the score a community is made with


def decayed(score: float, age_seconds: float, half_life_seconds: float = HALF_LIFE_SECONDS) -> float:
    """``score`` recorded ``age_seconds`` ago, as it stands now (a negative age, another
    node's clock ahead, counts as none). Pure."""
    return score * float(0.5 ** (max(age_seconds, 0.0) / half_life_seconds))


def used(score: float, age_seconds: float, half_life_seconds: float = HALF_LIFE_SECONDS) -> float:
    """The score after one more use now, of ``score`` recorded ``age_seconds`` ago. Pure."""
    return decayed(score, age_seconds, half_life_seconds) + 1.0


def cold(score: float, age_seconds: float, half_life_seconds: float = HALF_LIFE_SECONDS) -> bool:
    """Not used lately: ``score`` recorded ``age_seconds`` ago has decayed below
    ``COLD_BELOW``; its community waits, dirty, for an answer to use it. Pure."""
    return decayed(score, age_seconds, half_life_seconds) < COLD_BELOW


def decayed_sql(score: str, at: str, now: str = "now()") -> str:
    """``decayed`` of the columns ``score`` and ``at`` (its timestamp, NULL: never used,
    0) at ``now``, as SQL. A statement that writes with it binds ``now`` as a parameter:
    Citus refuses a non-immutable function such as ``now()`` inside CASE in an UPDATE."""
    age = f"greatest(extract(epoch FROM {now} - ({at}))::float8, 0)"
    decay = f"power(0.5::float8, {age} / {HALF_LIFE_SECONDS!r})"
    return f"CASE WHEN ({at}) IS NULL THEN 0::float8 ELSE ({score}) * {decay} END"


def warm_sql(score: str, at: str, now: str = "now()") -> str:
    """``not cold`` of the columns ``score`` and ``at`` at ``now``, as SQL."""
    return f"({decayed_sql(score, at, now)}) >= {COLD_BELOW!r}"
