"""A Slack workspace export (the zip an admin downloads) read into chat messages.

Layout: ``users.json`` (every member, bots included: ids, names, admin flags),
``channels.json`` (public channels) and ``groups.json`` (private ones, in exports that
include them), each listing ``id`` and ``name``; one folder per channel, named by the
channel's name, holding one JSON file per day (``2026-03-02.json``), each a list of
messages as ``conversations.history`` returns them: ``ts``, ``user`` (with a
``user_profile``), ``text``, ``thread_ts`` on thread parents and replies, ``files`` on
file shares, ``subtype`` (``bot_message``, ``channel_join``, ``tombstone`` for a parent
deleted while it kept replies...), ``edited`` when the text is an edited one. Direct
messages (``dms.json``, ``mpims.json``, and their folders) are not read: Stashbird
remembers channels. An export without ``channels.json`` (a partial export, or a tool
that writes only the channel folders) is refused, naming the file: the daily files
carry no channel id, and importing a folder under its name would make conversations the
live stream (which knows channels by id) never joins.

Messages map to the live stream's conversations (``ConversationRef("slack", team,
channel id)``) and ids (``ts``), so a live event for an imported message is a
duplicate. The team is read from ``users.json`` (``team_id``) unless given.
"""

from __future__ import annotations

import json
import posixpath
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from connectors.events import Author, ChatMessage, Role
from connectors.slack import payloads
from memory import ConversationRef, ValidationError

CHANNEL_LISTS = ("channels.json", "groups.json")
DIRECT_LISTS = ("dms.json", "mpims.json")


@dataclass
class ExportChannel:
    conversation: ConversationRef
    name: str
    messages: list[ChatMessage] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # tombstoned thread parents
    skipped: int = 0
    rejected: list[dict[str, str]] = field(default_factory=list)


@dataclass
class SlackExport:
    team: str
    channels: list[ExportChannel]


def _json(archive: zipfile.ZipFile, path: str) -> Any:
    try:
        return json.loads(archive.read(path).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValidationError(path, f"is not JSON: {error}") from None


def _root(archive: zipfile.ZipFile) -> str:
    """The folder holding ``users.json`` (exports are sometimes zipped with a top folder)."""
    for name in archive.namelist():
        if posixpath.basename(name) == "users.json":
            return posixpath.dirname(name)
    raise ValidationError("export", "has no users.json: not a Slack workspace export")


def user_author(user: dict[str, Any]) -> Author:
    """A ``users.json`` member as an Author (display name, else real name, else handle)."""
    profile = user.get("profile") or {}
    name = profile.get("display_name") or profile.get("real_name") or user.get("real_name") or user.get("name")
    role: Role = "bot" if user.get("is_bot") else "admin" if user.get("is_admin") or user.get("is_owner") else "user"
    return Author(str(user["id"]), str(name or user["id"]), role)


def _team(users: list[dict[str, Any]], team: str | None) -> str:
    if team:
        return team
    teams = Counter(str(u["team_id"]) for u in users if u.get("team_id"))
    if not teams:
        raise ValidationError("--workspace", "the export's users.json names no team_id: give the workspace id")
    return teams.most_common(1)[0][0]


def read_channel(archive: zipfile.ZipFile, folder: str, channel: ExportChannel, users: dict[str, Author]) -> None:
    """Read a channel folder's daily files, in date order, into ``channel``."""
    days = sorted(n for n in archive.namelist() if posixpath.dirname(n) == folder and n.endswith(".json"))
    for day in days:
        entries = _json(archive, day)
        if not isinstance(entries, list):
            raise ValidationError(day, "is not a list of messages")
        for position, raw in enumerate(entries):
            where = f"{posixpath.basename(day)}#{position}"
            try:
                _read_message(raw, channel, users)
            except ValidationError as error:
                channel.rejected.append({"message": where, "reason": str(error)})


def _read_message(raw: Any, channel: ExportChannel, users: dict[str, Author]) -> None:
    if not isinstance(raw, dict):
        raise ValidationError("message", "is not an object")
    if raw.get("subtype") == "tombstone":
        channel.deleted.append(str(raw.get("ts")))
        return
    message = payloads.chat_message(raw)
    if message is None:
        channel.skipped += 1
        return
    known = users.get(message.author.id)
    if known is not None and message.author.role != "bot":
        message = ChatMessage(message.id, known, message.text, message.time, message.thread_id, message.reply_to)
    elif message.author.name is None:
        message = ChatMessage(
            message.id,
            Author(message.author.id, message.author.id, "user"),
            message.text,
            message.time,
            message.thread_id,
            message.reply_to,
        )
    channel.messages.append(message)


def _listing(archive: zipfile.ZipFile, root: str, name: str) -> list[dict[str, Any]]:
    path = posixpath.join(root, name)
    if path not in archive.namelist():
        return []
    entries = _json(archive, path)
    if not isinstance(entries, list):
        raise ValidationError(name, "is not a list of channels")
    return [e for e in entries if isinstance(e, dict)]


def _check_listed(archive: zipfile.ZipFile, root: str) -> None:
    """Refuse an export whose channel folders no ``channels.json`` lists (module doc)."""
    if posixpath.join(root, "channels.json") in archive.namelist():
        return
    named = {
        str(e.get(k))
        for listing in (*CHANNEL_LISTS, *DIRECT_LISTS)
        for e in _listing(archive, root, listing)
        for k in ("name", "id")
    }
    days = {posixpath.dirname(n) for n in archive.namelist() if n.endswith(".json")}
    folders = sorted({posixpath.basename(d) for d in days if d != root and posixpath.dirname(d) == root} - named)
    if folders:
        shown = ", ".join(folders[:5]) + (f" and {len(folders) - 5} more" if len(folders) > 5 else "")
        raise ValidationError("channels.json", f"is missing from the export: its channel folders ({shown}) name no channel ids")
    if not _listing(archive, root, "groups.json"):
        raise ValidationError("channels.json", "is missing from the export, and no groups.json lists channels: nothing to import")


def read_export(archive: zipfile.ZipFile, team: str | None = None) -> SlackExport:
    """Every channel of the export with its messages (see the module doc)."""
    root = _root(archive)
    members = _json(archive, posixpath.join(root, "users.json"))
    if not isinstance(members, list):
        raise ValidationError("users.json", "is not a list of users")
    users = {str(u["id"]): user_author(u) for u in members if isinstance(u, dict) and u.get("id")}
    workspace = _team(members, team)
    _check_listed(archive, root)
    channels: list[ExportChannel] = []
    for listing in CHANNEL_LISTS:
        for entry in _listing(archive, root, listing):
            channel = ExportChannel(payloads.conversation(workspace, str(entry["id"])), str(entry["name"]))
            read_channel(archive, posixpath.join(root, channel.name), channel, users)
            channels.append(channel)
    return SlackExport(workspace, channels)
