"""Discord payloads -> normalised chat events, and replies -> Discord message bodies. Pure.

Input is what Discord sends: gateway dispatch data (``MESSAGE_CREATE`` ...), REST
message objects (channel history) and interaction payloads, as dicts. Rules, and why:

- A conversation is one Discord channel: ``discord:<guild id>:<channel id>``. A thread
  (a forum post too) is a channel of its own in Discord, with its own id, and every
  delete event names only that id; so a thread is its own conversation, a question in a
  thread is answered from the thread, and deleting a thread drops that conversation.
  Direct messages (no guild) are not remembered.
- The gateway's parsed objects are the client's cache, mutated in place by later events
  (an ``on_message`` handler can see the text of a later edit); parsing the raw payloads,
  in gateway order, keeps a burst of create, edit and delete of one message exact.
- Event ids make a replay the same event: a create is ``<message id>:create``, an edit
  ``<message id>:edit:<edited_timestamp>``, so a gateway RESUME that replays events, or a
  backfill of a message the live stream brought, changes nothing.
- Only people's messages (types Default and Reply) and bots' answers to commands are
  remembered; system notices (joins, pins, thread created) are not. Our own bot's
  messages are never stored (its answers quote what it cites, and would outlive a
  deleted source); other bots' and webhooks' are, with role ``bot`` (context, never
  evidence), their text read from ``content`` and from their rich embeds (title,
  description, fields, footer: where deploy, alert and ticket bots put everything).
- A forwarded message (``message_reference.type`` 1) carries the original in
  ``message_snapshots``: stored as the forwarder's message, its text the snapshot's
  (with attachment names) after ``[forwarded]``. Discord's snapshot does not name the
  original author, so neither does the stored message.
- Leaving: ``GUILD_MEMBER_REMOVE`` (sent only with the members intent, which the
  client asks for only when STASHBIRD_ON_MEMBER_LEAVE=forget needs it) is that member
  leaving the server (our own bot's is skipped: its removal is ``GUILD_DELETE``);
  ``GUILD_DELETE`` without ``unavailable: true`` is the bot removed from the server
  (``unavailable`` is an outage, not a removal), and a later ``GUILD_CREATE`` the bot
  there again. Each is a ``WorkspaceChange`` (the server's channels in memory are the
  service's to find). Their event ids: ``delivery`` (the client's session id and the
  frame's sequence, the same when a RESUME replays it), ``GUILD_CREATE``'s the bot's
  ``joined_at``, which every reconnect repeats and only a new join changes.
- Role: ``bot`` for bots; ``admin`` for the guild owner and anyone whose roles grant
  Manage Guild or Administrator (interactions carry the computed permissions; messages
  carry the member's role ids, resolved against the guild's roles); else ``user``. The
  service adds the configured admin ids.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from connectors.events import (
    AdminCommand,
    Author,
    ChannelDeleted,
    ChatEvent,
    ChatMessage,
    CitedMessage,
    Mention,
    MessageDeleted,
    MessageEdited,
    MessagePosted,
    MessagesDeleted,
    Reply,
    ReplyTarget,
    Role,
    WorkspaceChange,
)
from connectors.replies import numbered_line
from memory import ConversationRef, ValidationError, Workspace

PLATFORM = "discord"
MANAGE_GUILD = 1 << 5
ADMINISTRATOR = 1 << 3
EPHEMERAL = 1 << 6
MESSAGE_LIMIT = 2000  # characters in one Discord message
# Default, Reply, and bots' answers to application commands (Chat Input, Context Menu Command)
REMEMBERED_TYPES = frozenset({0, 19, 20, 23})
RICH = "rich"  # the embed type bots and webhooks post (others are link previews, images, videos)
FORWARD = 1  # message_reference.type of a forwarded message
FORWARDED = "[forwarded]"
COMMAND = "memory"
_USER_MENTION = re.compile(r"<@!?(\d+)>")

Payload = Mapping[str, Any]


@dataclass(frozen=True)
class GuildInfo:
    """What the parser needs from the client's guild cache: the owner, each role's
    permission bits (the @everyone role's id is the guild's), and which cached thread
    belongs to which channel (deleting a channel deletes its threads)."""

    id: str
    owner_id: str | None = None
    role_permissions: Mapping[str, int] = field(default_factory=dict)
    thread_parents: Mapping[str, str] = field(default_factory=dict)


def conversation(guild_id: str, channel_id: str) -> ConversationRef:
    return ConversationRef(PLATFORM, str(guild_id), str(channel_id))


def message_link(ref: ConversationRef, message_id: str) -> str:
    """The message's jump URL (``https://discord.com/channels/<guild>/<channel>/<message>``)."""
    return f"https://discord.com/channels/{ref.workspace_id}/{ref.channel_id}/{message_id}"


