"""Who talks with whom in a conversation, and which messages are a message's exchange:
the pure rules that a hit's surroundings (``memory.retrieval.evidence``), the loan to its
exchange (``memory.retrieval.lending``) and the offline reading of the evidence
(``memory.retrieval.reading``) share. In a busy channel the messages next to one are most
often other conversations'; its exchange is its thread, or its speaker's messages and
those of the people they talk with.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.retrieval.evidence import EpisodeRef


def talks_with(speakers: Iterable[str], seen: Iterable[EpisodeRef]) -> dict[str, frozenset[str]]:
    """Whom each of ``speakers`` talks with among the authors of ``seen``: anyone whose
    message names them, or whom one of theirs names (first name, whole word, any case),
    and the only other author when there is one. Nicknames are other words and do not
    count. Each message is read once (one pattern finds where any first name may start,
    each name's own pattern decides there): an answer finds the partners of every
    speaker of a few hundred messages. Pure."""
    seen = list(seen)
    authors = {e.speaker for e in seen}
    wanted = set(speakers)
    by_first: dict[str, set[str]] = {}
    for name in authors | wanted:
        by_first.setdefault(name.split()[0] if name.split() else name, set()).add(name)
    exact = {first: _naming(first) for first in by_first}
    anywhere = re.compile(rf"(?<!\w)(?=(?:{'|'.join(map(re.escape, exact))})(?!\w))", re.IGNORECASE)
    named: dict[str, set[str]] = {}  # author -> the people their messages name
    for e in seen:
        for at in anywhere.finditer(e.text):
            for first in (f for f, pattern in exact.items() if pattern.match(e.text, at.start())):
                named.setdefault(e.speaker, set()).update(by_first[first])
    found: dict[str, frozenset[str]] = {}
    for speaker in wanted:
        others = authors - {speaker}
        named_by = {other for other in others if speaker in named.get(other, ())}
        found[speaker] = frozenset(others if len(others) <= 1 else named_by | (others & named.get(speaker, set())))
    return found


def _naming(name: str) -> re.Pattern[str]:
    first = name.split()[0] if name.split() else name
    return re.compile(rf"(?<!\w){re.escape(first)}(?!\w)", re.IGNORECASE)


def in_exchange(hit: EpisodeRef, other: EpisodeRef, talks_with: frozenset[str]) -> bool:
    """Whether ``other`` belongs to ``hit``'s exchange: for a reply in a thread, any
    message of that thread (its first included); for a message of the channel, any reply
    in its own thread and the channel's messages by its speaker or someone they talk
    with. Pure."""
    if hit.reply_in is not None:
        return hit.reply_in in (other.reply_in, other.platform_message_id)
    if other.reply_in is not None:
        return other.reply_in == hit.platform_message_id
    return other.speaker == hit.speaker or other.speaker in talks_with


def exchange_side(
    hit: EpisodeRef, side: Sequence[EpisodeRef], talks_with: frozenset[str], span: int, likeness: Mapping[int, float] | None
) -> list[EpisodeRef]:
    """The messages of the hit's exchange (``in_exchange``) on one side of it (``side``,
    nearest first), at most ``span``: the nearest first, or when the hit's speaker talks
    with more than one person and the hit is in the channel, not in a thread, the most
    alike first (``likeness``: a message's cosine with the hit, by episode id; one
    without comes last, ties nearest first). That person's conversations run side by
    side, so the next message of their exchange is as likely the other conversation's as
    the reply, and a reply is about what it answers. Pure."""
    found = [e for e in side if in_exchange(hit, e, talks_with)]
    if likeness is not None and by_likeness(hit, talks_with):
        found.sort(key=lambda e: -likeness.get(e.episode_id, -2.0))
    return found[:span]


def by_likeness(hit: EpisodeRef, talks_with: frozenset[str]) -> bool:
    """Whether the hit's exchange is taken most alike first (``exchange_side``): its
    speaker talks with more than one person, and it is in the channel, not in a thread. Pure."""
    return len(talks_with) > 1 and hit.reply_in is None
