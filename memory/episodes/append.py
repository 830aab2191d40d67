"""The fast path: validate a message, append it as an episode (idempotent on its platform
message id), link it into the conversation's chain, embed it and index it, in one
transaction, so it is retrievable at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.episodes.exchange_vectors import (
    exchange_vectors_of,
    refresh_exchange_vectors,
)
from memory.errors import ValidationError
from memory.models.embedder import Embedder
from memory.store import episodes
from memory.store.conversations import ROLES, ensure_speakers
from memory.store.documents import Document, episode_document_text, upsert_documents
from memory.store.ids import next_ids
from memory.store.ledger import Usage, record_usage
from memory.store.locks import LockPurpose, lock_conversation
from memory.store.schema import Episode, Tombstone
from memory.validation import check_name, check_text, normalize_id, parse_time


@dataclass(frozen=True)
class Message:
    """A message ready to append. Built only from values the store can hold: ids are
    normalised and every field checked on construction (``memory.validation``), so no
    caller (file import, connector, benchmark) can hand the database a value it refuses."""

    platform_message_id: str
    speaker_id: str
    speaker_name: str
    text: str
    message_time: datetime
    role: str = "user"
    reply_to: str | None = None
    thread_id: str | None = None
    edited_at: datetime | None = None  # the text is an edited one (a history or export says when)

    def __post_init__(self) -> None:
        for name in ("platform_message_id", "speaker_id", "reply_to", "thread_id"):
            value = getattr(self, name)
            if value is not None or name in ("platform_message_id", "speaker_id"):
                object.__setattr__(self, name, normalize_id(value, name))
        object.__setattr__(self, "speaker_name", check_name(self.speaker_name, "speaker_name"))
        object.__setattr__(self, "message_time", parse_time(self.message_time, "message_time"))
        if self.edited_at is not None:
            object.__setattr__(self, "edited_at", parse_time(self.edited_at, "edited_at"))
        check_text(self.text, "text")
        if self.role not in ROLES:
            raise ValidationError("role", f"must be one of {', '.join(ROLES)}, got {self.role!a}")

    @property
    def document_text(self) -> str:
        return episode_document_text(self.text)


@dataclass(frozen=True)
class AppendResult:
    platform_message_id: str
    status: str  # stored | duplicate | tombstoned | rejected (the database refused it: ``reason``) | opted_out
    episode_id: int | None
    reason: str | None = None


def _optional_id(fields: Mapping[str, Any], key: str) -> str | None:
    value = fields.get(key)
    return None if value is None else normalize_id(value, key)


def validate_message(fields: Mapping[str, Any]) -> Message:
    """Build a Message from loosely typed fields (a parsed JSON object), naming the first
    field that is wrong in the input's own words.

    Fields: ``id``, ``author`` (or ``author_id`` + ``author_name``), ``role``, ``text``,
    ``ts``, ``reply_to``, ``thread_id``, ``edited_at``; others are ignored.
    """
    message_id = normalize_id(fields.get("id"), "id")
    if fields.get("author_id") is not None or fields.get("author_name") is not None:
        speaker_id = normalize_id(fields.get("author_id"), "author_id")
        speaker_name = check_name(fields.get("author_name"), "author_name")
    else:
        speaker_id = speaker_name = normalize_id(fields.get("author"), "author")
    return Message(
        platform_message_id=message_id,
        speaker_id=speaker_id,
        speaker_name=speaker_name,
        text=check_text(fields.get("text"), "text"),
        message_time=parse_time(fields.get("ts")),
        role=fields.get("role") or "user",
        reply_to=_optional_id(fields, "reply_to"),
        thread_id=_optional_id(fields, "thread_id"),
        edited_at=parse_time(fields["edited_at"], "edited_at") if fields.get("edited_at") is not None else None,
    )


async def link_into_chain(
    session: AsyncSession, conversation_id: int, episode_id: int, at: datetime
) -> tuple[int | None, int | None]:
    """Place an episode between its neighbours by message time (caller holds the chain
    lock); returns the episodes now before and after it (the latter's predecessor changed)."""
    before, after = await _neighbours(session, conversation_id, episode_id, at)
    await episodes.place(session, conversation_id, episode_id, before, after)
    return before, after


async def _neighbours(
    session: AsyncSession, conversation_id: int, episode_id: int, at: datetime
) -> tuple[int | None, int | None]:
    """Chain neighbours of an episode at ``at``: ties in message time keep id (arrival) order."""
    base = select(Episode.id).where(Episode.conversation_id == conversation_id, Episode.id != episode_id)
    earlier = or_(Episode.message_time < at, and_(Episode.message_time == at, Episode.id < episode_id))
    before = (
        await session.execute(base.where(earlier).order_by(Episode.message_time.desc(), Episode.id.desc()).limit(1))
    ).scalar()
    after = (await session.execute(base.where(~earlier).order_by(Episode.message_time, Episode.id).limit(1))).scalar()
    return before, after


async def _tombstoned(session: AsyncSession, conversation_id: int, message_ids: Sequence[str]) -> set[str]:
    rows = await session.execute(
        select(Tombstone.platform_message_id).where(
            Tombstone.conversation_id == conversation_id,
            Tombstone.platform_message_id.in_(list(message_ids)),
        )
    )
    return set(rows.scalars())


async def append_messages(
    session: AsyncSession,
    embedder: Embedder,
    conversation_id: int,
    messages: Sequence[Message],
    vectors: Sequence[Sequence[float]] | None = None,
) -> list[AppendResult]:
    """Append messages in the caller's transaction; returns one result per message.

    ``vectors`` lets a caller that embedded ahead (to overlap embedding with database
    work) pass them in; otherwise the messages are embedded here in one batch.
    """
    if not messages:
        return []
    await lock_conversation(session, conversation_id, LockPurpose.CHAIN)
    refused = await _tombstoned(session, conversation_id, [m.platform_message_id for m in messages])
    if vectors is None:
        batch = await embedder.embed([m.document_text for m in messages])
        vectors = batch.vectors
        await record_usage(
            session,
            conversation_id,
            Usage.embedding("ingestion", "embed_episode", batch),
        )
    speakers = await ensure_speakers(session, conversation_id, ((m.speaker_id, m.speaker_name, m.role) for m in messages))
    own_vector: dict[str, Sequence[float]] = {}
    for message, vector in zip(messages, vectors, strict=True):
        own_vector.setdefault(message.platform_message_id, vector)
    fresh = await _fresh(session, conversation_id, [m for m in messages if m.platform_message_id not in refused])
    rows = [
        {
            "conversation_id": conversation_id,
            "speaker_id": speakers[(m.speaker_id, m.speaker_name, m.role)],
            "role": m.role,
            "text": m.text,
            "message_time": m.message_time,
            "platform_message_id": m.platform_message_id,
            "reply_to": m.reply_to,
            "thread_id": m.thread_id,
            "edited_at": m.edited_at,
            "embedding": list(own_vector[m.platform_message_id]),
        }
        for m in fresh
    ]
    inserted, prev_of, successors = await _insert_linked(session, conversation_id, rows)
    results, documents = _outcomes(messages, vectors, refused, inserted)
    # Each document is written once, with the vector it is searched by: an index entry
    # per write is most of what a write costs.
    searched = await exchange_vectors_of(session, conversation_id, {d.ref_id: d.embedding for d in documents}, prev_of)
    await upsert_documents(session, conversation_id, [replace(d, embedding=searched[d.ref_id]) for d in documents])
    await refresh_exchange_vectors(session, conversation_id, successors)
    return results


def _outcomes(
    messages: Sequence[Message], vectors: Sequence[Sequence[float]], refused: set[str], inserted: dict[str, int]
) -> tuple[list[AppendResult], list[Document]]:
    """One result per message, and for those stored their search documents (with their
    own vectors). The first of repeated ids in one batch is the one stored. Pure."""
    results: list[AppendResult] = []
    documents: list[Document] = []
    stored = dict(inserted)
    for message, vector in zip(messages, vectors, strict=True):
        message_id = message.platform_message_id
        if message_id in refused:
            results.append(AppendResult(message_id, "tombstoned", None))
        elif message_id in stored:
            episode_id = stored.pop(message_id)
            documents.append(Document("episode", episode_id, message.document_text, vector, message.message_time))
            results.append(AppendResult(message_id, "stored", episode_id))
        else:
            results.append(AppendResult(message_id, "duplicate", None))
    return results, documents


async def _fresh(session: AsyncSession, conversation_id: int, candidates: Sequence[Message]) -> list[Message]:
    """The messages to store: the first of each platform message id, unless the
    conversation holds it already (the caller holds the chain lock)."""
    firsts: dict[str, Message] = {}
    for message in candidates:
        firsts.setdefault(message.platform_message_id, message)
    if not firsts:
        return []
    stored = await session.execute(
        select(Episode.platform_message_id).where(
            Episode.conversation_id == conversation_id, Episode.platform_message_id.in_(list(firsts))
        )
    )
    held = set(stored.scalars())
    return [m for message_id, m in firsts.items() if message_id not in held]


def chain_links(tail: int | None, new: Sequence[tuple[datetime, int]]) -> dict[int, tuple[int | None, int | None]]:
    """Each new episode's (previous, next) when the new ones, as (time, id), all go after
    the chain's ``tail``: in (time, id) order, the first after the tail. Pure."""
    ordered = [episode_id for _, episode_id in sorted(new)]
    before = [tail, *ordered[:-1]]
    after = [*ordered[1:], None]
    return {e: (p, n) for e, p, n in zip(ordered, before, after, strict=True)}


async def _insert_linked(
    session: AsyncSession, conversation_id: int, rows: list[dict[str, Any]]
) -> tuple[dict[str, int], dict[int, int | None], list[int]]:
    """Insert new episodes into the chain; returns their ids by platform message id,
    each one's predecessor, and the stored episodes whose predecessor changed.

    The common case is messages arriving after the chain's tail (``_append_after``). A
    message older than the tail is inserted, then linked one at a time. (A later new
    episode never goes before an earlier one, so the predecessors hold once all are linked.)
    """
    if not rows:
        return {}, {}, []
    ids = await next_ids(session, "episodes", conversation_id, len(rows))
    new: list[tuple[datetime, int]] = []
    for row, episode_id in zip(rows, ids, strict=True):
        row["id"] = episode_id
        new.append((row["message_time"], episode_id))
    tail = (
        await session.execute(
            select(Episode.id, Episode.message_time)
            .where(Episode.conversation_id == conversation_id)
            .order_by(Episode.message_time.desc(), Episode.id.desc())
            .limit(1)
        )
    ).first()
    if tail is None or tail.message_time <= min(new)[0]:
        return *await _append_after(session, conversation_id, tail.id if tail else None, rows), []
    inserted = await episodes.insert_episodes(session, rows)
    placed = {e: await link_into_chain(session, conversation_id, e, at) for at, e in sorted(new)}
    return inserted, {e: before for e, (before, _) in placed.items()}, [a for _, a in placed.values() if a is not None]


_LINKED_ROWS = 500  # rows per statement: SQLAlchemy sends at most 1,000 in one


async def _append_after(
    session: AsyncSession, conversation_id: int, tail: int | None, rows: list[dict[str, Any]]
) -> tuple[dict[str, int], dict[int, int | None]]:
    """Insert episodes that all go after the chain's ``tail``, each row written once with
    its links, and link the tail to the first: updating every new row after its insert
    would leave a dead copy of it, vector and all, as large as the live one. In chain
    order, a statement per ``_LINKED_ROWS`` rows, each linked to the one before it (the
    chain's keys are checked at the end of each statement, so no row names a later
    statement's); returns the ids by platform message id and each one's predecessor."""
    ordered = sorted(rows, key=lambda row: (row["message_time"], row["id"]))
    inserted: dict[str, int] = {}
    prev_of: dict[int, int | None] = {}
    for start in range(0, len(ordered), _LINKED_ROWS):
        chunk = ordered[start : start + _LINKED_ROWS]
        links = chain_links(tail, [(row["message_time"], row["id"]) for row in chunk])
        for row in chunk:
            row["prev_id"], row["next_id"] = links[row["id"]]
            prev_of[row["id"]] = row["prev_id"]
        inserted |= await episodes.insert_episodes(session, chunk)
        if tail is not None:
            await episodes.set_next(session, conversation_id, tail, chunk[0]["id"])
        tail = chunk[-1]["id"]
    return inserted, prev_of
