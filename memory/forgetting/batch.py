"""Forgetting many messages of one conversation at once: a person's messages, a
retention window's (memory/privacy/; memory.forgetting.deletion deletes one).

The same Algorithm 1 as a single deletion, decided over a set (``decide_deletions``,
which tests/database/test_forgetting_batch.py holds to the net effect of deleting the messages
one by one) and written through the same steps (memory.forgetting.apply): the graph,
re-wording from the surviving witnesses, rolling context, summary, answers, the episode
rows, their search documents and tombstones. What differs is the cost: one plan and one
set of statements per chunk of ``CHUNK`` messages instead of per message.

Decisions, and why:

- One transaction per call, holding the conversation's CHAIN then GRAPH lock, chunks
  taken oldest first inside it. A reader (an ask) sees the conversation as it was
  before or after the whole batch, never between chunks: there is no moment in which
  the bot answers from a half-forgotten person, and nothing to mark or hide that a
  crash could leave behind. An interrupted batch rolls back whole, so running it again
  finds every remaining message and finishes (``forget_episodes`` skips ids no longer
  stored). A caller that must not hold the locks long (retention) passes smaller
  batches and paces them.
- Chunks bound the size of each statement's id arrays and of the plan held in memory;
  the chunks' union is the set (a chunk's plan reads what the earlier chunks wrote).
- The running summary, when the batch cleared it, is rebuilt after the transaction
  from what survives, as after a single deletion.
- The audit row holds ids and counts, never text.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import BigInteger, any_, cast, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from memory.consolidation.summary import rebuild_summary
from memory.core import Memory
from memory.forgetting.apply import Removed, remove_episodes, retract_support, unlink_episodes
from memory.forgetting.plan import Retraction
from memory.store.audit import write_audit
from memory.store.locks import LockPurpose, lock_conversation
from memory.store.schema import Episode

# Messages planned together: large enough that the per-statement cost is shared by many,
# small enough that every id array stays far below a statement's parameter limits.
CHUNK = 2000


@dataclass
class BatchReport:
    """What forgetting a set of one conversation's messages changed (ids and counts)."""

    conversation_id: int
    action: str
    requested: int
    deleted: list[int] = field(default_factory=list)  # episode ids, oldest first
    chunks: int = 0
    retraction: Retraction = field(default_factory=Retraction)
    summary_rebuilt: bool = False

    @property
    def not_stored(self) -> int:
        """Requested ids already gone (forgotten before, or never in this conversation)."""
        return self.requested - len(self.deleted)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "not_stored": self.not_stored, "counts": self.retraction.counts()}


def merge_retractions(earlier: Retraction, later: Retraction) -> Retraction:
    """Two chunks' retractions as one: a record the later chunk removed is no longer
    kept, anchored, restored or re-worded. Pure."""
    relations_gone = set(later.relations_removed)
    entities_gone = set(later.entities_removed)

    def union(a: list[int], b: list[int], gone: Collection[int] = frozenset()) -> list[int]:
        return sorted(set(a).difference(gone) | set(b))

    return Retraction(
        relations_removed=union(earlier.relations_removed, later.relations_removed),
        relations_kept=union(earlier.relations_kept, later.relations_kept, relations_gone),
        relations_restored=union(earlier.relations_restored, later.relations_restored, relations_gone),
        entities_removed=union(earlier.entities_removed, later.entities_removed),
        entities_anchored=union(earlier.entities_anchored, later.entities_anchored, entities_gone),
        entities_kept=union(earlier.entities_kept, later.entities_kept, entities_gone | set(later.entities_anchored)),
        communities_dirtied=union(earlier.communities_dirtied, later.communities_dirtied),
        relations_reworded=union(earlier.relations_reworded, later.relations_reworded, relations_gone),
        entities_reworded=union(earlier.entities_reworded, later.entities_reworded, entities_gone | set(later.entities_anchored)),
        documents_removed=earlier.documents_removed + later.documents_removed,
        context_entries_dropped=earlier.context_entries_dropped + later.context_entries_dropped,
        context_entries_pruned=earlier.context_entries_pruned + later.context_entries_pruned,
        summary_cleared=earlier.summary_cleared or later.summary_cleared,
        answers_withdrawn=union(earlier.answers_withdrawn, later.answers_withdrawn),
    )


