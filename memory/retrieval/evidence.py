"""Evidence assembly: the best candidates turned into items an answer can cite.

Every item carries its kind and text; an episode item its speaker, role and message
time; an entity or relation item the episodes that support it (one bounded step of
expansion through ``entity_provenance`` / ``relation_provenance``), so any answer can
point back at messages. Bot messages are shown as context but marked: they never count
as evidence for a fact. Communities are summaries of entities and cite no messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.retrieval.search import Candidate
from memory.schema import Episode, EntityProvenance, RelationProvenance, Speaker

# Supporting episodes attached to one entity or relation. Relations rarely have more;
# an entity mentioned everywhere must not drag the whole conversation into the answer.
SUPPORTS_PER_ITEM = 2
_EARLIEST = datetime.min.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class EpisodeRef:
    episode_id: int
    platform_message_id: str
    speaker: str
    role: str
    message_time: datetime
    text: str

    @property
    def is_bot(self) -> bool:
        return self.role == "bot"


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

    @property
    def episodes(self) -> tuple[EpisodeRef, ...]:
        return ((self.episode,) if self.episode else ()) + self.supporting

    @property
    def is_bot(self) -> bool:
        return self.episode is not None and self.episode.is_bot


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


async def _provenance(
    session: AsyncSession, conversation_id: int, table, column, ref_ids: Sequence[int]
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


async def load_episodes(session: AsyncSession, conversation_id: int, episode_ids: Sequence[int]) -> dict[int, EpisodeRef]:
    if not episode_ids:
        return {}
    rows = await session.execute(
        select(Episode, Speaker.display_name)
        .join(Speaker, Speaker.id == Episode.speaker_id)
        .where(Episode.conversation_id == conversation_id, Episode.id.in_(list(set(episode_ids))))
    )
    return {
        e.id: EpisodeRef(e.id, e.platform_message_id, name, e.role, e.message_time, e.text) for e, name in rows
    }


async def assemble(
    session: AsyncSession,
    conversation_id: int,
    candidates: Sequence[Candidate],
    k: int,
    supports_per_item: int = SUPPORTS_PER_ITEM,
) -> list[EvidenceItem]:
    """The first ``k`` candidates as evidence items, in order."""
    chosen = list(candidates[:k])
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
    }
    candidate_rank = {c.ref_id: rank for rank, c in enumerate(candidates) if c.kind == "episode"}
    all_support = {e for kind in provenance.values() for ids in kind.values() for e in ids}
    episodes = await load_episodes(session, conversation_id, [*by_kind.get("episode", []), *all_support])
    recency = {e: ref.message_time for e, ref in episodes.items()}
    items: list[EvidenceItem] = []
    for candidate in chosen:
        episode = episodes.get(candidate.ref_id) if candidate.kind == "episode" else None
        if candidate.kind == "episode" and episode is None:
            continue  # deleted between search and assembly
        support_ids = choose_supports(
            provenance.get(candidate.kind, {}).get(candidate.ref_id, []), candidate_rank, recency, supports_per_item
        )
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
            )
        )
    return items


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d") if moment else "undated"


def format_item(item: EvidenceItem) -> str:
    """One item as the answerer reads it: label, date, speaker, text; a fact with the
    date, speaker and message id of what supports it."""
    if item.episode is not None:
        bot = " (bot message: context only, not evidence)" if item.is_bot else ""
        return f"[{item.label}] {_when(item.episode.message_time)} {item.text}{bot}"
    status = "" if item.is_current else " (superseded: no longer true)"
    sources = "; ".join(f"{_when(s.message_time)} {s.speaker}, message {s.platform_message_id}" for s in item.supporting)
    return f"[{item.label}] {item.kind}: {item.text}{status}" + (f" (from {sources})" if sources else "")


def format_evidence(items: Sequence[EvidenceItem]) -> str:
    return "\n".join(format_item(item) for item in items)
