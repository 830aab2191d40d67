"""How much a community was used lately: the order dirty communities are regenerated in.

Each answer counts one use of every community its evidence came from (a community
document it retrieved, or a community of an entity in its evidence: an entity or a
relation's end it showed, or an entity a message it showed supports). The count decays
with a half-life of ``HALF_LIFE_SECONDS`` (7 days): ``communities.used_score`` is the
score at ``used_at`` (migration 0019), and at a later time it is
``score * 0.5 ** (age / half_life)``; a use adds 1 to the decayed score. Exponential decay
scales every score by the same factor over the same time, so the order of two scores
never changes as time passes, only as uses arrive: ranking needs no periodic rewrite.

The scheduler regenerates the most used dirty community first (ties: the one dirty the
longest), so a busy topic's summary comes back first and a cold one's waits out of
search (a dirty community has no search document) until the others are done.

``decayed`` is the rule; ``decayed_sql`` is the same rule for statements that rank or
update rows in the database (tests/test_community_use.py checks they agree).
"""

from __future__ import annotations

HALF_LIFE_SECONDS = 7 * 24 * 3600.0


def decayed(score: float, age_seconds: float, half_life_seconds: float = HALF_LIFE_SECONDS) -> float:
    """``score`` recorded ``age_seconds`` ago, as it stands now (a negative age, another
    node's clock ahead, counts as none). Pure."""
    return score * float(0.5 ** (max(age_seconds, 0.0) / half_life_seconds))


def used(score: float, age_seconds: float, half_life_seconds: float = HALF_LIFE_SECONDS) -> float:
    """The score after one more use now, of ``score`` recorded ``age_seconds`` ago. Pure."""
    return decayed(score, age_seconds, half_life_seconds) + 1.0


def decayed_sql(score: str, at: str, now: str = "now()") -> str:
    """``decayed`` of the columns ``score`` and ``at`` (its timestamp, NULL: never used,
    0) at ``now``, as SQL. A statement that writes with it binds ``now`` as a parameter:
    Citus refuses a non-immutable function such as ``now()`` inside CASE in an UPDATE."""
    age = f"greatest(extract(epoch FROM {now} - ({at}))::float8, 0)"
    decay = f"power(0.5::float8, {age} / {HALF_LIFE_SECONDS!r})"
    return f"CASE WHEN ({at}) IS NULL THEN 0::float8 ELSE ({score}) * {decay} END"
