"""Slack payloads to normalised events: pure functions over the dicts Slack sends (as
``slack_bolt/request/payload_utils.py`` is), tested without a network.

The same message reads the same way from every source: an Events API delivery, a
``conversations.history`` page (backfill, the missed-deletion sweep) and a workspace
export's daily files, so a live event for a backfilled or imported message is a
duplicate. A message's id is its ``ts`` (unique in its channel); the conversation is
``ConversationRef("slack", team_id, channel_id)``; ``thread_ts`` is the thread.

Which messages count, and why:

- no subtype, ``thread_broadcast`` (a reply also shown in the channel), ``me_message``
  and ``file_share`` (its text plus the shared files' names, so "the deck is in Q3.pdf"
  is findable; ``files[]``, or the single ``file`` of older shares) are people's
  messages; ``bot_message`` (or any message with a ``bot_id`` and no user) is stored
  with role ``bot`` (context, never evidence). A bot's content is often not in ``text``
  at all but in legacy ``attachments`` (``pretext``, ``title``, ``text``, ``fields``,
  else ``fallback``: GitHub commits, alerts) or Block Kit ``blocks``: those are read
  too, for bots only (a person's attachments are link unfurls, and their blocks repeat
  ``text``).
- direct messages (``channel_type`` ``im`` or ``mpim``) are refused (``refusal``):
  Stashbird remembers channels only, on every path (live events, backfill, exports).
- joins, leaves, topic and purpose changes and other housekeeping subtypes are not
  conversation and are skipped.
- ``message_changed`` is an edit (the whole message with its new text), unless the text
  and files did not change (an unfurl, a reaction count, metadata): then nothing. A new
  ``message`` without a ``ts`` (older deliveries) is named by ``previous_message.ts``. If the
  new message is a ``tombstone`` (a thread parent deleted while it has replies), the
  parent is deleted. ``message_deleted`` deletes ``deleted_ts``.
- the bot removed from a channel: ``channel_left`` / ``group_left`` (sent to the bot
  itself), or ``member_left_channel`` naming the bot's user; added back:
  ``channel_joined`` / ``group_joined`` (whose ``channel`` is the channel object, not its
  id) or ``member_joined_channel`` naming the bot. Another member joining or leaving a
  channel is not leaving the workspace: nothing. Without the bot's user id (no
  ``authorizations`` in an old envelope) a ``member_*_channel`` cannot be told apart and
  is skipped; ``channel_left`` still says it.
- a member leaving the workspace: ``user_change`` whose ``user.deleted`` is true (a
  deactivated account); any other ``user_change`` (a profile edit, a reactivation, an
  old frame without ``deleted``) is nothing. It names no channel: a ``WorkspaceChange``.
- a message that mentions the bot is a question. Slack sends it twice (``app_mention``
  and ``message``); both become one ``Mention`` with event id ``mention:<ts>``, so the
  second is a redelivery.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from connectors.events import (
    AdminCommand,
    Author,
    BotPresence,
    ChannelDeleted,
    ChatEvent,
    ChatMessage,
    Mention,
    MessageDeleted,
    MessageEdited,
    MessagePosted,
    ReplyTarget,
    WorkspaceChange,
)
from memory import ConversationRef, ValidationError, Workspace, parse_time

PLATFORM = "slack"
PEOPLE_SUBTYPES = frozenset({None, "thread_broadcast", "file_share", "me_message"})
BOT_SUBTYPE = "bot_message"
RICH_TEXT_RUNS = frozenset({"rich_text_section", "rich_text_preformatted", "rich_text_quote"})
DIRECT_CHANNEL_TYPES = frozenset({"im", "mpim"})
DIRECT_REFUSAL = "a direct message: Stashbird remembers channels only"
BOT_LEFT = frozenset({"channel_left", "group_left"})  # sent to the bot when it is removed
BOT_JOINED = frozenset({"channel_joined", "group_joined"})
MEMBERSHIP = {"member_left_channel": False, "member_joined_channel": True}  # present afterwards
MEMBERSHIP_EVENTS = (*sorted(BOT_LEFT | BOT_JOINED), *MEMBERSHIP, "user_change")  # the app subscribes to these
MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")

Payload = Mapping[str, Any]


def conversation(team_id: str, channel_id: str) -> ConversationRef:
    return ConversationRef(PLATFORM, team_id, channel_id)


def bot_user_id(body: Payload) -> str | None:
    """The app's bot user, from the envelope's ``authorizations``."""
    for authorization in body.get("authorizations") or ():
        if authorization.get("is_bot") and authorization.get("user_id"):
            return str(authorization["user_id"])
    return None


def _listed(value: Any) -> list[Any]:
    """A field that should be a list of objects, as one (anything else: nothing). Pure."""
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _files(message: Payload) -> list[Payload]:
    single = message.get("file")
    return _listed(message.get("files")) or ([single] if isinstance(single, Mapping) else [])


def _attachment_parts(attachment: Payload) -> list[str]:
    """A legacy attachment's readable text: pretext, title, text and ``title: value``
    fields; its ``fallback`` (the plain summary) only when it has none of those."""
    fields = [": ".join(str(f.get(k)).strip() for k in ("title", "value") if f.get(k)) for f in _listed(attachment.get("fields"))]
    parts = [str(attachment.get(k) or "").strip() for k in ("pretext", "title", "text")] + fields
    parts = [p for p in parts if p]
    return parts or [str(attachment.get("fallback") or "").strip()]


def _block_parts(value: Any) -> list[str]:
    """The text of Block Kit blocks (sections, headers, context, rich text), in order."""
    if isinstance(value, list):
        return [part for item in value for part in _block_parts(item)]
    if not isinstance(value, Mapping):
        return []
    kind = value.get("type") if isinstance(value.get("type"), str) else None
    if kind in ("plain_text", "mrkdwn", "text", "link") and isinstance(value.get("text"), str):
        return [value["text"]]
    parts = [part for key in ("text", "fields", "elements") for part in _block_parts(value.get(key))]
    if kind in RICH_TEXT_RUNS:  # one sentence split into styled runs
        return ["".join(parts)]
    return parts


def is_bot(message: Payload) -> bool:
    return message.get("subtype") == BOT_SUBTYPE or bool(message.get("bot_id") and not message.get("user"))


def message_text(message: Payload) -> str:
    """The text as stored: the message's text and the names of the files it shares;
    for a bot, also its attachments' and blocks' text (see the module doc)."""
    parts = [str(message.get("text") or "").strip()]
    if message.get("bot_id") or message.get("subtype") == BOT_SUBTYPE:
        if not parts[0]:
            parts += _block_parts(message.get("blocks"))
        for attachment in _listed(message.get("attachments")):
            parts += _attachment_parts(attachment)
    text = "\n".join(dict.fromkeys(p.strip() for p in parts if p and p.strip()))
    names = [str(f.get("name") or f.get("title")) for f in _files(message) if f.get("name") or f.get("title")]
    if names:
        text = f"{text}\n[shared files: {', '.join(names)}]".strip()
    return text


def author(message: Payload) -> Author | None:
    """Who wrote it: a bot (by its bot id, with the name it posted under) or a user
    (name and role looked up later; a workspace export's ``user_profile`` gives the name)."""
    if is_bot(message):
        bot_id = message.get("bot_id") or message.get("user")
        if not bot_id:
            return None
        profile = message.get("bot_profile") or {}
        name = message.get("username") or profile.get("name") or str(bot_id)
        return Author(str(bot_id), str(name), "bot")
    user = message.get("user")
    if not user:
        return None
    profile = message.get("user_profile") or {}
    name = profile.get("display_name") or profile.get("real_name") or None
    return Author(str(user), str(name) if name else None, None)


def chat_message(message: Payload) -> ChatMessage | None:
    """A Slack message (from an event, a history page or an export) as a ChatMessage,
    or None when it is not conversation (housekeeping subtypes, no text, no author)."""
    subtype = message.get("subtype")
    if subtype not in PEOPLE_SUBTYPES and subtype != BOT_SUBTYPE:
        return None
    writer = author(message)
    text = message_text(message)
    ts = message.get("ts")
    if writer is None or not text or not ts:
        return None
    thread = message.get("thread_ts")
    return ChatMessage(
        id=str(ts),
        author=writer,
        text=text,
        time=parse_time(str(ts)),
        thread_id=str(thread) if thread else None,
        reply_to=str(thread) if thread and thread != ts else None,
    )


def mentions(text: str, bot_user: str | None) -> bool:
    return bot_user is not None and any(m.group(1) == bot_user for m in MENTION.finditer(text))


def question_of(text: str, bot_user: str | None) -> str:
    """The text without the bot's mention(s): what is asked."""
    return " ".join(MENTION.sub(lambda m: "" if m.group(1) == bot_user else m.group(0), text).split())


def _mention(ref: ConversationRef, message: ChatMessage, bot_user: str | None) -> Mention:
    target = ReplyTarget(message_id=message.id, thread_id=message.thread_id)
    return Mention(ref, f"mention:{message.id}", message, question_of(message.text, bot_user), target)


def _edit(ref: ConversationRef, body: Payload, event: Payload) -> ChatEvent | None:
    previous = event.get("previous_message") or {}
    new = dict(event.get("message") or {})
    if not new.get("ts") and previous.get("ts"):
        new["ts"] = previous["ts"]  # older deliveries name the message only in previous_message
    if not new.get("ts"):
        raise ValidationError("message.ts", "is missing from the message_changed event (and from previous_message)")
    if new.get("subtype") == "tombstone":
        return MessageDeleted(ref, str(body["event_id"]), str(new["ts"]))
    if previous and message_text(previous) == message_text(new):
        return None  # an unfurl, a reaction, metadata: the text did not change
    message = chat_message(new)
    if message is None:
        return None
    edited = (new.get("edited") or {}).get("ts") or event.get("event_ts")
    return MessageEdited(ref, str(body["event_id"]), message, parse_time(str(edited)) if edited else None)


def presence(body: Payload, event: Payload, team: str, bot_user: str | None) -> BotPresence | None:
    """The bot removed from a channel or added back (see the module doc), or None when
    the membership event is someone else's."""
    kind = str(event.get("type"))
    channel = event.get("channel")
    if isinstance(channel, Mapping):  # channel_joined / group_joined carry the channel object
        channel = channel.get("id")
    if not isinstance(channel, str) or not channel:
        raise ValidationError("channel", f"is missing from the {kind} event")
    if kind in MEMBERSHIP:
        if bot_user is None or event.get("user") != bot_user:
            return None
        present = MEMBERSHIP[kind]
    else:
        present = kind in BOT_JOINED
    return BotPresence(conversation(team, channel), str(body["event_id"]), present)


def member_left(body: Payload, event: Payload, team: str) -> WorkspaceChange | None:
    """A ``user_change`` for a deactivated account: that member left the workspace."""
    user = event.get("user")
    if not isinstance(user, Mapping) or user.get("deleted") is not True:
        return None
    if not user.get("id"):
        raise ValidationError("user.id", "is missing from the user_change event")
    return WorkspaceChange(Workspace(PLATFORM, team), str(body["event_id"]), "member_left", str(user["id"]))


def refusal(body: Payload) -> str | None:
    """Why a delivery is refused whole, or None: direct messages are not remembered. Pure."""
    event = body.get("event") or {}
    if event.get("channel_type") in DIRECT_CHANNEL_TYPES:
        return DIRECT_REFUSAL
    return None


def team_of(body: Payload) -> str:
    """The workspace a delivery (event envelope or slash command) is for."""
    event = body.get("event") or {}
    return str(body.get("team_id") or (event.get("team") if isinstance(event, Mapping) else "") or "")


def to_events(body: Payload, bot_user: str | None = None) -> list[ChatEvent | WorkspaceChange]:
    """The events of one Events API delivery (an ``event_callback`` envelope); an
    empty list for what is not conversation. ``bot_user``: the app's bot user id
    (default: from the envelope's ``authorizations``)."""
    event = body.get("event") or {}
    kind = event.get("type")
    team = team_of(body)
    channel = event.get("channel")
    if not body.get("event_id") or not team:
        raise ValidationError("event_id" if not body.get("event_id") else "team_id", "is missing from the envelope")
    bot_user = bot_user or bot_user_id(body)
    if kind in ("channel_deleted", "group_deleted") and isinstance(channel, str):
        return [ChannelDeleted(conversation(team, channel), str(body["event_id"]))]
    if kind in BOT_LEFT or kind in BOT_JOINED or kind in MEMBERSHIP:
        found: ChatEvent | WorkspaceChange | None = presence(body, event, team, bot_user)
        return [found] if found else []
    if kind == "user_change":
        found = member_left(body, event, team)
        return [found] if found else []
    if kind not in ("message", "app_mention") or not isinstance(channel, str):
        return []
    ref = conversation(team, channel)
    subtype = event.get("subtype")
    if subtype == "message_changed":
        edit = _edit(ref, body, event)
        return [edit] if edit else []
    if subtype == "message_deleted":
        deleted = event.get("deleted_ts") or (event.get("previous_message") or {}).get("ts")
        if not deleted:
            raise ValidationError("deleted_ts", "is missing from the message_deleted event")
        return [MessageDeleted(ref, str(body["event_id"]), str(deleted))]
    message = chat_message(event)
    if message is None:
        return []
    if kind == "app_mention" or (message.author.role != "bot" and mentions(message.text, bot_user)):
        return [_mention(ref, message, bot_user)]
    return [MessagePosted(ref, str(body["event_id"]), message)]


def to_admin_command(body: Payload) -> AdminCommand:
    """A ``/memory`` slash command (form fields): answered ephemerally via its ``response_url``."""
    for field in ("team_id", "channel_id", "user_id", "trigger_id"):
        if not body.get(field):
            raise ValidationError(field, "is missing from the slash command")
    user = str(body["user_id"])
    handle = {"response_url": str(body["response_url"])} if body.get("response_url") else {}
    return AdminCommand(
        conversation(str(body["team_id"]), str(body["channel_id"])),
        f"command:{body['trigger_id']}",
        Author(user),
        str(body.get("text") or ""),
        ReplyTarget(user_id=user, ephemeral=True, handle=handle),
    )
