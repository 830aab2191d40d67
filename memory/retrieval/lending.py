"""A found message lends a share of its score to its exchange's messages next to it,
where more than two people talk.

In a conversation of two, the messages just before and after a found one are its
exchange (the question it answers, the reply to it), and the search lends them
``chain_share`` of its score in its own statements (``fusion.spread_to_neighbours``). In
a channel of more, the message next to a found one is most often another conversation's,
so the search lends nothing there (``pipeline.chain_share``); this step lends instead to
the nearest message of the found one's exchange on each side, as its surroundings are
chosen (``exchange.exchange_side``: its thread, or its speaker and their partners, most
alike first where the speaker talks with several), within ``LENDING_REACH`` places.

Chosen on the LoCoMo calibration split's ring channel (a probe, then ``bench retrieval
--group``): all evidence at K = 30 79.5% -> 81.1% with 6 places (8: the same; 4 or 12:
no gain), held-out 76.6% -> 76.8%; the threaded layout 80.1% -> 81.5% in the channel and
82.2% -> 83.3% in the threads (held-out 77.5% -> 78.4%, 79.5% -> 80.0%); the pairs cast
84.2% both, held-out 80.0% -> 80.8%; about 25 fewer tokens per question. The channels
interleave five conversations message by message, so the message a turn answers sits
five places back: the reach must hold one turn of each conversation talking at once,
and not much more, where the most alike message is more often someone else's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sqlalchemy.ext.asyncio import AsyncSession

from memory.retrieval.evidence import EpisodeRef, Exchanges, exchanges
from memory.retrieval.exchange import exchange_side
from memory.retrieval.fusion import ranked, spread_to_neighbours
from memory.retrieval.search import Candidate
from memory.retrieval.search_sql import Key

LENDING_REACH = 6


def exchange_neighbours(hit: EpisodeRef, near: Exchanges) -> list[EpisodeRef]:
    """The first message of the hit's exchange on each side (``exchange_side``) among
    those ``near`` loaded. Pure."""
    before, after = near.sides(hit.episode_id)
    talks_with, likeness = near.ordering(hit)
    return [found for side in (before, after) for found in exchange_side(hit, side, talks_with, 1, likeness)]


def lent(candidates: Sequence[Candidate], near: Exchanges, share: float) -> list[Candidate]:
    """The candidates after each found message in ``near`` lent ``share`` of its score
    to its exchange neighbours (a neighbour not found enters with its loan alone, its
    similarity 0 as the search's neighbours have), best first; ties as the search
    breaks them, the more similar first. Pure."""
    found = {c.key: c for c in candidates}
    neighbours = {
        ("episode", hit.episode_id): [("episode", n.episode_id) for n in exchange_neighbours(hit, near)]
        for hit in (near.episodes[e] for e in near.windows if e in near.episodes)
    }
    scores = spread_to_neighbours({key: c.score for key, c in found.items()}, neighbours, share)

    def candidate(key: Key) -> Candidate:
        if key in found:
            # Most candidates lend or borrow nothing: a copy each cost 2 ms a question.
            was = found[key]
            return was if was.score == scores[key] else replace(was, score=scores[key])
        episode = near.episodes[key[1]]
        return Candidate("episode", episode.episode_id, episode.text, episode.message_time, True, scores[key], 0.0, 0.0)

    similarity = {key: c.similarity for key, c in found.items()}
    return [candidate(key) for key in ranked(scores, tie_break=lambda key: (-similarity.get(key, 0.0), key))]


async def lend_to_exchanges(
    session: AsyncSession, conversation_id: int, candidates: Sequence[Candidate], share: float, lenders: int
) -> list[Candidate]:
    """The candidates after the first ``lenders`` found messages lent ``share`` of their
    score to their exchange neighbours (``lent``): three statements, those of the
    surroundings (``evidence.exchanges``)."""
    hits = [c.ref_id for c in candidates if c.kind == "episode"][:lenders]
    if not share or not hits:
        return list(candidates)
    return lent(candidates, await exchanges(session, conversation_id, hits, LENDING_REACH), share)
