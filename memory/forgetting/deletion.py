"""Forgetting: deleting and editing episodes so that nothing derived from the old text
survives anywhere (docs/architecture/deletion.md).

One transaction per command, holding the conversation's CHAIN lock and then its GRAPH
lock (always in that order, so a deletion cannot deadlock with another deletion, and
appends or consolidation, which take one of them, wait or go first). The steps, each in
its own module: memory.forgetting.subgraph loads the affected subgraph,
memory.forgetting.rules decides (Algorithm 1, pure) and orders the graph's writes,
memory.forgetting.plan gathers the rest of the plan (re-wording, rolling context,
summary, answers), memory.forgetting.apply runs it through each record kind's writer
(memory.store.<kind>). This module holds the entry points (delete, edit) and writes
nothing itself.

Decisions beyond Algorithm 1, and why:

- Every deleted message leaves a tombstone, so a redelivered or late copy is refused.
  A delete for a message never stored leaves one too (status ``tombstoned``); a delete
  that finds a tombstone is a no-op (``already_deleted``).
- A connective anchor keeps its id, type and relations; its name becomes ``anchor:<id>``
  and its embedding is cleared, since every mention that gave it that name (and the
  vector made from it) was deleted.
- A relation or entity that lost the episode but keeps other support is re-rendered
  from its surviving witnesses' own wording (memory.graph.wording, planned and written by
  memory.forgetting.rewording): every wording drawn from the episode is cleared, so no
  sentence, name form or summary it contributed outlives it.
- A dirtied community's label and summary are cleared along with its search document.
- Rolling-context entries that drew on the episode are rewritten to the entity's
  surviving name and type, or dropped (rules.prune_rolling_context).
- A running summary that drew on the episode is cleared and marked dirty in the same
  transaction, then rebuilt from the surviving episodes afterwards.
- An answer that used the episode may quote it: its stored answer text is replaced by
  ``ANSWER_WITHDRAWN`` and its evidence link dropped. The question stays, since it is the
  asker's own text, not the deleted message's, and the audit log needs who asked what.
- An edit by someone opted out of the conversation's workspace (memory/privacy/commands.py)
  is new content from a person who asked not to be remembered, so the new text is not
  stored; the old text is no longer what they said, so it is not kept either: the message
  is deleted, in the edit's transaction, exactly as a deletion would (audited as one,
  status ``forgotten`` in the edit's report).
- The audit log records ids and counts only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.core import Memory
from memory.episodes.exchange_vectors import exchange_vectors_of, refresh_exchange_vectors
from memory.forgetting.apply import remove_episode, retract_support
from memory.forgetting.batch import rebuild_summary_if_cleared
from memory.forgetting.plan import Retraction
from memory.models.embedder import EmbeddingBatch
from memory.store import episodes
from memory.store.audit import write_audit
from memory.store.documents import Document, episode_document_text, upsert_documents
from memory.store.ledger import Usage, record_usage
from memory.store.locks import LockPurpose, lock_conversation
from memory.store.schema import Episode, Speaker, Tombstone
from memory.validation import check_text, normalize_id


@dataclass
class DeletionReport:
    conversation_id: int
    platform_message_id: str
    status: str  # deleted | tombstoned (never stored: refused if it arrives) | already_deleted
    episode_id: int | None = None
    chain: dict[str, int | None] = field(default_factory=dict)  # the reconnected neighbours
    retraction: Retraction = field(default_factory=Retraction)
    summary_rebuilt: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "counts": self.retraction.counts()}


@dataclass
class EditReport:
    conversation_id: int
    platform_message_id: str
    status: str  # edited (and queued for consolidation) | unchanged | outdated | unknown | deleted
    # | forgotten (its author opted out: the message was deleted, the new text not stored)
    episode_id: int | None = None
    retraction: Retraction = field(default_factory=Retraction)
    summary_rebuilt: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "counts": self.retraction.counts()}


async def _find_episode(session: AsyncSession, conversation_id: int, platform_message_id: str) -> Episode | None:
    return (
        await session.execute(
            select(Episode).where(Episode.conversation_id == conversation_id, Episode.platform_message_id == platform_message_id)
        )
    ).scalar_one_or_none()


async def _tombstoned(session: AsyncSession, conversation_id: int, platform_message_id: str) -> bool:
    return (
        await session.execute(
            select(
                exists().where(Tombstone.conversation_id == conversation_id, Tombstone.platform_message_id == platform_message_id)
            )
        )
    ).scalar_one()


async def _audit(session: AsyncSession, conversation_id: int, principal: str, action: str, report: Any) -> None:
    details = report.as_dict()
    details.pop("retraction")  # the counts carry it; ids below
    details["ids"] = {k: v for k, v in asdict(report.retraction).items() if isinstance(v, list)}
    await write_audit(session, conversation_id, principal, action, details)


async def delete_episode(memory: Memory, conversation_id: int, platform_message_id: str, *, principal: str) -> DeletionReport:
    """Delete one message and everything that rested only on it, in one transaction (a
    message not stored yet leaves a tombstone)."""
    message_id = normalize_id(platform_message_id, "message")
    async with memory._sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.CHAIN, LockPurpose.GRAPH)
        episode = await _find_episode(session, conversation_id, message_id)
        if episode is None:
            status = "already_deleted" if await _tombstoned(session, conversation_id, message_id) else "tombstoned"
            if status == "tombstoned":
                await episodes.leave_tombstone(session, conversation_id, message_id)
            report = DeletionReport(conversation_id, message_id, status)
        else:
            report = await _delete(memory, session, conversation_id, episode)
        await _audit(session, conversation_id, principal, "delete_episode", report)
    report.summary_rebuilt = await rebuild_summary_if_cleared(memory, conversation_id, report.retraction)
    return report


async def _delete(memory: Memory, session: AsyncSession, conversation_id: int, episode: Episode) -> DeletionReport:
    """Algorithm 1 for one stored episode, under the caller's locks."""
    retraction = await retract_support(session, conversation_id, [episode.id], memory.embedder)
    chain, documents = await remove_episode(session, conversation_id, episode)
    retraction.documents_removed += documents
    return DeletionReport(conversation_id, episode.platform_message_id, "deleted", episode.id, chain, retraction)


