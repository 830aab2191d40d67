"""The Slack connector: a thin shell of slack-bolt's ``AsyncApp`` and slack_sdk's
``AsyncWebClient`` around the pure ``payloads`` module and the chat service.

Every Events API delivery (HTTP, signed) and every ``/memory`` command is parsed and
stored in the service's durable inbox *before* Bolt answers Slack (``process_before_
response``), so an acknowledged event survives a crash; if storing fails, Slack gets a
500 and delivers again. Socket Mode is the same handlers behind another transport.

The HTTP edge answers a client's mistakes without a traceback: the v0 signature and its
5-minute window are checked on the raw bytes *before* anything parses them (401
otherwise), a signed body that is not JSON (or a form) is a 400, and every verified
delivery Stashbird does not act on is acknowledged (2xx), because Slack counts anything
else as a failed delivery and disables an app's subscriptions after repeated failures:
an event type without a handler, a workspace this app does not serve, a direct message
(channels only), an event the inbox cannot hold (a NUL or a lone surrogate in its
text). Those are logged once (type and reason) and counted as refused.

One workspace: the bot token's workspace (``auth.test``) is the only one served; a
delivery for any other ``team_id`` (the signing secret is per app, so another
workspace's events verify too) is acknowledged, logged and dropped.

Lookups are cached in the process: display names and roles from ``users.info`` (an
hour: a rename shows up within it), permalinks from ``chat.getPermalink`` (they never
change). Every endpoint comes from the configured Web API base URL.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from connectors.events import Author, ChatEvent, Reply, Role
from connectors.metrics import EVENTS, PARSE_ERRORS
from connectors.service import ChatService, Intake
from connectors.slack import payloads
from connectors.slack.render import render_reply
from connectors.slack.sweep import sweep_slack_conversation
from connectors.sweep import SweepReport
from memory import ConversationRef, Memory, ValidationError

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://slack.com/api/"


@dataclass(frozen=True)
class SlackConfig:
    bot_token: str
    signing_secret: str
    api_url: str = DEFAULT_API_URL
    app_token: str | None = None  # Socket Mode's app-level token (xapp-…)
    name_ttl_seconds: float = 3600.0
    cache_size: int = 10_000


def _malformed(raw: bytes, content_type: str) -> str | None:
    """What is wrong with a signed request body Bolt would choke on, or None. Pure."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "the body is not UTF-8"
    if content_type == "application/json":
        try:
            body = json.loads(text)
        except ValueError as error:
            return f"the body is not JSON ({error})"
        if not isinstance(body, dict):
            return "the body is not a JSON object"
    return None


class _Cache:
    """A small LRU with an optional age limit (one per lookup kind)."""

    def __init__(self, size: int, ttl: float | None = None) -> None:
        self.size, self.ttl = size, ttl
        self.items: OrderedDict[tuple[str, ...], tuple[float, Any]] = OrderedDict()

    def get(self, key: tuple[str, ...]) -> Any:
        found = self.items.get(key)
        if found is None or (self.ttl is not None and time.monotonic() - found[0] > self.ttl):
            return None
        self.items.move_to_end(key)
        return found[1]

    def put(self, key: tuple[str, ...], value: Any) -> None:
        self.items[key] = (time.monotonic(), value)
        self.items.move_to_end(key)
        while len(self.items) > self.size:
            self.items.popitem(last=False)


def user_author(user: dict[str, Any], author: Author) -> Author:
    """A ``users.info`` user as an Author: display name (else real name, else handle);
    role bot for bots, admin for workspace admins and owners, else user. Pure."""
    profile = user.get("profile") or {}
    name = profile.get("display_name") or profile.get("real_name") or user.get("real_name") or user.get("name")
    role: Role
    if user.get("is_bot"):
        role = "bot"
    elif user.get("is_admin") or user.get("is_owner") or user.get("is_primary_owner"):
        role = "admin"
    else:
        role = "user"
    return dataclasses.replace(author, name=author.name or name or author.id, role=author.role or role)


