"""Evidence assembly: the best candidates turned into items an answer can cite.

Every item carries its kind and text; an episode item its speaker, role and message
time; an entity or relation item the episodes that support it (one bounded step of
expansion through ``entity_provenance`` / ``relation_provenance``), so any answer can
point back at messages. Bot messages are shown as context but marked: they never count
as evidence for a fact. A community item cites the episodes supporting the active
relations between its members, which are what its summary is written from. Community
summaries ride beside the first ``k`` messages and facts ranked with them and never take
one's place (``leading``): a digest of facts adds context, it does not push out the
message that states one, so building communities can only add evidence.

The best few episode hits also bring their surroundings in their exchange: the reply
that follows, and the same speaker's messages up to ``CONTEXT_SPAN`` places around it,
within ``CONTEXT_TOKENS`` for all of them. A message is often half of a statement: "I
went to a support group yesterday" needs the reply's "how was it?" and the speaker's
next message that says what happened. On the LoCoMo retrieval benchmark this finds
more evidence per token than more hits do.

The exchange is the hit's thread, or for a message of the channel its speaker and their
partners (``exchange.talks_with``), not the channel: in a busy channel the message after
a hit is most often another conversation's, and showing it costs the tokens and misses
the reply.
A partner is someone who names the speaker or whom the speaker names, in the messages
around the hits (or the only other person there, as in a direct conversation); the
exchange's messages are looked for up to ``CONTEXT_WINDOW`` places either side. On the
calibration group channel of pairs interleaved message by message (``bench retrieval
--group --cast pairs``) the chain's surroundings kept 77.1% of questions' evidence at
K = 30 where the pairs alone keep 84.3%; surroundings taken from each message's own
conversation (known to the benchmark only) kept 80.9%. Where the speaker talks with
several people, its exchange is taken most alike first (``exchange_side``): on the ring
channel, where each name talks in two conversations at once, 76.8% -> 79.1% on
calibration (held-out 71.3% -> 74.2%); surroundings from the hit's own conversation
(the benchmark's oracle) give 80.0%.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import BigInteger, any_, cast, exists, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute, aliased

from memory.models.tokens import TokenBudget
from memory.retrieval.exchange import by_likeness, exchange_side, in_exchange, talks_with
from memory.retrieval.search import Candidate
from memory.store.schema import (
    EPISODE_SPEAKER,
    CommunityMember,
    EntityProvenance,
    Episode,
    Relation,
    RelationProvenance,
    Speaker,
    Tombstone,
)

# Supporting episodes attached to one entity or relation. Relations rarely have more;
# an entity mentioned everywhere must not drag the whole conversation into the answer.
SUPPORTS_PER_ITEM = 2
_EARLIEST = datetime.min.replace(tzinfo=timezone.utc)
# How many of the best episode hits bring their chain surroundings, and how far.
CONTEXT_ITEMS = 6
CONTEXT_SPAN = 2
# Chain places searched on each side for the exchange's CONTEXT_SPAN messages: where
# five conversations alternate message by message, a partner speaks every fifth place.
CONTEXT_WINDOW = 12
# Tokens the surroundings may add in all: the best hits come first, and a message that
# does not fit is left out (chosen on LoCoMo conversations 41-44: 6 hits within 280
# tokens found more evidence than 3 hits without a bound, at about the same cost; 200
# since the name-free question vector, which ranks longer messages of the named people
# first: on calibration conversations 26 and 30, 280 would cost 5% more tokens than
# before it, 200 about as many, still finding more evidence).
CONTEXT_TOKENS = 200


@dataclass(frozen=True)
class EpisodeRef:
    episode_id: int
    platform_message_id: str
    speaker: str
    role: str
    message_time: datetime
    text: str
    thread_id: str | None = None  # the thread it replies in (its own id: a thread's first message)

    @property
    def is_bot(self) -> bool:
        return self.role == "bot"

    @property
    def reply_in(self) -> str | None:
        """The thread this message is a reply in; None for a message of the channel itself."""
        return self.thread_id if self.thread_id != self.platform_message_id else None


@dataclass(frozen=True)
class EvidenceItem:
    label: str  # "E1", "E2", ... as the answerer cites them
    kind: str
    ref_id: int
    text: str
    score: float
    similarity: float
    text_rank: float
    is_current: bool
    episode: EpisodeRef | None = None  # the message itself, for an episode item
    supporting: tuple[EpisodeRef, ...] = ()  # for entity and relation items
    context: tuple[EpisodeRef, ...] = ()  # chain surroundings of an episode item, in order

    @property
    def episodes(self) -> tuple[EpisodeRef, ...]:
        """Every message this item shows the answerer."""
        return ((self.episode,) if self.episode else ()) + self.supporting + self.context

    @property
    def is_bot(self) -> bool:
        return self.episode is not None and self.episode.is_bot


def leading(kinds: Sequence[str], k: int) -> int:
    """How many of the leading items (by ``kinds``, best first) make the first ``k``:
    ``k`` that are not communities, with the communities ranked among them. Pure."""
    taken = 0
    for index, kind in enumerate(kinds):
        if kind == "community":
            continue
        if taken == k:
            return index
        taken += 1
    return len(kinds)


def choose_supports(
    provenance: Sequence[int], candidate_rank: dict[int, int], recency: dict[int, datetime], limit: int
) -> list[int]:
    """Which supporting episodes to attach: those the search also found (best rank
    first), then the most recent ones, at most ``limit``. Pure."""
    found = sorted((e for e in provenance if e in candidate_rank), key=candidate_rank.__getitem__)
    rest = sorted(
        (e for e in provenance if e not in candidate_rank),
        key=lambda e: (recency.get(e) or _EARLIEST, e),
        reverse=True,
    )
    return (found + rest)[:limit]


def pick_context(
    hit: EpisodeRef,
    before: Sequence[EpisodeRef],
    after: Sequence[EpisodeRef],
    talks_with: frozenset[str],
    likeness: Mapping[int, float] | None = None,
) -> list[EpisodeRef]:
    """From the messages just before and after a hit (nearest first): its exchange's on
    each side (``exchange_side``, at most ``CONTEXT_SPAN``), and of these the first one
    after it (the reply) and any by the hit's own speaker. Pure."""
    before = exchange_side(hit, before, talks_with, CONTEXT_SPAN, likeness)
    after = exchange_side(hit, after, talks_with, CONTEXT_SPAN, likeness)
    chosen = [e for e in before if e.speaker == hit.speaker][::-1]
    chosen += [e for i, e in enumerate(after) if i == 0 or e.speaker == hit.speaker]
    return chosen