def snowflake_time(value: str | int) -> datetime:
    """When a Discord id was made (ms since 2015-01-01 in its top 42 bits)."""
    return datetime.fromtimestamp(((int(value) >> 22) + 1420070400000) / 1000, tz=UTC)


def snowflake_at(moment: datetime) -> str:
    """The smallest Discord id made at ``moment`` (for ``after=`` in history requests)."""
    return str(max(0, int(moment.timestamp() * 1000) - 1420070400000) << 22)


# --- people ---------------------------------------------------------------------------


def member_role(user: Payload, member: Payload | None, guild: GuildInfo | None) -> Role:
    """bot, admin (owner, Manage Guild or Administrator) or user."""
    if user.get("bot") is True:
        return "bot"
    if guild is not None and guild.owner_id is not None and str(user.get("id")) == guild.owner_id:
        return "admin"
    return "admin" if _permissions(member, guild) & (MANAGE_GUILD | ADMINISTRATOR) else "user"


def _permissions(member: Payload | None, guild: GuildInfo | None) -> int:
    if member is None:
        return 0
    if member.get("permissions") is not None:  # interactions: computed by Discord
        return _int(member["permissions"], "member.permissions")
    if guild is None:
        return 0
    bits = guild.role_permissions.get(guild.id, 0)
    for role_id in _list(member, "roles"):
        bits |= guild.role_permissions.get(str(role_id), 0)
    return bits


def display_name(user: Payload, member: Payload | None = None) -> str:
    """The name people see: server nickname, else display name, else username."""
    for name in ((member or {}).get("nick"), user.get("global_name"), user.get("username")):
        if isinstance(name, str) and name.strip():
            return name
    return str(user.get("id"))


# --- messages -------------------------------------------------------------------------


def embed_text(embed: Payload) -> str:
    """What a rich embed says, a line each: its author's name, title, description, each
    field as ``name: value`` (a blank name, often a zero-width space, left out), footer."""
    fields = []
    for item in _list(embed, "fields"):
        if isinstance(item, Mapping):
            name, value = _text(item, "name").strip(" \u200b"), _text(item, "value").strip()
            fields.append(f"{name}: {value}" if name and value else name or value)
    lines = [
        _text(_mapping(embed, "author"), "name"),
        _text(embed, "title"),
        _text(embed, "description"),
        *fields,
        _text(_mapping(embed, "footer"), "text"),
    ]
    return "\n".join(line.strip() for line in lines if line.strip())


def _own_text(data: Payload) -> str:
    """A message object's own content (mentions as ``@name``), its rich embeds' text and
    its attachments' names. Only ``rich`` embeds are content (bots' and webhooks' own);
    link previews Discord adds to a message are not what anyone wrote."""
    names = {str(u.get("id")): display_name(u) for u in _list(data, "mentions") if isinstance(u, Mapping)}
    content = _USER_MENTION.sub(lambda m: f"@{names.get(m.group(1), m.group(1))}", _text(data, "content")).strip()
    embeds = [embed_text(e) for e in _list(data, "embeds") if isinstance(e, Mapping) and e.get("type", RICH) == RICH]
    files = [str(a["filename"]) for a in _list(data, "attachments") if isinstance(a, Mapping) and a.get("filename")]
    return composed(content, embeds, files)


def composed(content: str, embeds: Sequence[str], files: Sequence[str]) -> str:
    """A message's stored text: content, then each embed's text, a line each, then
    ``[attachment: name]`` per file (the gateway, history and exports alike)."""
    text = "\n".join(part for part in (content.strip(), *embeds) if part)
    return " ".join(part for part in (text, *(f"[attachment: {name}]" for name in files)) if part)


def forwarded(data: Payload) -> bool:
    """A forward: ``message_reference.type`` 1, the forwarded message in ``message_snapshots``."""
    return _mapping(data, "message_reference").get("type") == FORWARD


