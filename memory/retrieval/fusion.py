"""Reciprocal rank fusion and the preferences applied to fused scores. Pure functions.

RRF (Cormack et al. 2009): a document's score is the sum over ranked lists of
``1 / (k + rank)``, rank starting at 1, so agreement between lists (vector and
full-text, several query variants) beats a high rank in one list, and no score
calibration between the lists is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

# A superseded fact keeps this share of its fused score unless the question asks about
# the past: still findable as history, but below the fact that replaced it.
SUPERSEDED_WEIGHT = 0.5
# Messages inside a time range the question names get this factor.
IN_RANGE_WEIGHT = 1.5
# When the question asks when, messages that name a time get this factor.
STATES_TIME_WEIGHT = 1.5
# When the question names one speaker, that speaker's own messages get this factor: what
# someone did, has or thinks is mostly told by themselves (on LoCoMo 96% of the
# evidence turns of such questions are the named speaker's).
NAMED_SPEAKER_WEIGHT = 1.5


def reciprocal_rank_fusion(
    rankings: Iterable[Sequence[K]], k: int = 60, weights: Sequence[float] | None = None
) -> dict[K, float]:
    """Fused scores; a key repeated within one list counts at its best rank only.
    ``weights`` (one per list, default 1) scale each list's contribution."""
    scores: dict[K, float] = {}
    rankings = list(rankings)
    for ranking, list_weight in zip(rankings, weights if weights is not None else [1.0] * len(rankings), strict=True):
        seen: set[K] = set()
        for rank, key in enumerate(ranking, start=1):
            if key in seen:
                continue
            seen.add(key)
            scores[key] = scores.get(key, 0.0) + list_weight / (k + rank)
    return scores


def spread_to_neighbours(scores: Mapping[K, float], neighbours: Mapping[K, Sequence[K]], share: float) -> dict[K, float]:
    """Each key also gains ``share`` of the best score among the keys it neighbours
    (keys with no score of their own enter the result with that alone): a message and
    the ones next to it in the chain are one exchange, and the half that holds the
    answer often shares few words with the question ("Since I was 17" after "How long
    have you been painting?"). Pure."""
    gained: dict[K, float] = {}
    for key, around in neighbours.items():
        if key not in scores:
            continue
        for neighbour in around:
            gained[neighbour] = max(gained.get(neighbour, 0.0), share * scores[key])
    result = dict(scores)
    for key, gain in gained.items():
        result[key] = result.get(key, 0.0) + gain
    return result


def weigh(scores: Mapping[K, float], weight: Callable[[K], float]) -> dict[K, float]:
    return {key: score * weight(key) for key, score in scores.items()}


def ranked(scores: Mapping[K, float], tie_break: Callable[[K], object] | None = None) -> list[K]:
    """Keys by descending score; ties in a stable, caller-defined order."""
    return sorted(scores, key=lambda key: (-scores[key], tie_break(key) if tie_break else 0))


def preference_weight(
    *,
    is_current: bool,
    in_time_range: bool,
    prefer_current: bool,
    answers_when: bool = False,
    by_named_speaker: bool = False,
) -> float:
    """The multiplier for one document: superseded facts down (unless the question is
    about the past), messages from the asked-about time up, for a question asking
    when, messages that name a time up, and the messages of the speaker the question
    names up."""
    weight = STATES_TIME_WEIGHT if answers_when else 1.0
    if by_named_speaker:
        weight *= NAMED_SPEAKER_WEIGHT
    if prefer_current and not is_current:
        weight *= SUPERSEDED_WEIGHT
    if in_time_range:
        weight *= IN_RANGE_WEIGHT
    return weight