# Up to :span messages on each side of each of :ids in chain order ((message_time, id),
# as the chain links them): each side one ordered scan of ix_episodes_chain_order.
_WINDOW_SIDE = (
    "SELECT h.id, {side}, w.id, w.message_time FROM episodes h CROSS JOIN LATERAL (SELECT x.id, x.message_time "
    "FROM episodes x WHERE x.conversation_id = :c AND (x.message_time, x.id) {compare} (h.message_time, h.id) "
    "ORDER BY x.message_time {order}, x.id {order} LIMIT :span) AS w WHERE h.conversation_id = :c AND h.id = ANY(:ids)"
)
_CHAIN_WINDOW = text(
    " UNION ALL ".join(_WINDOW_SIDE.format(side=side, compare=c, order=o) for side, c, o in ((0, "<", "DESC"), (1, ">", "ASC")))
)
# The cosine of each (:hits[i], :others[i]) pair of messages (own vectors; NULL without one).
_LIKENESS = text(
    "SELECT p.hit, p.other, 1 - (o.embedding <=> h.embedding) "
    "FROM unnest(CAST(:hits AS bigint[]), CAST(:others AS bigint[])) AS p(hit, other) "
    "JOIN episodes h ON h.conversation_id = :c AND h.id = p.hit JOIN episodes o ON o.conversation_id = :c AND o.id = p.other"
)