class SlackConnector:
    """Slack for the chat service (``Platform``): Bolt handlers in, Web API calls out."""

    name = payloads.PLATFORM

    def __init__(self, service: ChatService, config: SlackConfig) -> None:
        self.service = service
        self.intake: Intake = service  # where events go before the ack (bot/service.py may give it a thread)
        self.config = config
        self.client = AsyncWebClient(token=config.bot_token, base_url=config.api_url)
        self.app = AsyncApp(
            signing_secret=config.signing_secret,
            client=self.client,
            process_before_response=True,
            logger=log,
            # Only what the acknowledgement needs runs before it: the assistant-thread and
            # workflow-function middleware (unused here) cost CPU on every request.
            ignoring_self_assistant_message_events_enabled=False,
            attaching_function_token_enabled=False,
            attaching_conversation_kwargs_enabled=False,
        )
        self.app.event("message")(self._on_event)
        self.app.event("app_mention")(self._on_event)
        self.app.event("channel_deleted")(self._on_event)
        self.app.event("group_deleted")(self._on_event)
        self.app.command("/memory")(self._on_command)
        self.app.event(re.compile(".*"))(self._on_other)  # last: any other verified event is acknowledged
        # Socket Mode alone needs no signing secret: nothing is then taken over HTTP.
        self._verifier = SignatureVerifier(config.signing_secret) if config.signing_secret else None
        self._authors = _Cache(config.cache_size, config.name_ttl_seconds)
        self._permalinks = _Cache(config.cache_size)
        self._socket: Any = None
        self.bot_user: str | None = None
        self.bot_id: str | None = None
        self.team = ""

    @property
    def connected(self) -> bool:
        if self._socket is not None:
            client = self._socket.client
            session = client.current_session
            return not client.closed and not client.stale and session is not None and not session.closed
        return self.bot_user is not None

    async def identify(self) -> None:
        """Check the token and learn the bot's user and bot ids (``auth.test``)."""
        identity = await self.client.auth_test()
        self.bot_user, self.bot_id = identity.get("user_id"), identity.get("bot_id")
        self.team = str(identity.get("team_id") or "")

    async def start(self) -> None:
        """``identify``, and with an app token connect Socket Mode."""
        await self.identify()
        if self.config.app_token:
            from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

            self._socket = AsyncSocketModeHandler(self.app, self.config.app_token)
            await self._socket.connect_async()

    async def close(self) -> None:
        if self._socket is not None:
            await self._socket.close_async()
            self._socket = None

    async def sweep(self, memory: Memory, conversation: ConversationRef, days: int) -> SweepReport:
        """The missed-deletion sweep of one Slack conversation (connectors.sweep)."""
        return await sweep_slack_conversation(memory, self.client, conversation, days)

    async def handle_http(self, request: web.Request) -> web.Response:
        """The Events API and slash-command endpoint: the signature on the raw body first,
        then its syntax, then Bolt (its aiohttp adapter). See the module doc."""
        raw = await request.read()
        headers = request.headers
        stamp, signature = headers.get("X-Slack-Request-Timestamp"), headers.get("X-Slack-Signature")
        if self._verifier is None or not self._verifier.is_valid(raw, stamp, signature):
            log.info("Slack request refused (401): missing, bad or stale signature")
            return web.json_response({"error": "invalid signature"}, status=401)
        problem = _malformed(raw, request.content_type)
        if problem is not None:
            log.warning("Slack request refused (400): %s", problem)
            PARSE_ERRORS.labels(payloads.PLATFORM, "http").inc()
            return web.json_response({"error": problem}, status=400)
        response = await to_aiohttp_response(await self.app.async_dispatch(await to_bolt_request(request)))
        if response.status == 404:  # verified, but nothing here handles it (e.g. app_rate_limited)
            log.info("Slack request of a kind without a handler acknowledged")
            return web.Response(status=200)
        return response

    def refused(self, body: dict[str, Any], kind: str, reason: str) -> None:
        """A verified delivery acknowledged without being stored: logged once and counted."""
        log.warning("Slack event %s (%s) refused: %s", body.get("event_id"), kind, reason)
        EVENTS.labels(payloads.PLATFORM, kind, "refused").inc()

    def _foreign(self, team: str) -> bool:
        """Whether a delivery is for a workspace this connector does not serve."""
        return bool(self.team) and team != self.team

    async def _on_event(self, body: dict[str, Any], context: dict[str, Any]) -> None:
        event = body.get("event") or {}
        kind = "/".join(str(k) for k in (event.get("type"), event.get("subtype")) if k)
        team = payloads.team_of(body)
        reason = f"workspace {team} is not the installed one ({self.team})" if self._foreign(team) else payloads.refusal(body)
        if reason is not None:
            self.refused(body, kind, reason)
            return
        try:
            events = payloads.to_events(body, context.get("bot_user_id") or self.bot_user)
        except ValidationError as error:  # acknowledged: a redelivery would be refused the same way
            PARSE_ERRORS.labels(payloads.PLATFORM, kind).inc()
            self.refused(body, kind, str(error))
            return
        for chat_event in events:
            await self._accept(body, kind, chat_event)

    async def _accept(self, body: dict[str, Any], kind: str, event: ChatEvent) -> None:
        """Into the inbox; an event it cannot hold (ValidationError) is refused, not retried."""
        try:
            await self.intake.accept(event)
        except ValidationError as error:
            self.refused(body, kind, str(error))

    async def _on_other(self, body: dict[str, Any]) -> None:
        event = body.get("event") or {}
        log.debug("Slack event %s (%s) has no handler: acknowledged", body.get("event_id"), event.get("type"))

    async def _on_command(self, ack: Any, body: dict[str, Any]) -> None:
        team = str(body.get("team_id") or "")
        if self._foreign(team):
            log.warning("/memory from workspace %s refused: not the installed one (%s)", team, self.team)
            await ack(text="Sorry: Stashbird is not installed in this workspace.", response_type="ephemeral")
            return
        try:
            command = payloads.to_admin_command(body)
            await self.intake.accept(command)
        except ValidationError as error:
            log.warning("/memory refused: %s", error)
            await ack(text=f"Sorry: {error}", response_type="ephemeral")
            return
        await ack()

    # --- Platform --------------------------------------------------------------------

    async def describe(self, conversation: ConversationRef, author: Author) -> Author:
        key = (conversation.workspace_id, author.id)
        user = self._authors.get(key)
        if user is None:
            user = (await self.client.users_info(user=author.id)).get("user") or {}
            self._authors.put(key, user)
        return user_author(user, author)

    async def permalink(self, conversation: ConversationRef, message_id: str) -> str:
        key = (conversation.channel_id, message_id)
        link = self._permalinks.get(key)
        if link is None:
            link = (await self.client.chat_getPermalink(channel=conversation.channel_id, message_ts=message_id))["permalink"]
            self._permalinks.put(key, link)
        return str(link)

    async def deliver(self, reply: Reply) -> None:
        ids = dict.fromkeys(i for cited in reply.citations for i in cited.linked_ids())
        links = {i: await self.permalink(reply.conversation, i) for i in ids}
        text = render_reply(reply, links)
        target = reply.target
        if target.ephemeral and target.handle.get("response_url"):
            response = await AsyncWebhookClient(target.handle["response_url"]).send(
                text=text, response_type="ephemeral", replace_original=False
            )
            if response.status_code != 200:
                raise ConnectionError(f"response_url answered {response.status_code}")
        elif target.ephemeral:
            await self.client.chat_postEphemeral(channel=reply.conversation.channel_id, user=target.user_id or "", text=text)
        else:
            await self.client.chat_postMessage(
                channel=reply.conversation.channel_id,
                thread_ts=target.thread_id or target.message_id,
                text=text,
                unfurl_links=False,
                unfurl_media=False,
            )
