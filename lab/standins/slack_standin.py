"""A Slack stand-in on loopback for tests and ``stashbird bench serve``: the Web API
methods Stashbird calls (``auth.test``, ``users.info``, ``chat.postMessage``,
``chat.postEphemeral``, ``chat.getPermalink``, ``conversations.history``,
``conversations.replies``) and ``response_url`` endpoints, over HTTP as slack_sdk's
``AsyncWebClient`` speaks it; and the sending side of the Events API: signed
``event_callback`` deliveries and slash commands POSTed to a service's endpoint, with
Slack's headers (``X-Slack-Signature`` v0, ``X-Slack-Request-Timestamp``,
``X-Slack-Retry-Num``). For multi-workspace apps it is also Slack's side of the OAuth v2
install flow: the authorize page (which, as if the user had clicked *Allow*, redirects
to the app's redirect URL with a code and the state) and ``oauth.v2.access``; each
token it issues belongs to one workspace, and ``auth.test`` answers for the token used.

It keeps the platform's truth (each channel's messages as Slack would list them), so a
test can compare what the service stored with what the platform's history says.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from slack_sdk.signature import SignatureVerifier

from bot.settings import ChatSettings, Settings

TEAM = "T0STANDIN"
BOT_USER = "U0STASHBIRD"
BOT_ID = "B0STASHBIRD"


@dataclass
class Delivery:
    status: int
    seconds: float
    body: str


@dataclass
class SlackStandIn:
    signing_secret: str = "standin-signing-secret"
    team: str = TEAM
    admins: set[str] = field(default_factory=set)
    names: dict[str, str] = field(default_factory=dict)
    events_url: str | None = None  # where the service under test takes events
    channels: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    posted: list[dict[str, Any]] = field(default_factory=list)
    ephemeral: list[dict[str, Any]] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    page_size: int = 200
    fail_history_after: int | None = None  # conversations.history pages served before failing (resume tests)
    delays: dict[str, float] = field(default_factory=dict)  # seconds a Web API method takes (crash tests)
    direct: dict[str, str] = field(default_factory=dict)  # channel -> "im" or "mpim" (direct messages)
    client_id: str = "111.222"  # the app's OAuth credentials (multi-workspace)
    client_secret: str = "standin-client-secret"
    oauth_redirect: str | None = None  # the app's configured redirect URL
    installing: str = "T0SECOND"  # the workspace the next authorize installs into
    tokens: dict[str, str] = field(default_factory=lambda: {"xoxb-standin": TEAM})  # bot token -> its workspace

    def __post_init__(self) -> None:
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._last = 0  # microseconds
        self._websocket: web.WebSocketResponse | None = None
        self._socket_request: web.Request | None = None
        self.socket_connections = 0
        self.socket_refused = False  # apps.connections.open fails while set (an outage)
        self._acks: dict[str, asyncio.Future[float]] = {}
        self._events = itertools.count(1)
        self._codes: dict[str, str] = {}  # OAuth code -> the workspace it installs into
        self.port = 0

    # --- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> SlackStandIn:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/respond/{key}", self._respond)
        app.router.add_get("/socket", self._socket)
        app.router.add_get("/oauth/v2/authorize", self._authorize)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self._session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def permalink(self, channel: str, ts: str) -> str:
        return f"https://standin.slack.test/archives/{channel}/p{ts.replace('.', '')}"

    # --- Web API ---------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        self.calls[method] += 1
        if self.delays.get(method):
            await asyncio.sleep(self.delays[method])
        params: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                params.update(await request.json())
            else:
                params.update(dict(await request.post()))
        kind, _, credential = request.headers.get("Authorization", "").partition(" ")
        if kind == "Bearer":
            params["_token"] = credential  # who called: a test can tell which workspace's token was used
        elif kind == "Basic":
            params["client_id"], _, params["client_secret"] = base64.b64decode(credential).decode().partition(":")
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        return web.json_response(handler(params))

    def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        team = self.tokens.get(str(params.get("_token") or params.get("token") or ""))
        if team is None:
            return {"ok": False, "error": "invalid_auth"}
        return {
            "ok": True,
            "url": "https://standin.slack.test/",
            "team": "Stand-in",
            "user": "stashbird",
            "team_id": team,
            "user_id": BOT_USER,
            "bot_id": BOT_ID,
        }

    def _users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = str(params.get("user"))
        name = self.names.get(user, f"User {user}")
        admin = user in self.admins
        return {
            "ok": True,
            "user": {
                "id": user,
                "team_id": self.team,
                "name": user.lower(),
                "real_name": name,
                "is_admin": admin,
                "is_owner": False,
                "is_bot": False,
                "profile": {"display_name": name, "real_name": name},
            },
        }

    def _chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        self.posted.append({**params, "received": time.perf_counter()})
        return {"ok": True, "channel": params.get("channel"), "ts": self.next_ts(), "message": {"text": params.get("text")}}

    def _chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        self.ephemeral.append(params)
        return {"ok": True, "message_ts": self.next_ts()}

    def _chat_getPermalink(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(params.get("channel")), str(params.get("message_ts"))
        return {"ok": True, "channel": channel, "permalink": self.permalink(channel, ts)}

    def _conversations_history(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.fail_history_after is not None:
            if self.fail_history_after <= 0:
                return {"ok": False, "error": "internal_error"}
            self.fail_history_after -= 1
        if str(params.get("channel")) not in self.channels:
            return {"ok": False, "error": "channel_not_found"}
        channel = self.channels[str(params.get("channel"))]
        oldest, latest = float(params.get("oldest") or 0), float(params.get("latest") or 1e12)
        inclusive = str(params.get("inclusive", "")).lower() in ("1", "true")
        tops = [
            m
            for m in channel.values()
            if not m.get("thread_ts") or m["thread_ts"] == m["ts"] or m.get("subtype") == "thread_broadcast"
        ]
        tops = [m for m in tops if (oldest <= float(m["ts"]) <= latest) if inclusive or float(m["ts"]) not in (oldest, latest)]
        tops.sort(key=lambda m: float(m["ts"]), reverse=True)
        return self._page(tops, params)

    def _conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel"))
        if channel not in self.channels and channel not in self.direct:
            return {"ok": False, "error": "channel_not_found"}
        kind = self.direct.get(channel)
        return {
            "ok": True,
            "channel": {"id": channel, "is_channel": kind is None, "is_im": kind == "im", "is_mpim": kind == "mpim"},
        }

    def _conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self.channels.get(str(params.get("channel")), {})
        thread = str(params.get("ts"))
        if thread not in channel:
            return {"ok": False, "error": "thread_not_found"}
        replies = sorted((m for m in channel.values() if m.get("thread_ts") == thread), key=lambda m: float(m["ts"]))
        return self._page(replies, params)

    def _page(self, items: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
        start = int(params.get("cursor") or 0)
        limit = min(int(params.get("limit") or self.page_size), self.page_size)
        page = items[start : start + limit]
        more = start + limit < len(items)
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    async def _authorize(self, request: web.Request) -> web.Response:
        """The authorize page, as if the installing user clicked *Allow* at once."""
        query = request.query
        if query.get("client_id") != self.client_id or not query.get("scope") or self.oauth_redirect is None:
            return web.Response(status=400, text="invalid_client_id or no scope")
        code = f"code-{next(self._events)}"
        self._codes[code] = self.installing
        answer = urllib.parse.urlencode({"code": code, "state": query.get("state", "")})
        raise web.HTTPFound(f"{query.get('redirect_uri') or self.oauth_redirect}?{answer}")

    def _oauth_v2_access(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("client_id") != self.client_id or params.get("client_secret") != self.client_secret:
            return {"ok": False, "error": "invalid_client_id"}
        team = self._codes.pop(str(params.get("code")), None)
        if team is None:
            return {"ok": False, "error": "invalid_code"}
        token = f"xoxb-{team}-{next(self._events)}"
        self.tokens[token] = team
        return {
            "ok": True,
            "app_id": "A0STANDIN",
            "authed_user": {"id": "U1"},
            "scope": "app_mentions:read,channels:history,chat:write,commands,users:read",
            "token_type": "bot",
            "access_token": token,
            "bot_user_id": BOT_USER,
            "team": {"id": team, "name": f"Workspace {team}"},
            "enterprise": None,
            "is_enterprise_install": False,
        }

    def _apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.socket_refused:
            return {"ok": False, "error": "internal_error"}
        return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/socket"}

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        """Socket Mode: ``hello``, then envelopes out and their acknowledgements back."""
        websocket = web.WebSocketResponse()
        await websocket.prepare(request)
        self._websocket, self._socket_request = websocket, request
        self.socket_connections += 1
        await websocket.send_json(
            {
                "type": "hello",
                "num_connections": 1,
                "connection_info": {"app_id": "A0STANDIN"},
                "debug_info": {"host": "standin", "approximate_connection_time": 18060},
            }
        )
        async for frame in websocket:
            if frame.type == aiohttp.WSMsgType.TEXT:
                envelope = json.loads(frame.data).get("envelope_id")
                future = self._acks.pop(str(envelope), None)
                if future is not None and not future.done():
                    future.set_result(time.perf_counter())
        return websocket

    @property
    def socket_connected(self) -> bool:
        return self._websocket is not None and not self._websocket.closed

    async def disconnect_socket(self, reason: str = "refresh_requested") -> None:
        """Slack's ``disconnect`` envelope (``refresh_requested`` about hourly, ``warning``
        before a server goes away): the client should connect anew at once."""
        assert self._websocket is not None
        await self._websocket.send_json({"type": "disconnect", "reason": reason, "debug_info": {"host": "standin"}})

    async def drop_socket(self, abruptly: bool = False) -> None:
        """End the connection: with a close frame, or (``abruptly``) by cutting the TCP
        connection under it, as a network failure does."""
        if abruptly and self._socket_request is not None and self._socket_request.transport is not None:
            self._socket_request.transport.close()
        elif self._websocket is not None:
            await self._websocket.close()

    async def socket_reconnected(self, connections: int, timeout: float = 20) -> None:
        """Wait until the client has opened ``connections`` sockets in all and is on the last."""
        deadline = time.monotonic() + timeout
        while not (self.socket_connections >= connections and self.socket_connected):
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.socket_connections} Socket Mode connections, {connections} expected")
            await asyncio.sleep(0.05)

    async def deliver_socket(self, body: dict[str, Any], retry: int = 0, timeout: float = 10) -> Delivery:
        """Send an Events API envelope over Socket Mode and wait for its acknowledgement
        (status 0: none came within ``timeout``; Slack would then send it again)."""
        assert self._websocket is not None
        envelope = f"env-{next(self._events)}"
        self._acks[envelope] = asyncio.get_running_loop().create_future()
        started = time.perf_counter()
        await self._websocket.send_json(
            {
                "envelope_id": envelope,
                "type": "events_api",
                "accepts_response_payload": False,
                "retry_attempt": retry,
                "retry_reason": "timeout" if retry else "",
                "payload": body,
            }
        )
        try:
            acked = await asyncio.wait_for(self._acks[envelope], timeout)
        except TimeoutError:
            self._acks.pop(envelope, None)
            return Delivery(0, time.perf_counter() - started, "")
        return Delivery(200, acked - started, "")

    async def _respond(self, request: web.Request) -> web.Response:
        self.ephemeral.append({"key": request.match_info["key"], **(await request.json())})
        return web.Response(text="ok")

    # --- the platform's side: messages happen, events go out --------------------------

    def next_ts(self) -> str:
        """A new message time: now, and always after the last one (ts are unique)."""
        # Whole microseconds: a float of today's epoch seconds steps by about 0.24 µs, so
        # "the last plus 1 µs" could print as the same ts (a message silently replaced).
        self._last = max(time.time_ns() // 1000, self._last + 1)  # never far ahead of the clock (backfill reads up to now)
        return f"{self._last // 1_000_000}.{self._last % 1_000_000:06d}"

    def _event_id(self) -> str:
        return f"Ev{next(self._events):08d}"

    def envelope(self, event: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
        return {
            "token": "legacy",
            "team_id": self.team,
            "api_app_id": "A0STANDIN",
            "event": event,
            "type": "event_callback",
            "event_id": event_id or self._event_id(),
            "event_time": int(time.time()),
            "authorizations": [{"team_id": self.team, "user_id": BOT_USER, "is_bot": True}],
        }

    async def deliver(
        self,
        body: dict[str, Any] | str,
        *,
        retry: int | None = None,
        secret: str | None = None,
        timestamp: int | None = None,
        form: bool = False,
    ) -> Delivery:
        """POST one signed request to ``events_url``, as Slack does."""
        assert self._session is not None and self.events_url is not None
        raw = body if isinstance(body, str) else json.dumps(body)
        stamp = str(timestamp if timestamp is not None else int(time.time()))
        signature = str(SignatureVerifier(secret or self.signing_secret).generate_signature(timestamp=stamp, body=raw))
        headers = {
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature,
            "Content-Type": "application/x-www-form-urlencoded" if form else "application/json",
        }
        if retry is not None:
            headers.update({"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"})
        started = time.perf_counter()
        async with self._session.post(self.events_url, data=raw.encode(), headers=headers) as response:
            text = await response.text()
            return Delivery(response.status, time.perf_counter() - started, text)

    def record(self, channel: str, message: dict[str, Any]) -> None:
        self.channels.setdefault(channel, {})[message["ts"]] = message

    def message(self, channel: str, user: str, text: str, thread_ts: str | None = None, **extra: Any) -> dict[str, Any]:
        """A new message in the platform's history (not yet delivered)."""
        ts = self.next_ts()
        message: dict[str, Any] = {"type": "message", "user": user, "text": text, "ts": ts, "team": self.team, **extra}
        if thread_ts:
            message["thread_ts"] = thread_ts
            parent = self.channels.get(channel, {}).get(thread_ts)
            if parent is not None:
                parent["thread_ts"] = thread_ts
                parent["reply_count"] = parent.get("reply_count", 0) + 1
        self.record(channel, message)
        return message

    async def post(self, channel: str, user: str, text: str, thread_ts: str | None = None, **extra: Any) -> str:
        message = self.message(channel, user, text, thread_ts, **extra)
        await self.deliver(self.envelope({**message, "channel": channel, "channel_type": "channel", "event_ts": message["ts"]}))
        return str(message["ts"])

    async def mention(self, channel: str, user: str, question: str, thread_ts: str | None = None) -> str:
        """A message mentioning the bot: Slack sends ``app_mention`` and ``message``."""
        message = self.message(channel, user, f"<@{BOT_USER}> {question}", thread_ts)
        event = {**message, "channel": channel, "event_ts": message["ts"]}
        await self.deliver(self.envelope({**event, "type": "app_mention"}))
        await self.deliver(self.envelope({**event, "channel_type": "channel"}))
        return str(message["ts"])

    def edit_event(self, channel: str, ts: str, text: str) -> dict[str, Any]:
        message = self.channels[channel][ts]
        previous = dict(message)
        message.update(text=text, edited={"user": message.get("user"), "ts": self.next_ts()})
        return self.envelope(
            {
                "type": "message",
                "subtype": "message_changed",
                "channel": channel,
                "hidden": True,
                "message": dict(message),
                "previous_message": previous,
                "event_ts": self.next_ts(),
                "ts": self.next_ts(),
            }
        )

    async def edit(self, channel: str, ts: str, text: str) -> None:
        await self.deliver(self.edit_event(channel, ts, text))

    def delete_event(self, channel: str, ts: str) -> dict[str, Any]:
        previous = self.channels.get(channel, {}).pop(ts, None)
        return self.envelope(
            {
                "type": "message",
                "subtype": "message_deleted",
                "channel": channel,
                "hidden": True,
                "deleted_ts": ts,
                "previous_message": previous or {},
                "event_ts": self.next_ts(),
                "ts": self.next_ts(),
            }
        )

    async def delete(self, channel: str, ts: str) -> None:
        await self.deliver(self.delete_event(channel, ts))

    async def command(self, channel: str, user: str, text: str, team: str | None = None) -> Delivery:
        key = f"r{next(self._events)}"
        form = {
            "token": "legacy",
            "team_id": team or self.team,
            "channel_id": channel,
            "user_id": user,
            "command": "/memory",
            "text": text,
            "response_url": f"http://127.0.0.1:{self.port}/respond/{key}",
            "trigger_id": f"trigger.{key}",
        }
        return await self.deliver(urllib.parse.urlencode(form), form=True)

    def history(self, channel: str) -> dict[str, str]:
        """The platform's truth: ``ts -> text`` of the channel's messages."""
        return {ts: str(m.get("text")) for ts, m in self.channels.get(channel, {}).items()}


def service_settings(stand_in: SlackStandIn) -> Settings:
    """Settings for a ``serve`` (in-process) that talks to ``stand_in`` over HTTP events."""
    return Settings(
        chat=ChatSettings(
            slack_bot_token="xoxb-standin",
            slack_signing_secret=stand_in.signing_secret,
            slack_api_url=stand_in.api_url,
            admin_ids="UOPS",
            serve_jobs=False,
            vacuum_seconds=3600,  # first run at start (nothing due); tests run it when they want it
        )
    )