async def _author(session: AsyncSession, conversation_id: int, episode: Episode) -> str:
    query = select(Speaker.platform_user_id).where(Speaker.conversation_id == conversation_id, Speaker.id == episode.speaker_id)
    return (await session.execute(query)).scalar_one()


async def edit_episode(
    memory: Memory,
    conversation_id: int,
    platform_message_id: str,
    new_text: str,
    *,
    principal: str,
    edited_at: datetime | None = None,
    opted_out: frozenset[str] = frozenset(),
) -> EditReport:
    """A changed message is a correction: the old version's derived state is retracted as
    in a deletion, the new text is stored in place (chain position and message time
    kept, ``edited_at`` set), re-indexed, and queued for consolidation. A message whose
    author is in ``opted_out`` (platform ids) is deleted instead (module docstring)."""
    message_id = normalize_id(platform_message_id, "message")
    check_text(new_text, "text")
    async with memory._sessions() as session:
        found = await _find_episode(session, conversation_id, message_id)
        kept = found is not None and not (opted_out and await _author(session, conversation_id, found) in opted_out)
    # Embed before taking the locks (an API embedder may be slow); under them only if
    # the message arrived meanwhile. An opted-out author's text is never embedded.
    embedded = await _embed_episode(memory, new_text) if kept else None
    async with memory._sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.CHAIN, LockPurpose.GRAPH)
        episode = await _find_episode(session, conversation_id, message_id)
        if episode is None:
            status = "deleted" if await _tombstoned(session, conversation_id, message_id) else "unknown"
            report = EditReport(conversation_id, message_id, status)
        elif episode.text == new_text:
            report = EditReport(conversation_id, message_id, "unchanged", episode.id)
        elif edited_at is not None and episode.edited_at is not None and edited_at < episode.edited_at:
            # A platform redelivering an older edit after a newer one: the newer text stands.
            report = EditReport(conversation_id, message_id, "outdated", episode.id)
        elif opted_out and await _author(session, conversation_id, episode) in opted_out:
            deleted = await _delete(memory, session, conversation_id, episode)
            await _audit(session, conversation_id, principal, "delete_episode", deleted)  # a deletion, logged as one
            report = EditReport(conversation_id, message_id, "forgotten", episode.id, deleted.retraction)
        else:
            if embedded is None:
                embedded = await _embed_episode(memory, new_text)
            retraction = await _rewrite(memory, session, conversation_id, episode, new_text, embedded, edited_at)
            report = EditReport(conversation_id, message_id, "edited", episode.id, retraction)
        if report.status != "forgotten":
            await _audit(session, conversation_id, principal, "edit_episode", report)
    report.summary_rebuilt = await rebuild_summary_if_cleared(memory, conversation_id, report.retraction)
    return report


async def _rewrite(
    memory: Memory,
    session: AsyncSession,
    conversation_id: int,
    episode: Episode,
    new_text: str,
    embedded: tuple[str, EmbeddingBatch],
    edited_at: datetime | None,
) -> Retraction:
    """Retract the old text's support, store the new text with its own and searched
    vectors, and recompute the successor's searched vector (it holds a share of this one)."""
    document_text, batch = embedded
    retraction = await retract_support(session, conversation_id, [episode.id], memory.embedder, edited=episode.id)
    await episodes.replace_text(session, conversation_id, episode.id, new_text, batch.vectors[0], edited_at or datetime.now(UTC))
    searched = await exchange_vectors_of(session, conversation_id, {episode.id: batch.vectors[0]}, {episode.id: episode.prev_id})
    document = Document("episode", episode.id, document_text, searched[episode.id], episode.message_time)
    await upsert_documents(session, conversation_id, [document])
    if episode.next_id is not None:
        await refresh_exchange_vectors(session, conversation_id, [episode.next_id])
    await record_usage(session, conversation_id, Usage.embedding("ingestion", "embed_episode", batch))
    return retraction


async def _embed_episode(memory: Memory, text: str) -> tuple[str, EmbeddingBatch]:
    document_text = episode_document_text(text)
    return document_text, await memory.embedder.embed([document_text])