async def chain_window(
    session: AsyncSession, conversation_id: int, episode_ids: Sequence[int], span: int
) -> dict[int, tuple[list[int], list[int]]]:
    """For each episode: the ids of up to ``span`` predecessors and successors in the
    chain, nearest first (one statement)."""
    sides: dict[int, tuple[list[tuple[datetime, int]], list[tuple[datetime, int]]]] = {e: ([], []) for e in episode_ids}
    for origin, side, episode_id, at in await session.execute(
        _CHAIN_WINDOW, {"c": conversation_id, "ids": list(episode_ids), "span": span}
    ):
        sides[origin][side].append((at, episode_id))
    return {
        e: ([i for _, i in sorted(before, reverse=True)], [i for _, i in sorted(after)]) for e, (before, after) in sides.items()
    }


async def pair_likeness(
    session: AsyncSession, conversation_id: int, pairs: Sequence[tuple[int, int]]
) -> dict[int, dict[int, float]]:
    """Each (hit, message) pair's cosine, by hit (missing without vectors). Read only for
    the hits whose exchange is ordered by it (``by_likeness``): a two-person conversation,
    the largest at 1M messages among them, reads no vector (0.4 ms of its assembly)."""
    found: dict[int, dict[int, float]] = {}
    if pairs:
        hits, others = zip(*pairs, strict=True)
        for hit, other, cosine in await session.execute(_LIKENESS, {"c": conversation_id, "hits": hits, "others": others}):
            if cosine is not None and not math.isnan(cosine):
                found.setdefault(hit, {})[other] = float(cosine)
    return found


async def _provenance(
    session: AsyncSession,
    conversation_id: int,
    table: type[EntityProvenance] | type[RelationProvenance],
    column: InstrumentedAttribute[int],
    ref_ids: Sequence[int],
) -> dict[int, list[int]]:
    if not ref_ids:
        return {}
    rows = await session.execute(
        select(column, table.episode_id).where(table.conversation_id == conversation_id, column.in_(list(ref_ids)))
    )
    result: dict[int, list[int]] = {}
    for ref_id, episode_id in rows:
        result.setdefault(ref_id, []).append(episode_id)
    return result


async def community_support(session: AsyncSession, conversation_id: int, community_ids: Sequence[int]) -> dict[int, list[int]]:
    """A community's summary is written from the active relations between its members:
    their supporting episodes are what it cites."""
    if not community_ids:
        return {}
    members = aliased(CommunityMember)
    other = aliased(CommunityMember)
    rows = await session.execute(
        select(members.community_id, RelationProvenance.episode_id)
        .join(Relation, (Relation.subject_id == members.entity_id) & (Relation.conversation_id == conversation_id))
        .join(
            other,
            (other.conversation_id == conversation_id)
            & (other.entity_id == Relation.object_id)
            & (other.community_id == members.community_id),
        )
        .join(
            RelationProvenance,
            (RelationProvenance.conversation_id == conversation_id) & (RelationProvenance.relation_id == Relation.id),
        )
        .where(
            members.conversation_id == conversation_id,
            members.community_id.in_(list(community_ids)),
            Relation.status == "active",
        )
        .distinct()
    )
    result: dict[int, list[int]] = {}
    for community_id, episode_id in rows:
        result.setdefault(community_id, []).append(episode_id)
    return result


_REF_COLUMNS = (
    Episode.id,
    Episode.platform_message_id,
    Speaker.display_name,
    Episode.role,
    Episode.message_time,
    Episode.text,
    Episode.thread_id,
)