def message_text(data: Payload) -> str:
    """The message's text (``_own_text``); a forward's is its snapshot's, marked
    ``[forwarded]`` (Discord's snapshot does not say who wrote the original)."""
    parts = [_own_text(data)]
    if forwarded(data):
        snapshots = [_mapping(s, "message") for s in _list(data, "message_snapshots") if isinstance(s, Mapping)]
        parts += [f"{FORWARDED} {text}" for text in map(_own_text, snapshots) if text]
    return "\n".join(part for part in parts if part)


def chat_message(data: Payload, guild: GuildInfo | None = None) -> ChatMessage:
    """A ChatMessage from a Discord message object (gateway or REST); ValidationError
    names the missing field. A webhook's message is a bot's; a reply refers to the
    message it answers (a forward's reference is to a message elsewhere: not a reply)."""
    user = _mapping(data, "author")
    member = _mapping(data, "member") or None
    reference = _mapping(data, "message_reference")
    role = "bot" if data.get("webhook_id") else member_role(user, member, guild)
    edited = data.get("edited_timestamp")
    return ChatMessage(
        id=_id(data, "id"),
        author=Author(snowflake(user.get("id"), "author.id"), display_name(user, member), role),
        text=message_text(data),
        time=timestamp(data.get("timestamp"), "timestamp"),
        reply_to=str(reference["message_id"]) if reference.get("message_id") and not forwarded(data) else None,
        edited_at=timestamp(edited, "edited_timestamp") if edited else None,
    )


def remembered(data: Payload, bot_id: str) -> bool:
    """A person's (or another bot's) message in a guild, with something to remember."""
    user = _mapping(data, "author")
    return (
        _message_type(data) in REMEMBERED_TYPES
        and str(user.get("id")) != bot_id
        and user.get("system") is not True
        and bool(message_text(data))
    )


def mentions_bot(data: Payload, bot_id: str) -> bool:
    listed = any(str(u.get("id")) == bot_id for u in _list(data, "mentions") if isinstance(u, Mapping))
    return listed or bot_id in _USER_MENTION.findall(_text(data, "content"))


def question_text(content: str, bot_id: str) -> str:
    """The message without the bot's mention: the question asked."""
    return " ".join(re.sub(rf"<@!?{re.escape(bot_id)}>", " ", content).split())


def message_created(data: Payload, bot_id: str, guild: GuildInfo | None) -> ChatEvent | None:
    """MESSAGE_CREATE: a Mention when it mentions the bot, else a MessagePosted."""
    if not data.get("guild_id") or not remembered(data, bot_id):
        return None
    ref = conversation(data["guild_id"], _id(data, "channel_id"))
    message = chat_message(data, guild)
    event_id = f"{message.id}:create"
    if mentions_bot(data, bot_id) and message.author.role != "bot":
        reply = ReplyTarget(message_id=message.id, user_id=message.author.id)
        return Mention(ref, event_id, message, question_text(_text(data, "content"), bot_id), reply)
    return MessagePosted(ref, event_id, message)


def message_updated(data: Payload, bot_id: str, guild: GuildInfo | None) -> MessageEdited | None:
    """MESSAGE_UPDATE with the full message and an edit time is a text edit; anything
    else (an embed unfurl, a pin) changes nothing remembered."""
    if not data.get("guild_id") or "content" not in data or not data.get("edited_timestamp"):
        return None
    if not data.get("author") or not remembered(data, bot_id):
        return None
    message = chat_message(data, guild)
    edited_at = timestamp(data["edited_timestamp"], "edited_timestamp")
    ref = conversation(data["guild_id"], _id(data, "channel_id"))
    return MessageEdited(ref, f"{message.id}:edit:{data['edited_timestamp']}", message, edited_at)


def message_deleted(data: Payload) -> MessageDeleted | None:
    if not data.get("guild_id"):
        return None
    message_id = _id(data, "id")
    return MessageDeleted(conversation(data["guild_id"], _id(data, "channel_id")), f"{message_id}:delete", message_id)


def messages_deleted(data: Payload) -> MessagesDeleted | None:
    ids = tuple(sorted({_id({"ids": i}, "ids") for i in _list(data, "ids")}, key=int))
    if not data.get("guild_id") or not ids:
        return None
    digest = hashlib.sha256(",".join(ids).encode()).hexdigest()[:16]
    return MessagesDeleted(conversation(data["guild_id"], _id(data, "channel_id")), f"bulk:{digest}", ids)


