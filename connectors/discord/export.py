"""DiscordChatExporter JSON exports -> chat messages. Pure.

DiscordChatExporter (the tool Discord communities keep their history with) writes one
JSON file per channel or thread: ``guild`` {id, name}, ``channel`` {id, type, categoryId,
category, name, topic}, ``dateRange``, ``exportedAt``, ``messages`` [{id, type
("Default", "Reply", or a system notice such as "ThreadCreated", "GuildMemberJoin"),
timestamp, timestampEdited, isPinned, content (the current text), author {id, name,
discriminator, nickname, color, isBot, roles, avatarUrl}, attachments [{id, url,
fileName, fileSizeBytes}], embeds [{title, description, author {name}, fields [{name, value}],
footer {text}, ...}], stickers, reactions, mentions, reference {type ("Default",
"Forward"; absent in older versions), messageId, channelId, guildId}, forwardedMessage
{timestamp, timestampEdited, content, attachments, embeds} (a forward's snapshot)}],
``messageCount``.

A message maps to what the live stream would have stored (``payloads``): the same
conversation (``discord:<guild>:<channel>``; a thread export's channel is the thread),
the same message id, the current text with attachments named, ``timestampEdited`` as
the edit time, role ``bot`` for bots, whose embeds' text is part of theirs (the export
does not say which embeds are link previews, so a person's are not read). A forward
(reference type ``Forward``) is stored with its ``forwardedMessage``'s text and
attachments after ``[forwarded]``, as live; older exports put the snapshot's text in
``content``. So importing and then receiving live events for the same messages stores
each once.
Messages that would not be remembered live (system notices, our own bot's messages,
empty ones) are skipped; a message that is malformed is rejected with its position and
reason, and the rest are imported. A file that is not such an export is refused whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connectors.discord import payloads
from connectors.events import Author, ChatMessage
from memory import ConversationRef, ValidationError

REMEMBERED_KINDS = frozenset({"Default", "Reply"})
DIRECT_KINDS = frozenset({"DirectTextChat", "DirectGroupTextChat"})
FORWARD = "Forward"  # reference.type of a forwarded message


@dataclass
class ExportContents:
    conversation: ConversationRef
    channel_name: str
    messages: list[ChatMessage] = field(default_factory=list)
    skipped: int = 0
    rejected: list[tuple[int, str]] = field(default_factory=list)  # (position in "messages", reason)


def read_export(document: Any, bot_id: str | None = None) -> ExportContents:
    """The conversation and messages of an export; ValidationError when the document is
    not a DiscordChatExporter JSON export of a server channel."""
    if not isinstance(document, Mapping):
        raise ValidationError("export", "is not a DiscordChatExporter JSON export (expected an object)")
    guild, channel = _object(document, "guild"), _object(document, "channel")
    if channel.get("type") in DIRECT_KINDS:
        raise ValidationError("channel.type", "direct messages are not remembered")
    messages = document.get("messages")
    if not isinstance(messages, list):
        raise ValidationError("messages", "is missing or not a list")
    guild_id = payloads.snowflake(guild.get("id"), "guild.id")
    channel_id = payloads.snowflake(channel.get("id"), "channel.id")
    contents = ExportContents(payloads.conversation(guild_id, channel_id), str(channel.get("name") or ""))
    for position, raw in enumerate(messages):
        try:
            message = export_message(raw, bot_id)
        except ValidationError as error:
            contents.rejected.append((position, str(error)))
            continue
        if message is None:
            contents.skipped += 1
        else:
            contents.messages.append(message)
    return contents


def export_message(raw: Any, bot_id: str | None = None) -> ChatMessage | None:
    """One exported message as a ChatMessage; None when the live stream would not keep it."""
    if not isinstance(raw, Mapping):
        raise ValidationError("message", "is not an object")
    author = raw.get("author")
    if not isinstance(author, Mapping):
        raise ValidationError("author", "is missing")
    author_id = payloads.snowflake(author.get("id"), "author.id")
    if raw.get("type") not in REMEMBERED_KINDS or author_id == bot_id:
        return None
    bot = author.get("isBot") is True
    text = _message_text(raw, bot)
    if not text:
        return None
    name = next((n for n in (author.get("nickname"), author.get("name")) if isinstance(n, str) and n.strip()), author_id)
    reference = _object_or_empty(raw, "reference")
    reply_to = reference.get("messageId") if reference.get("type") != FORWARD else None
    edited = raw.get("timestampEdited")
    return ChatMessage(
        id=payloads.snowflake(raw.get("id"), "id"),
        author=Author(author_id, name, "bot" if bot else "user"),
        text=text,
        time=payloads.timestamp(raw.get("timestamp"), "timestamp"),
        reply_to=str(reply_to) if reply_to else None,
        edited_at=payloads.timestamp(edited, "timestampEdited") if edited else None,
    )


def _message_text(raw: Mapping[str, Any], bot: bool) -> str:
    """The message's text; a forward's after ``[forwarded]`` (its snapshot's embeds read
    when the snapshot has no text of its own: a forwarded bot notice)."""
    if _object_or_empty(raw, "reference").get("type") != FORWARD:
        return _text(raw, bot)
    snapshot = raw.get("forwardedMessage")
    if isinstance(snapshot, Mapping):
        text = _text(snapshot, not _text(snapshot, False), "forwardedMessage.")
        own = _text(raw, bot)
    else:  # older exports: the snapshot's text in the message's own content
        text, own = _text(raw, bot), ""
    return "\n".join(part for part in (own, f"{payloads.FORWARDED} {text}" if text else "") if part)


def _text(raw: Mapping[str, Any], embeds: bool, path: str = "") -> str:
    """Content, embeds' text (when ``embeds``), attachment names."""
    content = raw.get("content")
    if content is not None and not isinstance(content, str):
        raise ValidationError(f"{path}content", f"must be text, got {type(content).__name__}")
    files = [str(a["fileName"]) for a in _listed(raw, "attachments") if isinstance(a, Mapping) and a.get("fileName")]
    texts = [payloads.embed_text(e) for e in _listed(raw, "embeds") if isinstance(e, Mapping)] if embeds else []
    return payloads.composed(content or "", texts, files)


def _object_or_empty(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key)
    return value if isinstance(value, Mapping) else {}


def _listed(raw: Mapping[str, Any], key: str) -> list[Any]:
    value = raw.get(key)
    return value if isinstance(value, list) else []


def _object(document: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = document.get(key)
    if not isinstance(value, Mapping):
        raise ValidationError(key, "is missing: not a DiscordChatExporter JSON export")
    return value