@dataclass(frozen=True)
class Exchanges:
    """Found messages with their chain windows: the messages loaded (``load_episodes``),
    each window's speaker's partners among them, and where an exchange is ordered by it
    (``by_likeness``) each window message's cosine with its hit."""

    windows: dict[int, tuple[list[int], list[int]]]
    episodes: dict[int, EpisodeRef]
    talks_with: dict[str, frozenset[str]]
    likeness: dict[int, dict[int, float]]

    def sides(self, hit: int) -> tuple[list[EpisodeRef], list[EpisodeRef]]:
        """The loaded messages before and after ``hit``, nearest first."""
        before, after = self.windows[hit]
        return [self.episodes[e] for e in before if e in self.episodes], [self.episodes[e] for e in after if e in self.episodes]

    def ordering(self, hit: EpisodeRef) -> tuple[frozenset[str], dict[int, float]]:
        """Whom the hit's speaker talks with, and the hit's window's likeness."""
        return self.talks_with[hit.speaker], self.likeness.get(hit.episode_id, {})


async def exchanges(
    session: AsyncSession, conversation_id: int, hits: Sequence[int], span: int, also: Sequence[int] = ()
) -> Exchanges:
    """The chain windows of ``hits``, ``span`` places each side, with the messages
    ``also`` loaded beside them (partners are looked for among all of them): three
    statements, the last only where a speaker talks with several people."""
    windows = await chain_window(session, conversation_id, hits, span) if hits else {}
    around = {e for before, after in windows.values() for e in before + after}
    episodes = await load_episodes(session, conversation_id, [*hits, *also, *around])
    partnered = talks_with({episodes[e].speaker for e in windows if e in episodes}, episodes.values())
    ordered = [e for e in windows if e in episodes and by_likeness(episodes[e], partnered[episodes[e].speaker])]
    # Only the exchange's messages are ordered by likeness (exchange_side): the others' is never read.
    pairs = [
        (e, o)
        for e in ordered
        for o in windows[e][0] + windows[e][1]
        if o in episodes and in_exchange(episodes[e], episodes[o], partnered[episodes[e].speaker])
    ]
    likeness = await pair_likeness(session, conversation_id, pairs)
    return Exchanges(windows, episodes, partnered, likeness)


async def load_episodes(session: AsyncSession, conversation_id: int, episode_ids: Sequence[int]) -> dict[int, EpisodeRef]:
    """The episodes an answer may show; one with a tombstone is being forgotten (a
    person's messages are hidden first, memory.privacy.person) and is left out."""
    if not episode_ids:
        return {}
    forgetting = exists().where(
        Tombstone.conversation_id == conversation_id, Tombstone.platform_message_id == Episode.platform_message_id
    )
    # The columns a reference holds, not the whole row: a row brings its vector, parsed for
    # every message shown (assembling 30 items of the largest conversation of 1M messages
    # took 17.7 ms with whole rows, 5.0 ms with these; bench scale's store, 2026-12-06).
    rows = await session.execute(
        select(*_REF_COLUMNS)
        .join(Speaker, EPISODE_SPEAKER)
        .where(
            Episode.conversation_id == conversation_id,
            Episode.id == any_(cast(sorted(set(episode_ids)), ARRAY(BigInteger))),
            ~forgetting,
        )
    )
    return {row[0]: EpisodeRef(*row) for row in rows}