async def _stored(session: AsyncSession, conversation_id: int, episode_ids: Sequence[int]) -> list[int]:
    """The ids still stored, oldest message first."""
    query = (
        select(Episode.id)
        .where(Episode.conversation_id == conversation_id, Episode.id == any_(cast(sorted(set(episode_ids)), ARRAY(BigInteger))))
        .order_by(Episode.message_time, Episode.id)
    )
    return list((await session.execute(query)).scalars())


async def _removed(session: AsyncSession, conversation_id: int, chunk: Sequence[int]) -> Removed:
    """The chunk's chain links as they are now (earlier chunks relinked the chain), read
    as columns: an ORM object loaded before those writes would hold stale links."""
    rows = await session.execute(
        select(Episode.id, Episode.prev_id, Episode.next_id, Episode.platform_message_id).where(
            Episode.conversation_id == conversation_id, Episode.id == any_(cast(sorted(chunk), ARRAY(BigInteger)))
        )
    )
    links: dict[int, tuple[int | None, int | None]] = {}
    message_ids: dict[int, str] = {}
    for episode_id, prev_id, next_id, message_id in rows:
        links[episode_id] = (prev_id, next_id)
        message_ids[episode_id] = message_id
    return Removed(links, message_ids)


async def rebuild_summary_if_cleared(memory: Memory, conversation_id: int, retraction: Retraction) -> bool:
    """The summary was cleared (and marked dirty) in the deleting transaction, so no
    deleted text outlives it even if this fails; regenerate it from what survives."""
    if not retraction.summary_cleared:
        return False
    async with memory._sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.GRAPH)
        await rebuild_summary(memory, session, conversation_id)
    return True


async def hide_episodes(memory: Memory, targets: Mapping[int, Sequence[int]]) -> int:
    """Put episodes of several conversations (id -> episode ids) out of every reader's
    reach at once, before forgetting them one conversation at a time
    (``unlink_episodes``: search documents, chain, tombstones), so that no answer
    anywhere draws on a message of a person being forgotten. One short transaction,
    taking each conversation's locks in id order (CHAIN then GRAPH, so it cannot wait
    in a circle with a command that takes one conversation's); running it again is a
    no-op. Returns the search documents removed."""
    removed = 0
    async with memory._sessions.begin() as session:
        for conversation_id in sorted(targets):
            await lock_conversation(session, conversation_id, LockPurpose.CHAIN, LockPurpose.GRAPH)
        for conversation_id in sorted(targets):
            stored = await _stored(session, conversation_id, targets[conversation_id])
            if stored:
                _, documents = await unlink_episodes(session, conversation_id, await _removed(session, conversation_id, stored))
                removed += documents
    return removed


async def forget_episodes(
    memory: Memory,
    conversation_id: int,
    episode_ids: Sequence[int],
    *,
    principal: str,
    action: str,
    audit: Mapping[str, Any] | None = None,
) -> BatchReport:
    """Delete these episodes of one conversation and everything that rested only on them,
    in one transaction, oldest first in chunks (see the module docstring); ids no longer
    stored are skipped. ``principal`` (``kind:id``) and ``action`` name the audit row;
    ``audit``: more of its details (ids and counts, never text)."""
    report = BatchReport(conversation_id, action, len(set(episode_ids)))
    async with memory._sessions.begin() as session:
        await lock_conversation(session, conversation_id, LockPurpose.CHAIN, LockPurpose.GRAPH)
        order = await _stored(session, conversation_id, episode_ids)
        for start in range(0, len(order), CHUNK):
            chunk = order[start : start + CHUNK]
            gone = await _removed(session, conversation_id, chunk)
            retraction = await retract_support(session, conversation_id, chunk, memory.embedder)
            _, documents = await remove_episodes(session, conversation_id, gone)
            retraction.documents_removed += documents
            report.retraction = merge_retractions(report.retraction, retraction)
            report.chunks += 1
        report.deleted = order
        if order:
            details = {**(audit or {}), **report.as_dict()}
            details.pop("retraction")  # the counts carry it; ids below
            details["ids"] = {k: v for k, v in asdict(report.retraction).items() if isinstance(v, list)}
            await write_audit(session, conversation_id, principal, action, details)
    report.summary_rebuilt = await rebuild_summary_if_cleared(memory, conversation_id, report.retraction)
    return report
