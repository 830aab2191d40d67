"""Conversations (the unit of memory scoping), their speakers, and whether the bot is
still in them (``bot_left_at``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.errors import ValidationError
from memory.store.schema import Conversation, Episode, Speaker
from memory.validation import normalize_id

ROLES = ("user", "admin", "bot")


@dataclass(frozen=True)
class ConversationRef:
    """A channel or thread on a platform. Local (CLI) conversations use platform ``local``."""

    platform: str
    workspace_id: str
    channel_id: str

    def __post_init__(self) -> None:
        """Each part normalised as every platform id is, so one conversation has one key
        on every path (the workspace may be empty: a local conversation has none)."""
        object.__setattr__(self, "platform", normalize_id(self.platform, "conversation"))
        object.__setattr__(self, "channel_id", normalize_id(self.channel_id, "conversation"))
        blank = isinstance(self.workspace_id, str) and not self.workspace_id.strip()
        object.__setattr__(self, "workspace_id", "" if blank else normalize_id(self.workspace_id, "conversation"))

    @classmethod
    def parse(cls, value: str) -> "ConversationRef":
        """``name`` for a local conversation, or ``platform:workspace:channel``."""
        if not isinstance(value, str) or not value.strip():
            raise ValidationError("conversation", "is required")
        parts = value.split(":")
        if len(parts) == 3 and all(part.strip() for part in parts):
            return cls(*parts)
        return cls("local", "", value)

    def __str__(self) -> str:
        if self.platform == "local":
            return self.channel_id
        return f"{self.platform}:{self.workspace_id}:{self.channel_id}"

    @property
    def workspace(self) -> Workspace:
        return Workspace(self.platform, self.workspace_id)


@dataclass(frozen=True)
class Workspace:
    """A Slack team or a Discord guild (``slack:TEAM``, ``discord:GUILD``): the scope of a
    person's forgetting and opting out, since a platform user id means one person there."""

    platform: str
    workspace_id: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "platform", normalize_id(self.platform, "workspace"))
        blank = isinstance(self.workspace_id, str) and not self.workspace_id.strip()
        object.__setattr__(self, "workspace_id", "" if blank else normalize_id(self.workspace_id, "workspace"))

    @classmethod
    def parse(cls, value: str) -> Workspace:
        """``platform:workspace``, e.g. ``slack:T024BE7LD``; a local conversation's
        workspace is ``local:`` (no id)."""
        if not isinstance(value, str) or not value.strip():
            raise ValidationError("workspace", "is required")
        platform, colon, workspace_id = value.strip().partition(":")
        if not colon or not platform.strip() or ":" in workspace_id or (platform != "local" and not workspace_id.strip()):
            raise ValidationError("workspace", f"must be PLATFORM:WORKSPACE (e.g. slack:T024BE7LD), got {value!r}")
        return cls(platform, workspace_id)

    def __str__(self) -> str:
        return f"{self.platform}:{self.workspace_id}"


async def find_conversation(session: AsyncSession, ref: ConversationRef) -> int | None:
    return (
        await session.execute(
            select(Conversation.id).where(
                Conversation.platform == ref.platform,
                Conversation.workspace_id == ref.workspace_id,
                Conversation.channel_id == ref.channel_id,
            )
        )
    ).scalar()


async def ensure_conversation(session: AsyncSession, ref: ConversationRef) -> int:
    """The conversation's id, created if new (one read when it exists, as it nearly always does)."""
    found = await find_conversation(session, ref)
    if found is not None:
        return found
    await session.execute(
        insert(Conversation)
        .values(platform=ref.platform, workspace_id=ref.workspace_id, channel_id=ref.channel_id)
        .on_conflict_do_nothing(constraint="uq_conversation_platform_ids")
    )
    conversation_id = await find_conversation(session, ref)
    assert conversation_id is not None
    return conversation_id