async def assemble(
    session: AsyncSession,
    conversation_id: int,
    candidates: Sequence[Candidate],
    k: int,
    supports_per_item: int = SUPPORTS_PER_ITEM,
    context_items: int = CONTEXT_ITEMS,
    context_tokens: int = CONTEXT_TOKENS,
) -> list[EvidenceItem]:
    """The first ``k`` candidates as evidence items, in order (communities ranked among
    them beside them, see ``leading``); the first ``context_items`` episode items with
    their chain surroundings."""
    chosen = list(candidates[: leading([c.kind for c in candidates], k)])
    by_kind: dict[str, list[int]] = {}
    for candidate in chosen:
        by_kind.setdefault(candidate.kind, []).append(candidate.ref_id)
    provenance = {
        "entity": await _provenance(
            session, conversation_id, EntityProvenance, EntityProvenance.entity_id, by_kind.get("entity", [])
        ),
        "relation": await _provenance(
            session, conversation_id, RelationProvenance, RelationProvenance.relation_id, by_kind.get("relation", [])
        ),
        "community": await community_support(session, conversation_id, by_kind.get("community", [])),
    }
    candidate_rank = {c.ref_id: rank for rank, c in enumerate(candidates) if c.kind == "episode"}
    all_support = {e for kind in provenance.values() for ids in kind.values() for e in ids}
    hits = by_kind.get("episode", [])
    near = await exchanges(session, conversation_id, hits[:context_items], CONTEXT_WINDOW, [*hits, *all_support])
    episodes = near.episodes
    recency = {e: ref.message_time for e, ref in episodes.items()}
    shown = set(hits)
    budget = TokenBudget(context_tokens)
    items: list[EvidenceItem] = []
    for candidate in chosen:
        episode = episodes.get(candidate.ref_id) if candidate.kind == "episode" else None
        if candidate.kind == "episode" and episode is None:
            continue  # deleted between search and assembly
        support_ids = choose_supports(
            provenance.get(candidate.kind, {}).get(candidate.ref_id, []), candidate_rank, recency, supports_per_item
        )
        context: list[EpisodeRef] = []
        if episode is not None and candidate.ref_id in near.windows:
            for e in pick_context(episode, *near.sides(candidate.ref_id), *near.ordering(episode)):
                if e.episode_id in shown or not budget.take(_message_line("E0.0", e)):
                    continue
                context.append(e)
                shown.add(e.episode_id)
        items.append(
            EvidenceItem(
                label=f"E{len(items) + 1}",
                kind=candidate.kind,
                ref_id=candidate.ref_id,
                text=candidate.text,
                score=candidate.score,
                similarity=candidate.similarity,
                text_rank=candidate.text_rank,
                is_current=candidate.is_current,
                episode=episode,
                supporting=tuple(episodes[e] for e in support_ids if e in episodes),
                context=tuple(sorted(context, key=lambda e: (e.message_time, e.episode_id))),
            )
        )
    return items


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d") if moment else "undated"


def context_label(item: EvidenceItem, index: int) -> str:
    return f"{item.label}.{index + 1}"


def labelled_episodes(items: Sequence[EvidenceItem]) -> dict[str, tuple[EpisodeRef, ...]]:
    """What each citable label stands for: an item's own message or supporting
    messages, and each of its context messages under ``E3.1``, ``E3.2``, ..."""
    labels: dict[str, tuple[EpisodeRef, ...]] = {}
    for item in items:
        labels[item.label] = ((item.episode,) if item.episode else ()) + item.supporting
        for index, episode in enumerate(item.context):
            labels[context_label(item, index)] = (episode,)
    return labels


def _message_line(label: str, episode: EpisodeRef) -> str:
    bot = " (bot message: context only, not evidence)" if episode.is_bot else ""
    return f"[{label}] {episode.speaker}: {episode.text}{bot}"


def _fact_line(item: EvidenceItem) -> str:
    status = "" if item.is_current else " (superseded: no longer true)"
    sources = "; ".join(f"{_when(s.message_time)} {s.speaker}, message {s.platform_message_id}" for s in item.supporting)
    return f"[{item.label}] {item.kind}: {item.text}{status}" + (f" (from {sources})" if sources else "")


def format_evidence(items: Sequence[EvidenceItem]) -> str:
    """The evidence as the answerer reads it: facts (entities, relations, communities)
    with the date, speaker and message id of what supports them, then the messages in
    time order under one header per day (dates once, not per line, to save tokens)."""
    lines = [_fact_line(item) for item in items if item.episode is None]
    if lines:
        lines.insert(0, "Facts:")
    messages = [(item.episode, item.label) for item in items if item.episode is not None]
    messages += [(episode, context_label(item, i)) for item in items for i, episode in enumerate(item.context)]
    messages.sort(key=lambda pair: (pair[0].message_time, pair[0].episode_id))
    day = None
    for episode, label in messages:
        if _when(episode.message_time) != day:
            day = _when(episode.message_time)
            lines.append(f"{day} ({episode.message_time:%A}):")
        lines.append(_message_line(label, episode))
    return "\n".join(lines)
