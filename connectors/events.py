"""Normalised chat events: what every platform connector turns its payloads into.

A connector's pure parser (``connectors/<platform>/payloads.py``) maps each platform
payload to one of these values and hands it to ``ChatService.accept``
(``connectors/service.py``), which stores it in the durable inbox before the platform
is acknowledged and processes it from there. Nothing here knows a platform: ids are the
platform's own strings, times are aware datetimes, and ``encode``/``decode`` turn an
event into the JSON the inbox stores and back (pure, so a process that restarts after a
crash rebuilds exactly the event it acknowledged), and ``core_message`` makes a chat
message the memory core's ``Message``, for the live stream, backfill and imports alike.

Every event carries:

- ``conversation``: the ``ConversationRef`` of the channel it happened in
  (``ConversationRef(platform, workspace_or_guild_id, channel_id)``). Memory is scoped by
  it: a question asked in one conversation is answered from that conversation only.
  Use the same ref for the live stream, backfill and export import, so that a live
  event for an imported message is a duplicate.
- ``event_id``: the platform's id for this delivery (Slack's envelope ``event_id``, a
  Discord ``message_id:kind`` and so on). Two events with the same ``event_id`` in one
  conversation are one event: the second is a redelivery and changes nothing. Choose it
  so that a redelivery, a gateway replay or the second copy of the same fact (Slack
  sends a mention both as ``app_mention`` and as ``message``) gets the same id.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal, Union

from memory import ConversationRef, Message, ValidationError, Workspace, validate_message

Role = Literal["user", "admin", "bot"]


@dataclass(frozen=True)
class Author:
    """Who wrote a message or sent a command. ``name`` or ``role`` left None is looked up
    when the event is processed, not when it is acknowledged (``Platform.describe``; a
    lookup is platform I/O and the acknowledgement must be fast). ``role`` ``bot`` for
    bots and integrations (stored as context, never evidence); ``admin`` for platform
    admins (the service adds the configured admin ids)."""

    id: str
    name: str | None = None
    role: Role | None = None


@dataclass(frozen=True)
class ChatMessage:
    """One message as the platform shows it now (for an edit: the new text)."""

    id: str
    author: Author
    text: str
    time: datetime
    thread_id: str | None = None
    reply_to: str | None = None
    edited_at: datetime | None = None  # when the text shown was last edited (history, exports)


@dataclass(frozen=True)
class ReplyTarget:
    """Where an answer goes: into ``thread_id`` (None: start a thread at ``message_id``),
    visible to ``user_id`` only when ``ephemeral``. ``handle`` is opaque routing data the
    platform stored with the event and reads back to deliver (a Slack ``response_url``, a
    Discord interaction id and token); it is kept in the inbox only until delivery."""

    message_id: str | None = None
    thread_id: str | None = None
    user_id: str | None = None
    ephemeral: bool = False
    handle: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatEvent:
    conversation: ConversationRef
    event_id: str
    kind: ClassVar[str] = ""


@dataclass(frozen=True)
class MessagePosted(ChatEvent):
    """A new message (threads included). Stored once, however often it is delivered."""

    message: ChatMessage
    kind: ClassVar[str] = "message"


@dataclass(frozen=True)
class MessageEdited(ChatEvent):
    """A message's text changed; ``message`` is the whole message with the new text. The
    old text's facts are retracted. Identical text changes nothing. An edit of a message
    never stored (its create was lost, or is late) stores the message with the new text."""

    message: ChatMessage
    edited_at: datetime | None = None
    kind: ClassVar[str] = "edit"


@dataclass(frozen=True)
class MessageDeleted(ChatEvent):
    """A message was deleted: it and everything that rested only on it is forgotten. A
    delete before its create leaves a tombstone, so the late create is refused."""

    message_id: str
    kind: ClassVar[str] = "delete"


@dataclass(frozen=True)
class MessagesDeleted(ChatEvent):
    """Several messages of one channel deleted at once (Discord's bulk delete)."""

    message_ids: tuple[str, ...]
    kind: ClassVar[str] = "bulk_delete"


@dataclass(frozen=True)
class ThreadDeleted(ChatEvent):
    """A thread inside ``conversation`` was deleted: every stored message whose
    ``thread_id`` is ``thread_id`` is forgotten."""

    thread_id: str
    kind: ClassVar[str] = "thread_deleted"


@dataclass(frozen=True)
class ChannelDeleted(ChatEvent):
    """The channel itself was deleted: its whole memory is dropped."""

    kind: ClassVar[str] = "channel_deleted"


@dataclass(frozen=True)
class BotPresence(ChatEvent):
    """The bot was removed from the channel (``present`` False) or added back. While it
    is out nothing new is stored there (``memory.set_bot_present``); with
    STASHBIRD_ON_BOT_REMOVED=forget its memory is dropped too."""

    present: bool
    kind: ClassVar[str] = "bot_presence"


@dataclass(frozen=True)
class MemberLeft(ChatEvent):
    """``user_id`` left the workspace (a deactivated Slack account, a member removed from a
    Discord server). With STASHBIRD_ON_MEMBER_LEAVE=forget everything they wrote in the
    workspace is forgotten; sent to one conversation of it (the forgetting reaches all)."""

    user_id: str
    kind: ClassVar[str] = "member_left"


@dataclass(frozen=True)
class WorkspaceChange:
    """A change of a whole workspace rather than one channel, as a connector parses it:
    ``member_left`` (``user_id``), ``bot_removed`` or ``bot_added`` (a Discord server).
    ``ChatService.accept_workspace`` turns it into the events above for the workspace's
    conversations in memory (a platform does not know which those are)."""

    workspace: Workspace
    event_id: str
    change: Literal["member_left", "bot_removed", "bot_added"]
    user_id: str = ""


@dataclass(frozen=True)
class Mention(ChatEvent):
    """The bot was mentioned: ``question`` (the message text without the bot's mention)
    is answered from this conversation's memory and the answer delivered to ``reply``.
    ``message`` is the mentioning message itself: send a Mention *instead of* a
    MessagePosted for it; the service stores it after answering, so that a question never
    cites itself."""

    message: ChatMessage
    question: str
    reply: ReplyTarget
    kind: ClassVar[str] = "mention"


@dataclass(frozen=True)
class AdminCommand(ChatEvent):
    """``/memory <text>`` from ``user``: answered ephemerally, through ``reply``. The audit
    and the admins' subcommands answer admins (platform admins and the configured admin
    ids) and refuse anyone else, which is logged; the participant's own (privacy,
    forget-me, ignore-me, remember-me) answer anyone (connectors/admin.py)."""

    user: Author
    text: str
    reply: ReplyTarget
    kind: ClassVar[str] = "admin_command"


Event = Union[
    MessagePosted,
    MessageEdited,
    MessageDeleted,
    MessagesDeleted,
    ThreadDeleted,
    ChannelDeleted,
    BotPresence,
    MemberLeft,
    Mention,
    AdminCommand,
]
EVENT_TYPES: dict[str, type[ChatEvent]] = {cls.kind: cls for cls in typing.get_args(Event)}


def message_of(event: ChatEvent) -> str | None:
    """The one message an event is about, if any (the inbox indexes it, so that deleting
    a message can clear every stored event that carried its text)."""
    if isinstance(event, (MessagePosted, MessageEdited, Mention)):
        return event.message.id
    if isinstance(event, MessageDeleted):
        return event.message_id
    return None


def core_message(message: ChatMessage, author: Author) -> Message:
    """The memory core's Message for a chat message by a described author (ValidationError
    names what is wrong: an empty text, a missing name)."""
    return validate_message(
        {
            "id": message.id,
            "author_id": author.id,
            "author_name": author.name or author.id,
            "role": author.role or "user",
            "text": message.text,
            "ts": message.time,
            "reply_to": message.reply_to,
            "thread_id": message.thread_id,
            "edited_at": message.edited_at,
        }
    )


def encode(event: ChatEvent) -> tuple[str, dict[str, Any]]:
    """The event's kind and a JSON-ready payload (without its conversation, which the
    inbox row holds). Pure."""
    payload = {f.name: _to_json(getattr(event, f.name)) for f in dataclasses.fields(event) if f.name != "conversation"}
    return event.kind, payload


def decode(conversation: ConversationRef, kind: str, payload: dict[str, Any]) -> ChatEvent:
    """The event ``encode`` produced, back. A payload that does not fit is refused with a
    ValidationError naming the field. Pure."""
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise ValidationError("kind", f"unknown event kind {kind!r}")
    return _from_json(cls, {**payload, "conversation": conversation}, kind)  # type: ignore[no-any-return]


def _to_json(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _to_json(v) for k, v in value.items()}
    return value


def _from_json(annotation: Any, value: Any, path: str) -> Any:
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        if isinstance(value, annotation):
            return value
        if not isinstance(value, dict):
            raise ValidationError(path, f"expected an object, got {type(value).__name__}")
        hints = typing.get_type_hints(annotation)
        known = {f.name: f for f in dataclasses.fields(annotation) if f.init}
        arguments = {name: _from_json(hints[name], value[name], f"{path}.{name}") for name in known if name in value}
        try:
            return annotation(**arguments)
        except TypeError as error:
            raise ValidationError(path, str(error)) from None
    origin = typing.get_origin(annotation)
    arguments_of = typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in arguments_of:
            return None
        return _from_json(next(a for a in arguments_of if a is not type(None)), value, path)
    if origin is tuple:
        return tuple(_from_json(arguments_of[0], v, path) for v in _list(value, path))
    if origin is dict:
        return dict(value) if isinstance(value, dict) else _refuse(path, "an object", value)
    if origin is Literal:
        return value if value in arguments_of else _refuse(path, f"one of {arguments_of}", value)
    if annotation is datetime:
        try:
            parsed = datetime.fromisoformat(str(value))
        except ValueError:
            return _refuse(path, "an ISO time", value)
        return parsed
    if annotation in (str, bool, int, float):
        return value if isinstance(value, annotation) else _refuse(path, annotation.__name__, value)
    if annotation is ConversationRef:
        return value
    raise ValidationError(path, f"cannot read a {annotation!r}")


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        _refuse(path, "a list", value)
    return list(value)


def _refuse(path: str, expected: str, value: Any) -> Any:
    raise ValidationError(path, f"expected {expected}, got {type(value).__name__}")


@dataclass(frozen=True)
class CitedMessage:
    """A message an answer cites, for the platform to show and link (a Slack permalink,
    a Discord jump URL): who said it and when. ``label`` is how the answer's text may
    refer to it (e.g. ``E3``); an ``outdated`` message comes with the ``correction``
    that superseded it."""

    message_id: str
    speaker: str
    time: datetime
    label: str = ""
    outdated: bool = False
    correction: CitedMessage | None = None

    def linked_ids(self) -> tuple[str, ...]:
        """This message's id and its correction's: every message the reply links."""
        return (self.message_id, *(self.correction.linked_ids() if self.correction else ()))


@dataclass(frozen=True)
class Reply:
    """What the service wants said, as plain data; the platform renders and posts it
    (``connectors.replies`` shapes it, each platform's renderer marks it up).
    ``kind``: ``answer`` (to a mention), ``audit`` (an admin command's result) or
    ``refusal`` (an admin command from someone else). ``text`` is the answer line,
    ``citations`` the messages it rests on, best first, ``notes`` what degraded."""

    conversation: ConversationRef
    target: ReplyTarget
    text: str
    kind: Literal["answer", "audit", "refusal"]
    citations: tuple[CitedMessage, ...] = ()
    answer_id: int | None = None  # a stored answer's number, for ``/memory why <number>``
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReplyDue(ChatEvent):
    """A reply the service queued in its outbox (memory.store.inbox), posted apart from
    the conversation's ordered events and retried on its own; never sent by a platform.
    The ``Reply`` without its conversation, which the inbox row holds."""

    target: ReplyTarget
    text: str
    reply_kind: Literal["answer", "audit", "refusal"]
    citations: tuple[CitedMessage, ...] = ()
    answer_id: int | None = None
    notes: tuple[str, ...] = ()
    kind: ClassVar[str] = "reply"

    @classmethod
    def of(cls, event_id: str, reply: Reply) -> ReplyDue:
        return cls(
            reply.conversation, event_id, reply.target, reply.text, reply.kind, reply.citations, reply.answer_id, reply.notes
        )

    def reply(self) -> Reply:
        return Reply(self.conversation, self.target, self.text, self.reply_kind, self.citations, self.answer_id, self.notes)


EVENT_TYPES[ReplyDue.kind] = ReplyDue
