"""What participants decided (migration 0017), the only writer of its two tables:

- ``participant_optouts``: a person's opt-out in one workspace; the row is the flag;
- ``conversation_retention``: a conversation's own retention window.

Each write is one statement in the caller's transaction; each says whether it changed
anything, so that the command records a change only when there was one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import ColumnElement, and_, delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.conversations import Workspace
from memory.store.schema import ConversationRetention, ParticipantOptout


def _person(workspace: Workspace, user_id: str) -> ColumnElement[bool]:
    return and_(
        ParticipantOptout.platform == workspace.platform,
        ParticipantOptout.workspace_id == workspace.workspace_id,
        ParticipantOptout.platform_user_id == user_id,
    )


async def opt_out(session: AsyncSession, workspace: Workspace, user_id: str, by: str) -> bool:
    """Flag ``user_id`` as opted out of ``workspace``; False when they were already."""
    statement = (
        insert(ParticipantOptout)
        .values(platform=workspace.platform, workspace_id=workspace.workspace_id, platform_user_id=user_id, set_by=by)
        .on_conflict_do_nothing()
    )
    return bool((await session.execute(statement)).rowcount)  # type: ignore[attr-defined]


async def opt_in(session: AsyncSession, workspace: Workspace, user_id: str) -> bool:
    """Clear the flag; False when there was none."""
    result = await session.execute(delete(ParticipantOptout).where(_person(workspace, user_id)))
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def opted_out(session: AsyncSession, workspace: Workspace) -> frozenset[str]:
    """Everyone opted out of ``workspace`` (few: read whole, then cached by the core)."""
    rows = await session.execute(
        select(ParticipantOptout.platform_user_id).where(
            ParticipantOptout.platform == workspace.platform, ParticipantOptout.workspace_id == workspace.workspace_id
        )
    )
    return frozenset(rows.scalars())


async def count_opted_out(session: AsyncSession, workspace: Workspace) -> int:
    query = select(func.count()).where(
        ParticipantOptout.platform == workspace.platform, ParticipantOptout.workspace_id == workspace.workspace_id
    )
    return int((await session.execute(query)).scalar_one())


@dataclass(frozen=True)
class RetentionRow:
    """A conversation's own window as stored: ``days`` None keeps everything."""

    days: int | None
    set_by: str


async def set_retention(session: AsyncSession, conversation_id: int, days: int | None, by: str) -> bool:
    """Set the conversation's own window (``days`` None: keep everything); False when it
    was set so already. The time is bound, not ``now()``: Citus refuses a function that is
    not immutable in the DO UPDATE SET of a distributed table."""
    at = datetime.now(UTC)
    values = {"conversation_id": conversation_id, "days": days, "set_by": by, "set_at": at}
    statement = insert(ConversationRetention).values(**values)
    statement = statement.on_conflict_do_update(
        index_elements=[ConversationRetention.conversation_id],
        set_={"days": days, "set_by": by, "set_at": at},
        where=ConversationRetention.days.is_distinct_from(days),
    )
    return bool((await session.execute(statement)).rowcount)  # type: ignore[attr-defined]


async def read_retention(session: AsyncSession, conversation_id: int) -> RetentionRow | None:
    """The conversation's own window, None when it has none (the default applies)."""
    row = (
        await session.execute(
            select(ConversationRetention.days, ConversationRetention.set_by).where(
                ConversationRetention.conversation_id == conversation_id
            )
        )
    ).first()
    return None if row is None else RetentionRow(row.days, row.set_by)
