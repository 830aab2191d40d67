"""A Discord gateway + REST stand-in on loopback for tests and offline benchmarks.

The real ``discord.Client`` connects to it: point ``discord.http.Route.BASE`` at
``rest_base`` and ``DiscordWebSocket.DEFAULT_GATEWAY`` at ``gateway_url`` (the
connector's ``endpoints`` do that from settings). It speaks gateway v10 (HELLO,
heartbeats, IDENTIFY -> READY + GUILD_CREATE, RESUME with replay, RECONNECT,
zlib-stream compression when asked) and the REST routes the connector uses, each
replying with the exact content type ``application/json`` that discord.py requires.

It misbehaves on request, as Discord does: ``drop()`` cuts the socket mid-stream (no
close frame), ``invalid_session(resumable)`` sends op 9, ``close_socket(code)`` closes with
a gateway close code (4004 bad token, 4009 session timed out, ...), ``refuse_resume``
answers every RESUME with INVALID_SESSION, ``ack_heartbeats = False`` lets a connection
go "zombie" (heartbeats unanswered), ``send_raw`` sends any text frame, and
``rate_limit(...)`` makes REST routes answer 429 (per route or global, ``retry_after`` in
the body and the ``Retry-After`` / ``X-RateLimit-*`` headers Discord sends), refusing a
retry that comes before the limit resets (counted in ``early_retries``).

The stand-in is also the platform: tests post, edit and delete messages through it
(each dispatched as the gateway event Discord sends and kept in the channel's history,
which the REST history endpoint serves), and read back what the bot posted. It lives in
``lab/standins`` beside the scripted LLM server, not in ``tests/``, because benchmarks
and a separately started ``stashbird serve`` drive it too.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

DISCORD_EPOCH_MS = 1420070400000
JSON_HEADERS = {"Content-Type": "application/json"}
CLOCK_SLACK = 0.005  # seconds a timer may fire early (asyncio runs callbacks within its clock resolution)
MANAGE_GUILD = 1 << 5
ADMINISTRATOR = 1 << 3
ALL_PERMISSIONS = (1 << 51) - 1
GUILD_MEMBERS_INTENT = 1 << 1  # the privileged intent GUILD_MEMBER_REMOVE needs
# Channel types (Discord API): guild text, public thread, forum.
GUILD_TEXT, PUBLIC_THREAD, GUILD_FORUM = 0, 11, 15
OP_DISPATCH, OP_HEARTBEAT, OP_IDENTIFY, OP_RESUME, OP_RECONNECT = 0, 1, 2, 6, 7
OP_INVALID_SESSION, OP_HELLO, OP_HEARTBEAT_ACK = 9, 10, 11

Payload = dict[str, Any]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=json.dumps(data).encode(), headers=JSON_HEADERS)


def _iso(moment: datetime) -> str:
    return moment.isoformat()


@dataclass
class User:
    """A platform user; ``permissions`` are the guild permission bits their roles give."""

    id: str
    name: str
    bot: bool = False
    permissions: int = 0

    def payload(self) -> Payload:
        return {
            "id": self.id,
            "username": self.name,
            "global_name": self.name,
            "discriminator": "0",
            "avatar": None,
            "bot": self.bot,
        }


@dataclass
class Session:
    """One gateway session: the events sent (for RESUME replay) and the live socket."""

    id: str
    events: list[Payload] = field(default_factory=list)
    socket: web.WebSocketResponse | None = None
    compressor: Any = None
    identified: asyncio.Event = field(default_factory=asyncio.Event)
    transport: Any = None  # the socket's TCP transport, for ``drop``


@dataclass
class RateLimit:
    """429s a REST route answers: ``times`` more, each asking for ``retry_after``
    seconds; a request before the last 429's reset is refused again and counted early."""

    route: str  # "METHOD /path/pattern" as ``_route_key`` names it, or "*" for every route
    times: int
    retry_after: float
    scope: str = "user"  # X-RateLimit-Scope: user (per route), global, shared
    reset_at: float = 0.0

    @property
    def is_global(self) -> bool:
        return self.scope == "global"


