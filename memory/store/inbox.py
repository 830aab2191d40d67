"""The durable inbox: platform events stored before they are acknowledged, processed
from here, so that an acknowledged event survives a crash of the process that took it.

Rules, and why:

- One row per (conversation, platform event id): a redelivered event (Slack retries, a
  Discord RESUME replaying) finds its row and changes nothing, in any process.
- A conversation's events are processed one at a time in arrival order (an edit must not
  overtake the message it edits), by whichever process holds the conversation's
  ``LockPurpose.INBOX`` lock (a row lock held by a transaction left open for the whole
  claim: memory.store.locks). A process that dies loses its connection and with it the
  lock; its unfinished rows are simply still pending, and the
  next process to claim the conversation processes them. No lease to tune, no state in
  memory.
- A finished row keeps its ids (for the redelivery check, until pruned) and loses its
  payload, which may hold message text: nothing of a deleted message stays in the inbox.
  Finishing a deletion also clears every finished row about the same message (a create
  that failed and was kept for an operator).
- A failing event is retried with a growing delay and blocks the events after it in its
  conversation (order matters more than latency); after the last attempt it is marked
  ``failed`` with its payload kept for an operator, and the conversation moves on.
- Replies wait in the same table, as rows of kind ``reply`` (the outbox), apart from the
  conversation's ordered events: an answer is computed, then in one transaction its reply
  row is written and the mention becomes the plain message it is (``hand_over``), so the
  question is stored whether or not the answer can be posted, and a reply waiting on a
  rate-limited or unreachable platform never holds up the conversation's next events.
  A reply row is taken with a lease (``take_replies``: its ``not_before`` moved past the
  lease, so a process that dies while posting leaves it to be taken again), then settled.
  No migration: same columns, one more kind.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, func, literal_column, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.sql import Executable

from memory.store.conversations import ConversationRef, ensure_conversation
from memory.store.locks import LockPurpose, try_hold_connection
from memory.store.schema import ConnectorCursor, Conversation, InboxEvent
from memory.validation import normalize_id

OUTCOMES = ("done", "rejected", "failed")
REPLY = "reply"  # the outbox's kind: replies waiting to be posted, outside the ordered lane


@dataclass(frozen=True)
class InboxItem:
    """One pending event: ``payload`` is what the connector stored, as it stored it."""

    id: int
    event_id: str
    kind: str
    payload: dict[str, Any]
    attempts: int


@dataclass(frozen=True)
class InboxBacklog:
    """Events waiting and given up on, and the same for replies (the outbox), apart:
    a reply waiting on a rate-limited platform is not a stuck inbox."""

    pending: int
    failed: int
    oldest_pending_seconds: float | None
    replies_pending: int = 0
    replies_failed: int = 0
    oldest_reply_seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "pending": self.pending,
            "failed": self.failed,
            "oldest_pending_seconds": self.oldest_pending_seconds,
            "replies_pending": self.replies_pending,
            "replies_failed": self.replies_failed,
            "oldest_reply_seconds": self.oldest_reply_seconds,
        }


@dataclass(frozen=True)
class OutboxItem:
    """A reply row taken for posting: where it goes, the row, and how long it has waited."""

    conversation: ConversationRef
    conversation_id: int
    item: InboxItem
    age_seconds: float


@dataclass(frozen=True)
class InboxEntry:
    """An event to store: its conversation, platform event id, kind, JSON payload and the
    message it is about (validated by ``memory.api.inbox_entry``)."""

    conversation: ConversationRef
    event_id: str
    kind: str
    payload: dict[str, Any]
    message_id: str | None = None


# One statement per conversation and batch, prepared once per connection: the rows in
# the order given (their ids keep the arrival order), into the conversation's inbox if
# the conversation exists; the event ids that were new come back.
_PUT = text(
    """
    INSERT INTO inbox_events (conversation_id, event_id, kind, payload, message_id)
    SELECT c.id, u.event_id, u.kind, CAST(u.payload AS jsonb), u.message_id
    FROM conversations c,
         unnest(CAST(:event_ids AS text[]), CAST(:kinds AS text[]), CAST(:payloads AS text[]),
                CAST(:message_ids AS text[])) WITH ORDINALITY AS u(event_id, kind, payload, message_id, n)
    WHERE c.platform = :platform AND c.workspace_id = :workspace AND c.channel_id = :channel
    ORDER BY u.n
    ON CONFLICT ON CONSTRAINT uq_inbox_event DO NOTHING
    RETURNING event_id
    """
)


async def put(session: AsyncSession, entries: Sequence[InboxEntry]) -> list[bool]:
    """Store events (one statement per conversation, in the caller's transaction); per
    entry, False when the conversation's inbox already has its event id (a redelivery;
    also the second of two entries with one id)."""
    new = [False] * len(entries)
    by_conversation: dict[ConversationRef, dict[str, int]] = {}
    for index, entry in enumerate(entries):
        by_conversation.setdefault(entry.conversation, {}).setdefault(entry.event_id, index)
    for conversation, first in by_conversation.items():
        rows = [entries[i] for i in first.values()]
        inserted = await _put(session, conversation, rows)
        if not inserted:  # all redeliveries, or a conversation not created yet: create it, try again
            await ensure_conversation(session, conversation)
            inserted = await _put(session, conversation, rows)
        for event_id in inserted:
            new[first[event_id]] = True
    return new


async def _put(session: AsyncSession, conversation: ConversationRef, rows: Sequence[InboxEntry]) -> set[str]:
    result = await session.execute(
        _PUT,
        {
            "event_ids": [r.event_id for r in rows],
            "kinds": [r.kind for r in rows],
            "payloads": [json.dumps(r.payload) for r in rows],
            "message_ids": [r.message_id for r in rows],
            "platform": conversation.platform,
            "workspace": conversation.workspace_id,
            "channel": conversation.channel_id,
        },
    )
    return set(result.scalars())


async def pending_conversations(session: AsyncSession) -> list[ConversationRef]:
    """Conversations with events ready to process (the inbox's one discovery query, across
    conversations by nature, like the consolidation backlog's)."""
    ready = select(InboxEvent.conversation_id).where(
        InboxEvent.processed_at.is_(None),
        InboxEvent.kind != REPLY,
        (InboxEvent.not_before.is_(None)) | (InboxEvent.not_before <= func.now()),
    )
    rows = await session.execute(
        select(Conversation.platform, Conversation.workspace_id, Conversation.channel_id)
        .prefix_with("/* multi-shard: inbox-ready */")
        .where(Conversation.id.in_(ready.distinct()))
        .order_by(Conversation.id)
    )
    return [ConversationRef(*row) for row in rows]


class InboxClaim:
    """A conversation's inbox, held by this process while its claim lasts (``claim``);
    each change is committed at once, in a short transaction of its own."""

    def __init__(self, engine: AsyncEngine, conversation_id: int, held: AsyncConnection) -> None:
        self.engine = engine
        self.conversation_id = conversation_id
        self._held = held  # the connection holding the claim: reads go through it (``next``)

    async def _write(self, statement: Executable) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(statement)

    async def next(self, limit: int = 50) -> list[InboxItem]:
        """Pending events in arrival order, up to the first that must wait for a retry.
        Read through the claim's own connection, so that a claim lost with its
        connection (a database restart) fails here instead of processing on unheld."""
        query = (
            select(
                InboxEvent.id,
                InboxEvent.event_id,
                InboxEvent.kind,
                InboxEvent.payload,
                InboxEvent.attempts,
                func.coalesce(InboxEvent.not_before > func.now(), False),
            )
            .where(
                InboxEvent.conversation_id == self.conversation_id,
                InboxEvent.processed_at.is_(None),
                InboxEvent.kind != REPLY,
            )
            .order_by(InboxEvent.id)
            .limit(limit)
        )
        rows = (await self._held.execute(query)).all()
        items: list[InboxItem] = []
        for item_id, event_id, kind, payload, attempts, waiting in rows:
            if waiting:
                break
            items.append(InboxItem(item_id, event_id, kind, payload or {}, attempts))
        return items

    async def finish(self, item: InboxItem, outcome: str = "done", error: str | None = None) -> None:
        """Mark an event processed (``done``, or ``rejected`` as bad input) and clear its payload."""
        await self._close(item, outcome, error, keep_payload=False)

    async def finish_all(self, items: Sequence[InboxItem]) -> None:
        """Mark several events ``done`` at once (a run of messages stored together)."""
        await self._write(
            update(InboxEvent)
            .where(InboxEvent.conversation_id == self.conversation_id, InboxEvent.id.in_([i.id for i in items]))
            .values(processed_at=func.now(), outcome="done", error=None, payload=None)
        )

    async def retry(self, item: InboxItem, error: str, delay: timedelta, max_attempts: int) -> bool:
        """Count a failed attempt: try again after ``delay``, or, after ``max_attempts``,
        mark it ``failed`` (payload kept for an operator). True while it will be retried."""
        attempts = item.attempts + 1
        if attempts >= max_attempts:
            await self._close(item, "failed", error, keep_payload=True, attempts=attempts)
            return False
        await self._write(
            update(InboxEvent)
            .where(InboxEvent.conversation_id == self.conversation_id, InboxEvent.id == item.id)
            .values(attempts=attempts, error=error, not_before=func.now() + delay)
        )
        return True

    async def hand_over(self, item: InboxItem, reply: InboxEntry, then: tuple[str, dict[str, Any]] | None) -> None:
        """In one transaction: queue ``reply`` in the outbox (once: a second hand-over of
        the same event finds its row) and either finish ``item`` (``then`` None) or turn
        it into the event that is left to do (``(kind, payload)``, e.g. storing the
        mention's message), which stays first in the conversation's order."""
        outbox = insert(InboxEvent).values(
            conversation_id=self.conversation_id,
            event_id=reply.event_id,
            kind=REPLY,
            payload=reply.payload,
            message_id=reply.message_id,
        )
        mine = (InboxEvent.conversation_id == self.conversation_id) & (InboxEvent.id == item.id)
        if then is None:
            after = update(InboxEvent).where(mine).values(processed_at=func.now(), outcome="done", error=None, payload=None)
        else:
            after = update(InboxEvent).where(mine).values(kind=then[0], payload=then[1], attempts=0, error=None)
        async with self.engine.begin() as connection:
            await connection.execute(outbox.on_conflict_do_nothing(constraint="uq_inbox_event"))
            await connection.execute(after)

    async def withdraw_replies(self, message_id: str, notice: str) -> int:
        """Replies not yet posted that cite a message just deleted are rewritten to
        ``notice`` without their text or citations, so a late post never shows what was
        deleted (and the question still gets its answer: that there is none now)."""
        cites = text("jsonb_path_exists(payload, '$.citations.** ? (@.message_id == $id)', jsonb_build_object('id', :id))")
        result = await self._write_counted(
            update(InboxEvent)
            .where(
                InboxEvent.conversation_id == self.conversation_id,
                InboxEvent.kind == REPLY,
                InboxEvent.processed_at.is_(None),
                cites.bindparams(id=normalize_id(message_id, "message")),
            )
            .values(
                # the row's own fields kept; the text replaced; citations, answer id and notes gone
                payload=InboxEvent.payload.op("-")(text("CAST(ARRAY['citations', 'answer_id', 'notes'] AS text[])")).op("||")(
                    func.jsonb_build_object(literal_column("'text'"), notice)  # a constant key: Citus plans it
                )
            )
        )
        return result

    async def _write_counted(self, statement: Executable) -> int:
        async with self.engine.begin() as connection:
            return int((await connection.execute(statement)).rowcount)

    async def erase_message(self, message_id: str) -> None:
        """Clear the payloads of finished events about a message that was deleted."""
        message_id = normalize_id(message_id, "message")
        await self._write(
            update(InboxEvent)
            .where(
                InboxEvent.conversation_id == self.conversation_id,
                InboxEvent.message_id == message_id,
                InboxEvent.processed_at.is_not(None),
                InboxEvent.payload.is_not(None),
            )
            .values(payload=None)
        )

    async def _close(
        self, item: InboxItem, outcome: str, error: str | None, keep_payload: bool, attempts: int | None = None
    ) -> None:
        values: dict[str, Any] = {"processed_at": func.now(), "outcome": outcome, "error": error}
        if not keep_payload:
            values["payload"] = None
        if attempts is not None:
            values["attempts"] = attempts
        await self._write(
            update(InboxEvent)
            .where(InboxEvent.conversation_id == self.conversation_id, InboxEvent.id == item.id)
            .values(**values)
        )


@asynccontextmanager
async def claim(engine: AsyncEngine, conversation_id: int) -> AsyncIterator[InboxClaim | None]:
    """The conversation's inbox for the block, or None when another process holds it
    (``LockPurpose.INBOX``, held on a connection of its own: see memory.store.locks)."""
    async with try_hold_connection(engine, conversation_id, LockPurpose.INBOX) as held:
        yield InboxClaim(engine, conversation_id, held) if held is not None else None


async def backlog(session: AsyncSession) -> InboxBacklog:
    waiting = InboxEvent.processed_at.is_(None)
    failed = InboxEvent.outcome == "failed"
    event, reply = InboxEvent.kind != REPLY, InboxEvent.kind == REPLY

    def age(rows: Any) -> Any:
        return func.now() - func.min(InboxEvent.received_at).filter(rows)

    row = (
        await session.execute(
            select(
                func.count().filter(waiting & event),
                func.count().filter(failed & event),
                func.extract("epoch", age(waiting & event)),
                func.count().filter(waiting & reply),
                func.count().filter(failed & reply),
                func.extract("epoch", age(waiting & reply)),
            ).prefix_with("/* multi-shard: inbox-health */")
        )
    ).one()

    def seconds(value: Any) -> float | None:
        return float(value) if value is not None else None

    return InboxBacklog(int(row[0]), int(row[1]), seconds(row[2]), int(row[3]), int(row[4]), seconds(row[5]))


async def ready_replies(session: AsyncSession, platforms: Sequence[str], limit: int) -> list[tuple[ConversationRef, int, int]]:
    """Reply rows of ``platforms`` ready to post (conversation, its id, the row id), oldest first: the
    outbox's discovery read across conversations, like the inbox's own; each row is then
    taken by a statement pinned to its conversation (``take_reply``)."""
    rows = await session.execute(
        select(
            Conversation.platform, Conversation.workspace_id, Conversation.channel_id, InboxEvent.conversation_id, InboxEvent.id
        )
        .prefix_with("/* multi-shard: inbox-ready */")
        .join(Conversation, Conversation.id == InboxEvent.conversation_id)
        .where(
            InboxEvent.processed_at.is_(None),
            InboxEvent.kind == REPLY,
            (InboxEvent.not_before.is_(None)) | (InboxEvent.not_before <= func.now()),
            Conversation.platform.in_(list(platforms)),
        )
        .order_by(InboxEvent.id)
        .limit(limit)
    )
    return [(ConversationRef(p, w, c), conversation_id, row_id) for p, w, c, conversation_id, row_id in rows]


async def take_reply(
    session: AsyncSession, conversation: ConversationRef, conversation_id: int, row_id: int, lease: timedelta
) -> OutboxItem | None:
    """Take a ready reply row for ``lease`` (None when another process took it first)."""
    row = (
        await session.execute(
            update(InboxEvent)
            .where(
                InboxEvent.conversation_id == conversation_id,
                InboxEvent.id == row_id,
                InboxEvent.processed_at.is_(None),
                (InboxEvent.not_before.is_(None)) | (InboxEvent.not_before <= func.now()),
            )
            .values(not_before=func.now() + lease)
            .returning(
                InboxEvent.event_id,
                InboxEvent.kind,
                InboxEvent.payload,
                InboxEvent.attempts,
                InboxEvent.received_at,
                InboxEvent.not_before,
            )
        )
    ).one_or_none()
    if row is None:
        return None
    # The age is read off the two times the row returns (both on the database's clock):
    # Citus refuses now() in a RETURNING clause of a distributed table.
    event_id, kind, payload, attempts, received_at, leased_until = row
    age = (leased_until - lease - received_at).total_seconds()
    return OutboxItem(conversation, conversation_id, InboxItem(row_id, event_id, kind, payload or {}, attempts), age)


async def settle_reply(session: AsyncSession, taken: OutboxItem, error: str | None, retry_in: timedelta | None) -> None:
    """Posted (``error`` None: done, payload cleared), to be tried again after
    ``retry_in``, or given up (``failed``, payload kept for an operator)."""
    mine = (InboxEvent.conversation_id == taken.conversation_id) & (InboxEvent.id == taken.item.id)
    values: dict[str, Any]
    if error is None:
        values = {"processed_at": func.now(), "outcome": "done", "error": None, "payload": None}
    elif retry_in is not None:
        values = {"attempts": taken.item.attempts + 1, "error": error, "not_before": func.now() + retry_in}
    else:
        values = {"processed_at": func.now(), "outcome": "failed", "error": error, "attempts": taken.item.attempts + 1}
    await session.execute(update(InboxEvent).where(mine).values(**values))


async def prune(session: AsyncSession, older_than: timedelta) -> int:
    """Forget events finished more than ``older_than`` ago (their redelivery check with
    them: platforms redeliver within minutes, not days)."""
    stale = delete(InboxEvent).where(InboxEvent.processed_at < func.now() - older_than)
    result = await session.execute(stale.prefix_with("/* multi-shard: inbox-prune */"))
    return int(result.rowcount)  # type: ignore[attr-defined]


async def read_cursor(session: AsyncSession, conversation_id: int, name: str) -> dict[str, Any] | None:
    return (
        await session.execute(
            select(ConnectorCursor.value).where(ConnectorCursor.conversation_id == conversation_id, ConnectorCursor.name == name)
        )
    ).scalar()


async def write_cursor(session: AsyncSession, conversation_id: int, name: str, value: dict[str, Any] | None) -> None:
    """Save (or, with None, drop) a cursor."""
    if value is None:
        await session.execute(
            delete(ConnectorCursor).where(ConnectorCursor.conversation_id == conversation_id, ConnectorCursor.name == name)
        )
        return
    await session.execute(
        insert(ConnectorCursor)
        .values(conversation_id=conversation_id, name=name, value=value)
        .on_conflict_do_update(
            index_elements=[ConnectorCursor.conversation_id, ConnectorCursor.name],
            set_={"value": value, "updated_at": func.now()},
        )
    )