async def ensure_speakers(
    session: AsyncSession, conversation_id: int, speakers: Iterable[tuple[str, str, str]]
) -> dict[tuple[str, str, str], int]:
    """``ensure_speaker`` for (platform user id, display name, role) keys, reading them
    all in one query and writing only the new or changed ones (usually none)."""
    keys = list(dict.fromkeys(speakers))
    rows = await session.execute(
        select(Speaker.id, Speaker.platform_user_id, Speaker.display_name, Speaker.role).where(
            Speaker.conversation_id == conversation_id, Speaker.platform_user_id.in_({k[0] for k in keys})
        )
    )
    known = {(user, name, role): speaker_id for speaker_id, user, name, role in rows}
    return {key: known[key] if key in known else await ensure_speaker(session, conversation_id, *key) for key in keys}


async def ensure_speaker(session: AsyncSession, conversation_id: int, platform_user_id: str, display_name: str, role: str) -> int:
    """Get or create a speaker; a changed display name or role is updated."""
    if role not in ROLES:
        raise ValidationError("role", f"must be one of {', '.join(ROLES)}, got {role!r}")
    statement = (
        insert(Speaker)
        .values(
            conversation_id=conversation_id,
            platform_user_id=platform_user_id,
            display_name=display_name,
            role=role,
        )
        .on_conflict_do_update(
            constraint="uq_speaker_platform_user",
            set_={"display_name": display_name, "role": role},
        )
        .returning(Speaker.id)
    )
    return (await session.execute(statement)).scalar_one()


async def delete_conversation(session: AsyncSession, ref: ConversationRef) -> bool:
    """Remove a conversation and everything stored for it (every table cascades from it)."""
    conversation_id = await find_conversation(session, ref)
    if conversation_id is None:
        return False
    await session.execute(delete(Conversation).where(Conversation.id == conversation_id))
    return True


async def mark_bot_left(session: AsyncSession, conversation_id: int, left: bool) -> bool:
    """Mark that the bot was removed from the conversation (``left``), or clear the mark
    (it was added back); True when it changed (a repeated removal keeps the first time)."""
    unchanged = Conversation.bot_left_at.is_(None) if left else Conversation.bot_left_at.is_not(None)
    statement = (
        update(Conversation)
        .where(Conversation.id == conversation_id, unchanged)
        .values(bot_left_at=func.now() if left else None)
        .returning(Conversation.id)
    )
    return (await session.execute(statement)).first() is not None


async def bot_left_at(session: AsyncSession, conversation_id: int) -> datetime | None:
    """When the bot was removed from the conversation, or None while it is there."""
    query = select(Conversation.bot_left_at).where(Conversation.id == conversation_id)
    return (await session.execute(query)).scalar()


async def list_conversations(
    session: AsyncSession, platform: str | None = None, bot_removed: bool | None = None, workspace_id: str | None = None
) -> list[ConversationRef]:
    """Every conversation (of one platform, or one of its workspaces; only those the bot
    was removed from, or is in, when ``bot_removed`` says), in creation order: a
    discovery query for scheduled work such as the missed-deletion sweep."""
    query = select(Conversation.platform, Conversation.workspace_id, Conversation.channel_id).order_by(Conversation.id)
    if platform is not None:
        query = query.where(Conversation.platform == platform)
    if workspace_id is not None:
        query = query.where(Conversation.workspace_id == workspace_id)
    if bot_removed is not None:
        query = query.where(Conversation.bot_left_at.is_not(None) if bot_removed else Conversation.bot_left_at.is_(None))
    return [ConversationRef(*row) for row in await session.execute(query)]


async def drop_speaker(session: AsyncSession, conversation_id: int, platform_user_id: str) -> bool:
    """Remove a person's speaker row (their display name) once no message of theirs is
    stored; True when it went. The caller holds the conversation's chain lock, under
    which new messages are stored."""
    speaker = Speaker.__table__
    episodes = Episode.__table__
    result = await session.execute(
        delete(Speaker)
        .where(Speaker.conversation_id == conversation_id, Speaker.platform_user_id == platform_user_id)
        .where(
            ~select(episodes.c.id)
            .where(episodes.c.conversation_id == conversation_id, episodes.c.speaker_id == speaker.c.id)
            .exists()
        )
        .returning(Speaker.id)
    )
    return result.first() is not None