class DiscordStandIn:
    """One guild-ful Discord on 127.0.0.1 (ephemeral port). Start with ``await start()``."""

    def __init__(self, token: str = "standin-token", *, bot_name: str = "stashbird", heartbeat_ms: int = 41250) -> None:
        self.token = token
        self.heartbeat_ms = heartbeat_ms
        self.ack_heartbeats = True
        self.refuse_resume = False
        self.heartbeats = 0
        self.rate_limits: list[RateLimit] = []
        self.limited: list[str] = []  # route keys answered 429, in order
        self.early_retries = 0  # requests that came back before their 429's retry_after
        self._ids = itertools.count(1)
        self.bot = User(self.snowflake(), bot_name, bot=True)
        self.application_id = self.snowflake()
        self.guilds: dict[str, Payload] = {}
        self.channels: dict[str, Payload] = {}
        self.history: dict[str, list[Payload]] = {}
        self.members: dict[str, dict[str, User]] = {}
        self.posted: list[Payload] = []
        self.interaction_replies: list[Payload] = []
        self.interaction_tokens: dict[str, str] = {}
        self.refused_callbacks: list[str] = []  # interaction ids answered a second time
        self.commands: list[Payload] = []
        self.identifies = 0
        self.intents: int | None = None  # what the last IDENTIFY asked for
        self.resumes = 0
        self._overlap = 0
        self._session: Session | None = None
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._session and self._session.socket is not None:
            await self._session.socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def rest_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    # --- the platform's state ----------------------------------------------------

    def snowflake(self, at_ms: int | None = None) -> str:
        """A Discord id: milliseconds since the Discord epoch, then a counter."""
        ms = int(time.time() * 1000) if at_ms is None else at_ms
        return str(((ms - DISCORD_EPOCH_MS) << 22) | (next(self._ids) & 0x3FFFFF))

    def add_guild(self, name: str, owner: User) -> str:
        guild_id = self.snowflake()
        everyone = {
            "id": guild_id,
            "name": "@everyone",
            "permissions": "1024",
            "position": 0,
            "color": 0,
            "hoist": False,
            "managed": False,
            "mentionable": False,
        }
        self.guilds[guild_id] = {
            "id": guild_id,
            "name": name,
            "owner_id": owner.id,
            "roles": [everyone],
            "unavailable": False,
            "member_count": 0,
            "large": False,
            "features": [],
            "emojis": [],
            "stickers": [],
            "threads": [],
            "premium_tier": 0,
        }
        self.members[guild_id] = {}
        self.add_member(guild_id, owner)
        self.add_member(guild_id, self.bot)
        return guild_id

    def add_member(self, guild_id: str, user: User) -> None:
        """A member; permission bits beyond @everyone's come from a role of their own."""
        self.members[guild_id][user.id] = user
        if user.permissions:
            self.guilds[guild_id]["roles"].append(
                {
                    "id": f"{user.id}0",
                    "name": f"role-{user.name}",
                    "permissions": str(user.permissions),
                    "position": 1,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                }
            )

    async def remove_member(self, guild_id: str, user: User) -> None:
        """A member leaves the server: GUILD_MEMBER_REMOVE, sent (as Discord does) only to
        a session that asked for the privileged members intent."""
        self.members[guild_id].pop(user.id, None)
        if (self.intents or 0) & GUILD_MEMBERS_INTENT:
            await self.dispatch("GUILD_MEMBER_REMOVE", {"guild_id": guild_id, "user": user.payload()})

    async def remove_bot(self, guild_id: str, *, outage: bool = False) -> None:
        """GUILD_DELETE: the bot removed from the server, or (``outage``) the server
        unavailable for a while, which Discord says with ``unavailable: true``."""
        await self.dispatch("GUILD_DELETE", {"id": guild_id, **({"unavailable": True} if outage else {})})

    async def add_bot(self, guild_id: str) -> None:
        """GUILD_CREATE: the bot added (back) to the server."""
        await self.dispatch("GUILD_CREATE", self._guild_create(guild_id))

    def _member_payload(self, guild_id: str, user: User) -> Payload:
        roles = [f"{user.id}0"] if user.permissions else []
        return {"roles": roles, "nick": None, "joined_at": _iso(datetime.now(UTC)), "deaf": False, "mute": False, "flags": 0}

    async def add_channel(self, guild_id: str, name: str, *, kind: int = GUILD_TEXT) -> str:
        channel_id = self.snowflake()
        channel = {
            "id": channel_id,
            "guild_id": guild_id,
            "name": name,
            "type": kind,
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
            "topic": None,
        }
        if kind == GUILD_FORUM:
            channel.update({"available_tags": [], "flags": 0})
        self.channels[channel_id] = channel
        self.history[channel_id] = []
        await self.dispatch("CHANNEL_CREATE", channel)
        return channel_id

    async def add_thread(self, parent_id: str, name: str, owner: User) -> str:
        """A public thread (in a forum channel: a forum post)."""
        parent = self.channels[parent_id]
        thread_id = self.snowflake()
        thread = {
            "id": thread_id,
            "guild_id": parent["guild_id"],
            "parent_id": parent_id,
            "name": name,
            "type": PUBLIC_THREAD,
            "owner_id": owner.id,
            "message_count": 0,
            "member_count": 1,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "locked": False,
                "archive_timestamp": _iso(datetime.now(UTC)),
            },
        }
        self.channels[thread_id] = thread
        self.history[thread_id] = []
        await self.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        return thread_id

    def message_payload(
        self,
        channel_id: str,
        author: User,
        content: str,
        *,
        mentions: list[User] | None = None,
        message_id: str | None = None,
        reply_to: str | None = None,
        extra: Payload | None = None,
    ) -> Payload:
        """A MESSAGE_CREATE payload as Discord sends it (with ``member`` in guilds);
        ``extra`` fields are set over it (embeds, a webhook id, a forward's snapshots...)."""
        channel = self.channels[channel_id]
        guild_id = channel["guild_id"]
        message_id = message_id or self.snowflake()
        payload: Payload = {
            "id": message_id,
            "channel_id": channel_id,
            "guild_id": guild_id,
            "type": 19 if reply_to else 0,
            "content": content,
            "author": author.payload(),
            "member": self._member_payload(guild_id, author),
            "timestamp": _iso(_snowflake_time(message_id)),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [u.payload() for u in mentions or []],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "flags": 0,
            "components": [],
        }
        if reply_to:
            payload["message_reference"] = {"message_id": reply_to, "channel_id": channel_id, "guild_id": guild_id}
        return {**payload, **(extra or {})}

    async def post(self, channel_id: str, author: User, content: str, **options: Any) -> Payload:
        """Someone writes a message: kept in history and dispatched as MESSAGE_CREATE."""
        payload = self.message_payload(channel_id, author, content, **options)
        self.history[channel_id].append(payload)
        await self.dispatch("MESSAGE_CREATE", payload)
        return payload

    async def edit(self, channel_id: str, message_id: str, content: str) -> Payload:
        """MESSAGE_UPDATE carries the full message, as Discord sends it."""
        message = self._find(channel_id, message_id)
        message.update(content=content, edited_timestamp=_iso(datetime.now(UTC)))
        await self.dispatch("MESSAGE_UPDATE", dict(message))
        return message

    async def delete(self, channel_id: str, message_id: str, *, silently: bool = False) -> None:
        """Remove from history and, unless ``silently`` (an event the bot missed), dispatch
        MESSAGE_DELETE."""
        guild_id = self.channels[channel_id]["guild_id"]
        self.history[channel_id] = [m for m in self.history[channel_id] if m["id"] != message_id]
        if not silently:
            await self.dispatch("MESSAGE_DELETE", {"id": message_id, "channel_id": channel_id, "guild_id": guild_id})

    async def bulk_delete(self, channel_id: str, message_ids: list[str]) -> None:
        guild_id = self.channels[channel_id]["guild_id"]
        gone = set(message_ids)
        self.history[channel_id] = [m for m in self.history[channel_id] if m["id"] not in gone]
        await self.dispatch("MESSAGE_DELETE_BULK", {"ids": message_ids, "channel_id": channel_id, "guild_id": guild_id})

    async def delete_thread(self, thread_id: str) -> None:
        thread = self.channels.pop(thread_id)
        self.history.pop(thread_id, None)
        await self.dispatch("THREAD_DELETE", {key: thread[key] for key in ("id", "guild_id", "parent_id", "type")})

    async def delete_channel(self, channel_id: str) -> None:
        channel = self.channels.pop(channel_id)
        self.history.pop(channel_id, None)
        await self.dispatch("CHANNEL_DELETE", channel)

    async def invoke(self, channel_id: str, user: User, name: str, options: list[Payload], *, omit: tuple[str, ...] = ()) -> str:
        """A user runs a slash command: INTERACTION_CREATE (type 2) with the member's
        computed permissions, as Discord sends it (without the fields in ``omit``: older
        frames lack ``attachment_size_limit``, ``entitlements``, ``context``...). Returns
        the interaction id."""
        channel = self.channels[channel_id]
        guild_id = channel["guild_id"]
        interaction_id = self.snowflake()
        token = uuid.uuid4().hex
        self.interaction_tokens[token] = interaction_id
        command = next((c for c in self.commands if c["name"] == name), {"id": self.snowflake()})
        guild = self.guilds[guild_id]
        # Discord computes the member's permissions; the owner has them all.
        everyone = int(guild["roles"][0]["permissions"])
        permissions = ALL_PERMISSIONS if guild["owner_id"] == user.id else user.permissions | everyone
        member = {**self._member_payload(guild_id, user), "user": user.payload(), "permissions": str(permissions)}
        frame: Payload = {
            "id": interaction_id,
            "application_id": self.application_id,
            "type": 2,
            "token": token,
            "version": 1,
            "guild_id": guild_id,
            "channel_id": channel_id,
            "channel": channel,
            "member": member,
            "app_permissions": "0",
            "attachment_size_limit": 10485760,
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": guild_id},
            "context": 0,
            "data": {"id": command["id"], "name": name, "type": 1, "options": options, "guild_id": guild_id},
        }
        await self.dispatch("INTERACTION_CREATE", {key: value for key, value in frame.items() if key not in omit})
        return interaction_id

    def _find(self, channel_id: str, message_id: str) -> Payload:
        for message in self.history[channel_id]:
            if message["id"] == message_id:
                return message
        raise KeyError(f"no message {message_id} in channel {channel_id}")

    # --- waiting -------------------------------------------------------------------

    async def wait_for(self, check: Callable[[], Any], timeout: float = 15.0) -> Any:
        """Wait until ``check()`` returns something truthy (re-checked on every REST call)."""
        async with self._changed:
            result = await asyncio.wait_for(self._changed.wait_for(check), timeout)
        return result

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # --- gateway -------------------------------------------------------------------

    @property
    def sequence(self) -> int:
        """The sequence number of the last dispatch sent in the current session."""
        return len(self._session.events) if self._session else 0

    async def dispatch(self, event: str, data: Payload) -> None:
        """Send a DISPATCH to the connected client (kept for RESUME replay)."""
        session = self._session
        if session is None:
            return
        frame = {"op": OP_DISPATCH, "t": event, "s": len(session.events) + 1, "d": data}
        session.events.append(frame)
        if session.socket is not None and not session.socket.closed:
            await self._send(session, frame)

    async def reconnect(self, *, replay_overlap: int = 0) -> None:
        """Ask the client to reconnect (op 7); it resumes, and the stand-in replays what
        came after the client's sequence plus ``replay_overlap`` events it already had
        (Discord may deliver an event twice around a resume)."""
        session = self._session
        assert session is not None and session.socket is not None
        session.identified.clear()
        self._overlap = replay_overlap
        await self._send(session, {"op": OP_RECONNECT, "d": None})
        await asyncio.wait_for(session.identified.wait(), 15)

    async def connected(self, timeout: float = 15.0) -> None:
        """Wait until a client has identified (or resumed)."""
        await until(lambda: self._session is not None and self._session.identified.is_set(), timeout)

    def _live(self) -> Session:
        session = self._session
        assert session is not None and session.socket is not None, "no client is connected"
        session.identified.clear()  # ``connected()`` now waits for the client to come back
        return session

    async def drop(self) -> None:
        """Cut the connection mid-stream: the TCP transport goes, no close frame (a network
        failure, a gateway node dying). Dispatches until the client resumes are kept for it."""
        session = self._live()
        session.transport.abort()
        session.socket = None

    async def invalid_session(self, *, resumable: bool) -> None:
        """op 9: the client must RESUME (``resumable``) or IDENTIFY afresh."""
        session = self._live()
        await self._send(session, {"op": OP_INVALID_SESSION, "d": resumable})

    async def close_socket(self, code: int, reason: str = "") -> None:
        """Close the gateway connection with a close code, as Discord does (4000 unknown
        error, 4004 authentication failed, 4009 session timed out, 4014 disallowed intents...)."""
        session = self._live()
        socket, session.socket = session.socket, None
        assert socket is not None
        await socket.close(code=code, message=reason.encode())

    async def send_raw(self, text: str) -> None:
        """Send one text frame as it is (a frame that is not JSON, for instance)."""
        session = self._session
        assert session is not None and session.socket is not None
        await session.socket.send_str(text)

    async def _send(self, session: Session, frame: Payload) -> None:
        assert session.socket is not None
        text = json.dumps(frame)
        if session.compressor is None:
            await session.socket.send_str(text)
        else:
            data = session.compressor.compress(text.encode()) + session.compressor.flush(zlib.Z_SYNC_FLUSH)
            await session.socket.send_bytes(data)

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        compressor = zlib.compressobj() if request.query.get("compress") == "zlib-stream" else None
        pending = Session(id="", socket=socket, compressor=compressor, transport=request.transport)
        await self._send(pending, {"op": OP_HELLO, "d": {"heartbeat_interval": self.heartbeat_ms}})
        async for message in socket:
            if message.type != WSMsgType.TEXT:
                break
            frame = json.loads(message.data)
            await self._on_frame(pending, frame)
        return socket

    async def _on_frame(self, connection: Session, frame: Payload) -> None:
        """One frame from the client on ``connection`` (its socket, compressor, transport)."""
        op, data = frame.get("op"), frame.get("d") or {}
        if op == OP_HEARTBEAT:
            self.heartbeats += 1
            if self.ack_heartbeats:
                await self._send(connection, {"op": OP_HEARTBEAT_ACK})
        elif op == OP_IDENTIFY:
            await self._identify(connection, data)
        elif op == OP_RESUME:
            await self._resume(connection, data)

    async def _identify(self, connection: Session, data: Payload) -> None:
        assert connection.socket is not None
        if data.get("token") != self.token:
            await connection.socket.close(code=4004, message=b"Authentication failed.")
            return
        self.identifies += 1
        self.intents = data.get("intents")
        session = Session(uuid.uuid4().hex, socket=connection.socket, compressor=connection.compressor)
        session.transport = connection.transport
        self._session = session
        await self.dispatch(
            "READY",
            {
                "v": 10,
                "user": self.bot.payload(),
                "session_id": session.id,
                "resume_gateway_url": self.gateway_url,
                "guilds": [{"id": g, "unavailable": True} for g in self.guilds],
                "private_channels": [],
                "relationships": [],
                "application": {"id": self.application_id, "flags": 0},
                "shard": [0, 1],
            },
        )
        for guild_id in self.guilds:
            await self.dispatch("GUILD_CREATE", self._guild_create(guild_id))
        session.identified.set()

    def _guild_create(self, guild_id: str) -> Payload:
        guild = self.guilds[guild_id]
        channels = [c for c in self.channels.values() if c["guild_id"] == guild_id and c["type"] != PUBLIC_THREAD]
        threads = [c for c in self.channels.values() if c["guild_id"] == guild_id and c["type"] == PUBLIC_THREAD]
        members = [{**self._member_payload(guild_id, u), "user": u.payload()} for u in self.members[guild_id].values()]
        return {
            **guild,
            "channels": channels,
            "threads": threads,
            "members": members,
            "presences": [],
            "voice_states": [],
            "member_count": len(members),
            "joined_at": _iso(datetime.now(UTC)),
        }

    async def _resume(self, connection: Session, data: Payload) -> None:
        session = self._session
        known = session is not None and data.get("session_id") == session.id and data.get("token") == self.token
        if session is None or not known or self.refuse_resume:
            await self._send(connection, {"op": OP_INVALID_SESSION, "d": False})
            return
        self.resumes += 1
        session.socket, session.compressor, session.transport = connection.socket, connection.compressor, connection.transport
        start = max(0, int(data.get("seq") or 0) - self._overlap)
        for frame in list(session.events[start:]):
            await self._send(session, frame)
        self._overlap = 0
        resumed = {"op": OP_DISPATCH, "t": "RESUMED", "s": len(session.events) + 1, "d": {}}
        session.events.append(resumed)
        await self._send(session, resumed)
        session.identified.set()

    # --- REST ----------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") not in (f"Bot {self.token}", None) and "/interactions/" not in request.path:
            return _json({"message": "401: Unauthorized", "code": 0}, 401)
        parts = request.match_info["tail"].strip("/").split("/")
        body = await request.json() if request.can_read_body else {}
        try:
            limited = self._rate_limited(route_key(request.method, parts))
            response = limited or await self._route(request.method, parts, request.query, body)
        finally:
            await self._notify()
        return response

    def rate_limit(self, route: str, *, times: int = 1, retry_after: float = 0.5, scope: str = "user") -> None:
        """The next ``times`` requests to ``route`` (``route_key`` form, e.g.
        ``POST /channels/{id}/messages``; ``*``: any) answer 429; ``scope`` ``global``
        makes it Discord's global limit (``X-RateLimit-Global``)."""
        self.rate_limits.append(RateLimit(route, times, retry_after, scope))

    def _rate_limited(self, key: str) -> web.Response | None:
        """A 429 as Discord sends it, when a limit applies to ``key``; else None."""
        now = time.monotonic()
        for limit in self.rate_limits:
            if limit.route not in ("*", key):
                continue
            if limit.reset_at - now > CLOCK_SLACK:  # the client did not wait as it was told
                self.early_retries += 1
            elif limit.times > 0:
                limit.times -= 1
                limit.reset_at = now + limit.retry_after
            else:
                continue
            self.limited.append(key)
            return self._too_many(limit, limit.reset_at - now)
        return None

    @staticmethod
    def _too_many(limit: RateLimit, wait: float) -> web.Response:
        headers = {**JSON_HEADERS, "Retry-After": str(max(1, round(wait))), "Via": "1.1 google", "X-RateLimit-Scope": limit.scope}
        if limit.is_global:
            headers["X-RateLimit-Global"] = "true"
        else:
            headers.update(
                {
                    "X-RateLimit-Limit": "5",
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset": f"{time.time() + wait:.3f}",
                    "X-RateLimit-Reset-After": f"{wait:.3f}",
                    "X-RateLimit-Bucket": hashlib.sha256(limit.route.encode()).hexdigest()[:32],
                }
            )
        body = {"message": "You are being rate limited.", "retry_after": round(wait, 3), "global": limit.is_global}
        return web.Response(status=429, body=json.dumps(body).encode(), headers=headers)

    async def _route(self, method: str, parts: list[str], query: Any, body: Any) -> web.Response:
        match method, parts:
            case "GET", ["users", "@me"]:
                return _json(self.bot.payload())
            case "GET", ["oauth2", "applications", "@me"]:
                return _json(self._application())
            case "GET", ["gateway", *_]:
                return _json(
                    {
                        "url": self.gateway_url,
                        "shards": 1,
                        "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1},
                    }
                )
            case "PUT", ["applications", _, *rest]:
                self.commands = [
                    {
                        **c,
                        "id": self.snowflake(),
                        "application_id": self.application_id,
                        "version": "1",
                        "guild_id": rest[1] if rest[:1] == ["guilds"] else None,
                    }
                    for c in body
                ]
                return _json(self.commands)
            case "GET", ["channels", channel_id]:
                return self._channel(channel_id)
            case "GET", ["channels", channel_id, "messages"]:
                return self._messages(channel_id, query)
            case "POST", ["channels", channel_id, "messages"]:
                return await self._create_message(channel_id, body)
            case "POST", ["interactions", interaction_id, _, "callback"]:
                return self._interaction_callback(interaction_id, body)
            case "PATCH", ["webhooks", _, token, "messages", "@original"]:
                return self._edit_original(token, body)
        return _json({"message": "404: Not Found", "code": 0}, 404)

    def _application(self) -> Payload:
        return {
            "id": self.application_id,
            "name": self.bot.name,
            "description": "",
            "icon": None,
            "bot_public": False,
            "bot_require_code_grant": False,
            "owner": self.bot.payload(),
            "verify_key": "0" * 64,
            "flags": 1 << 19,
            "team": None,
        }

    def _channel(self, channel_id: str) -> web.Response:
        channel = self.channels.get(channel_id)
        if channel is None:
            return _json({"message": "Unknown Channel", "code": 10003}, 404)
        return _json(channel)

    def _messages(self, channel_id: str, query: Any) -> web.Response:
        """Newest first, as Discord returns them, ``before``/``after`` by snowflake order."""
        if channel_id not in self.channels:
            return _json({"message": "Unknown Channel", "code": 10003}, 404)
        limit = min(int(query.get("limit", 50)), 100)
        found = sorted(self.history[channel_id], key=lambda m: int(m["id"]))
        if "after" in query:
            found = [m for m in found if int(m["id"]) > int(query["after"])][:limit]
        else:
            if "before" in query:
                found = [m for m in found if int(m["id"]) < int(query["before"])]
            found = found[-limit:]
        return _json(list(reversed(found)))

    async def _create_message(self, channel_id: str, body: Payload) -> web.Response:
        if channel_id not in self.channels:
            return _json({"message": "Unknown Channel", "code": 10003}, 404)
        reference = (body.get("message_reference") or {}).get("message_id")
        payload = self.message_payload(channel_id, self.bot, body.get("content") or "", reply_to=reference)
        payload["flags"] = body.get("flags") or 0
        self.history[channel_id].append(payload)
        self.posted.append(payload)
        await self.dispatch("MESSAGE_CREATE", payload)
        return _json(payload)

    def _edit_original(self, token: str, body: Payload) -> web.Response:
        """Edit the interaction's first response (after a deferred, "thinking" one)."""
        interaction_id = self.interaction_tokens.get(token)
        if interaction_id is None:
            return _json({"message": "Unknown Webhook", "code": 10015}, 404)
        answered = [r for r in self.interaction_replies if r["interaction_id"] == interaction_id]
        flags = answered[0].get("flags", 0) if answered else 0
        self.interaction_replies.append({"interaction_id": interaction_id, "type": "edit", **body, "flags": flags})
        payload = self.message_payload(next(iter(self.channels)), self.bot, body.get("content") or "")
        return _json({**payload, "flags": flags, "webhook_id": self.application_id})

    def _interaction_callback(self, interaction_id: str, body: Payload) -> web.Response:
        """The interaction's one initial response; a second is refused, as Discord does."""
        if any(r["interaction_id"] == interaction_id and r["type"] != "edit" for r in self.interaction_replies):
            self.refused_callbacks.append(interaction_id)
            return _json({"message": "Interaction has already been acknowledged.", "code": 40060}, 400)
        data = body.get("data") or {}
        self.interaction_replies.append({"interaction_id": interaction_id, "type": body.get("type"), **data})
        return _json(
            {
                "interaction": {
                    "id": interaction_id,
                    "type": 2,
                    "response_message_ephemeral": bool((data.get("flags") or 0) & 64),
                },
                "resource": {"type": body.get("type")},
            }
        )


def route_key(method: str, parts: list[str]) -> str:
    """A REST request's route, ids and tokens as placeholders: ``POST /channels/{id}/messages``."""
    named = ["{id}" if part.isdigit() else "{token}" if len(part) >= 32 else part for part in parts]
    return f"{method} /{'/'.join(named)}"


async def until(check: Callable[[], Any], timeout: float = 15.0) -> None:
    """Poll ``check`` until it is truthy: tests wait on the system under test (a client
    that read every frame, a queue that drained), never on a fixed sleep."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.01)


def _snowflake_time(snowflake: str) -> datetime:
    return datetime.fromtimestamp(((int(snowflake) >> 22) + DISCORD_EPOCH_MS) / 1000, tz=UTC)