def channel_deleted(data: Payload, guild: GuildInfo | None) -> list[ChatEvent]:
    """CHANNEL_DELETE / THREAD_DELETE: the channel's conversation and those of its
    threads the client knew of are dropped (others: the sweep finds them gone)."""
    if not data.get("guild_id"):
        return []
    channel_id = _id(data, "id")
    threads = [t for t, parent in (guild.thread_parents.items() if guild else ()) if parent == channel_id]
    return [ChannelDeleted(conversation(data["guild_id"], gone), f"{gone}:channel-deleted") for gone in (channel_id, *threads)]


def member_removed(data: Payload, bot_id: str, delivery: str) -> WorkspaceChange | None:
    """GUILD_MEMBER_REMOVE: a member left (or was removed from) the server."""
    user = snowflake(_mapping(data, "user").get("id"), "user.id")
    if user == bot_id:
        return None
    return WorkspaceChange(Workspace(PLATFORM, _id(data, "guild_id")), f"{user}:member-removed:{delivery}", "member_left", user)


def guild_changed(name: str, data: Payload, delivery: str) -> WorkspaceChange | None:
    """GUILD_DELETE (the bot removed, unless ``unavailable``: an outage) or GUILD_CREATE
    (the bot in the server: at every connect, and when added back)."""
    guild = _id(data, "id")
    if name == "GUILD_DELETE":
        if data.get("unavailable") is True:
            return None
        return WorkspaceChange(Workspace(PLATFORM, guild), f"{guild}:guild-delete:{delivery}", "bot_removed")
    joined = data.get("joined_at")
    stamp = joined if isinstance(joined, str) and joined else delivery
    return WorkspaceChange(Workspace(PLATFORM, guild), f"{guild}:guild-create:{stamp}", "bot_added")


def dispatch(
    name: str, data: Payload, bot_id: str, guild: GuildInfo | None, delivery: str = ""
) -> list[ChatEvent | WorkspaceChange]:
    """The events a gateway dispatch means (none for the ones memory does not care
    about). ``delivery``: the frame's id in its session (module doc)."""
    if name == "GUILD_MEMBER_REMOVE":
        removed = member_removed(data, bot_id, delivery)
        return [removed] if removed else []
    if name in ("GUILD_DELETE", "GUILD_CREATE"):
        changed = guild_changed(name, data, delivery)
        return [changed] if changed else []
    if name == "MESSAGE_CREATE":
        events: list[ChatEvent | None] = [message_created(data, bot_id, guild)]
    elif name == "MESSAGE_UPDATE":
        events = [message_updated(data, bot_id, guild)]
    elif name == "MESSAGE_DELETE":
        events = [message_deleted(data)]
    elif name == "MESSAGE_DELETE_BULK":
        events = [messages_deleted(data)]
    elif name in ("CHANNEL_DELETE", "THREAD_DELETE"):
        return list(channel_deleted(data, guild))
    else:
        return []
    return [event for event in events if event is not None]


# --- the /memory command ----------------------------------------------------------------


def command_text(options: Sequence[Payload]) -> str:
    """Interaction options as the command's text: ``about topic:Maya`` -> ``about Maya``."""
    words: list[str] = []
    for option in options:
        if option.get("type") in (1, 2):  # a subcommand (group): its name, then its options
            words.append(str(option.get("name")))
            words.append(command_text(_list(option, "options")))
        elif option.get("value") is not None:
            words.append(str(option["value"]))
    return " ".join(word for word in words if word)


def admin_command(interaction: Payload) -> AdminCommand | None:
    """An application command ``/memory …`` in a guild, with who ran it (their role from
    the permissions Discord computed) and where the ephemeral answer goes."""
    data = _mapping(interaction, "data")
    member = _mapping(interaction, "member")
    if interaction.get("type") != 2 or data.get("name") != COMMAND or not interaction.get("guild_id") or not member:
        return None
    user = _mapping(member, "user")
    author = Author(_id(user, "id"), display_name(user, member), member_role(user, member, None))
    handle = {
        "interaction_id": _id(interaction, "id"),
        "token": str(interaction.get("token") or ""),
        "application_id": _id(interaction, "application_id"),
    }
    reply = ReplyTarget(user_id=author.id, ephemeral=True, handle=handle)
    ref = conversation(interaction["guild_id"], _id(interaction, "channel_id"))
    return AdminCommand(ref, command_event_id(handle["interaction_id"]), author, command_text(_list(data, "options")), reply)


def command_event_id(interaction_id: str) -> str:
    """The inbox id of an interaction's command: a replay of the interaction has the same."""
    return f"{interaction_id}:command"


# --- replies ----------------------------------------------------------------------------


def discord_time(moment: datetime) -> str:
    """A timestamp tag: Discord shows it in each reader's own time zone and format."""
    return f"<t:{int(moment.timestamp())}:f>"


def source_line(number: int, cited: CitedMessage, ref: ConversationRef) -> str:
    """One cited message: who said it, when, and its jump link (Discord shows it as a
    link to the message); an outdated one with the message that corrected it."""
    line = f"{number}. **{_plain(cited.speaker)}**, {discord_time(cited.time)} {message_link(ref, cited.message_id)}"
    fixed = cited.correction
    if fixed is not None:
        link = message_link(ref, fixed.message_id)
        line += f" (outdated; corrected by **{_plain(fixed.speaker)}**, {discord_time(fixed.time)} {link})"
    elif cited.outdated:
        line += " (outdated)"
    return line


def reply_body(reply: Reply) -> dict[str, Any]:
    """The Discord message body for a reply: the answer line, one line per cited message
    (``source_line``), then notes and the answer's number as small text; cut to Discord's
    2,000 characters by dropping the last sources whole (never half a link), then the end
    of the line. Ephemeral replies carry flags 64; nobody is pinged."""
    sources = [source_line(i, cited, reply.conversation) for i, cited in enumerate(reply.citations, 1)]
    footer = [f"-# note: {note}" for note in reply.notes]
    if reply.answer_id is not None:
        footer.append(f"-# answer {reply.answer_id}")
    while sources and len("\n".join(["", *sources, *footer])) > MESSAGE_LIMIT // 2:
        sources.pop()
    tail = "\n".join(["", *sources, *footer]) if sources or footer else ""
    line = numbered_line(reply)
    room = MESSAGE_LIMIT - len(tail)
    text = line if len(line) <= room else line[: max(room - 1, 0)] + "…"
    body: dict[str, Any] = {"content": (text + tail)[:MESSAGE_LIMIT], "allowed_mentions": {"parse": []}}
    if reply.target.ephemeral:
        body["flags"] = EPHEMERAL
    elif reply.target.message_id:
        body["message_reference"] = {"message_id": reply.target.message_id, "fail_if_not_exists": False}
    return body


def _plain(name: str) -> str:
    """A display name with Discord's markdown characters escaped (a name like ``*x*``)."""
    return re.sub(r"([\\*_~`|])", r"\\\1", name)


# --- helpers ----------------------------------------------------------------------------


def snowflake(value: Any, label: str) -> str:
    """A Discord id (digits, as text or a number); ValidationError names ``label``."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).isdigit():
        raise ValidationError(label, f"must be a Discord id, got {value!r}")
    return str(value)


def timestamp(value: Any, label: str) -> datetime:
    """An ISO 8601 time with its zone, as Discord and DiscordChatExporter write them."""
    if not isinstance(value, str):
        raise ValidationError(label, f"must be an ISO 8601 time, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(label, f"must be an ISO 8601 time, got {value!r}") from None
    if parsed.tzinfo is None:
        raise ValidationError(label, f"must carry a time zone, got {value!r}")
    return parsed


def _id(data: Payload, key: str) -> str:
    return snowflake(data.get(key), key)


def _message_type(data: Payload) -> int | None:
    kind = data.get("type", 0)
    return kind if isinstance(kind, int) and not isinstance(kind, bool) else None


def _mapping(data: Payload, key: str) -> Payload:
    """An object field; missing or null is empty, anything else is refused."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(key, f"must be an object, got {type(value).__name__}")
    return value


def _list(data: Payload, key: str) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValidationError(key, f"must be a list, got {type(value).__name__}")
    return value


def _text(data: Payload, key: str) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValidationError(key, f"must be text, got {type(value).__name__}")
    return value


def _int(value: Any, label: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValidationError(label, f"must be an integer, got {value!r}") from None
