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

One workspace (``bot_token``): the token's workspace (``auth.test``) is the only one
served; a delivery for any other ``team_id`` (the signing secret is per app, so another
workspace's events verify too) is acknowledged, logged and dropped. Many workspaces
(``oauth``): Slack's OAuth v2 install flow (``connectors.slack.installations``) stores a
bot token per workspace (or Enterprise Grid org); each Web API call is made with the
token of its conversation's workspace, a delivery for a workspace with no installation
is refused as above, and ``app_uninstalled`` / ``tokens_revoked`` remove the
installation (``app_uninstalled`` also drops the workspace's memory when so configured).

Lookups are cached in the process: display names and roles from ``users.info`` (an
hour: a rename shows up within it), permalinks from ``chat.getPermalink`` (they never
change). Every endpoint comes from the configured Web API base URL.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.authorization.async_authorize import AsyncAuthorize
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from connectors.events import Author, ChannelDeleted, ChatEvent, Reply, Role, WorkspaceChange
from connectors.intake import Intake
from connectors.metrics import CONNECTOR_UP, EVENTS, PARSE_ERRORS, RECONNECTS
from connectors.service import ChatService
from connectors.slack import payloads
from connectors.slack.installations import BOT_SCOPES, INSTALL_PATH, REDIRECT_PATH, Installations, OAuthConfig, authorize_url
from connectors.slack.render import render_reply
from connectors.slack.sweep import sweep_slack_conversation
from connectors.sweep import SweepReport
from memory import ConversationRef, Memory, Principal, ValidationError, conversations

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://slack.com/api/"


@dataclass(frozen=True)
class SlackConfig:
    """The connector's settings; its secrets are left out of the repr."""

    bot_token: str | None = dataclasses.field(repr=False)  # one workspace; None with ``oauth`` (many)
    signing_secret: str = dataclasses.field(repr=False)
    api_url: str = DEFAULT_API_URL
    app_token: str | None = dataclasses.field(default=None, repr=False)  # Socket Mode's app-level token (xapp-…)
    name_ttl_seconds: float = 3600.0
    cache_size: int = 10_000
    oauth: OAuthConfig | None = None
    ping_seconds: float = 10.0  # Socket Mode: how soon a dead connection is noticed
    gap_sweep_days: int = 7  # Socket Mode: after a gap, the sweep looks this far back


class _InstalledAuthorize(AsyncAuthorize):
    """Bolt's per-request authorization from the connector's cached installations. A
    workspace with none gets an empty result rather than None (which Bolt answers with
    an error log and a reinstall notice): the handlers then refuse it, acknowledged."""

    def __init__(self, connector: SlackConnector) -> None:
        self.connector = connector

    async def __call__(self, *, enterprise_id: str | None, team_id: str | None, **_: Any) -> AuthorizeResult:
        bot = await self.connector.installed(team_id or "", enterprise_id)
        if bot is None:
            return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id)
        return AuthorizeResult(
            enterprise_id=enterprise_id, team_id=team_id, bot_token=bot.bot_token, bot_id=bot.bot_id, bot_user_id=bot.bot_user_id
        )


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

    def drop(self, unwanted: Callable[[tuple[str, ...], Any], bool]) -> None:
        for key in [k for k, (_, value) in self.items.items() if unwanted(k, value)]:
            del self.items[key]

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
        self.client = AsyncWebClient(token=config.bot_token, base_url=config.api_url)  # no token with oauth
        self.installations = Installations(config.oauth) if config.oauth else None
        # team -> its installed bot (multi-workspace); a minute, so that an uninstall another
        # process received is noticed soon
        self._bots = _Cache(config.cache_size, ttl=60.0)
        self.app = AsyncApp(
            signing_secret=config.signing_secret,
            client=self.client,
            process_before_response=True,
            logger=log,
            **self._oauth_options(),
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
        for membership in payloads.MEMBERSHIP_EVENTS:  # the bot removed or added back, a member deactivated
            self.app.event(membership)(self._on_event)
        self.app.command("/memory")(self._on_command)
        self.app.event("app_uninstalled")(self._on_uninstalled)
        self.app.event("tokens_revoked")(self._on_uninstalled)
        self.app.event(re.compile(".*"))(self._on_other)  # last: any other verified event is acknowledged
        # Socket Mode alone needs no signing secret: nothing is then taken over HTTP.
        self._verifier = SignatureVerifier(config.signing_secret) if config.signing_secret else None
        self._authors = _Cache(config.cache_size, config.name_ttl_seconds)
        self._permalinks = _Cache(config.cache_size)
        self._socket: Any = None
        self.bot_user: str | None = None
        self.bot_id: str | None = None
        self.team = ""
        self._started = False
        self._hellos = 0
        self._gap_sweep: asyncio.Task[None] | None = None

    def _oauth_options(self) -> dict[str, Any]:
        """Bolt's OAuth flow and authorization in multi-workspace mode (else nothing)."""
        if self.installations is None or self.config.oauth is None:
            return {}
        oauth = self.config.oauth
        settings = AsyncOAuthSettings(
            client_id=oauth.client_id,
            client_secret=oauth.client_secret,
            scopes=list(BOT_SCOPES),
            installation_store=self.installations.store,
            state_store=self.installations.states,
            install_path=INSTALL_PATH,
            redirect_uri_path=REDIRECT_PATH,
            install_page_rendering_enabled=False,
            authorization_url=authorize_url(self.config.api_url),
        )
        return {"oauth_settings": settings, "authorize": _InstalledAuthorize(self)}

    @property
    def connected(self) -> bool:
        if self._socket is not None:
            client = self._socket.client
            session = client.current_session
            return not client.closed and not client.stale and session is not None and not session.closed
        return self.bot_user is not None or (self.installations is not None and self._started)

    async def identify(self) -> None:
        """Check the token and learn the bot's user and bot ids (``auth.test``)."""
        identity = await self.client.auth_test()
        self.bot_user, self.bot_id = identity.get("user_id"), identity.get("bot_id")
        self.team = str(identity.get("team_id") or "")

    async def start(self) -> None:
        """``identify`` (one workspace), and with an app token connect Socket Mode."""
        self._started = True
        if self.installations is not None:
            return
        await self.identify()
        if self.config.app_token:
            from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

            self._socket = AsyncSocketModeHandler(self.app, self.config.app_token, ping_interval=self.config.ping_seconds)
            self._socket.client.message_listeners.append(self._on_socket_message)
            self._socket.client.on_close_listeners.append(self._on_socket_close)
            await self._socket.connect_async()

    async def _on_socket_message(self, client: Any, message: dict[str, Any], raw: str | None = None) -> None:
        """Socket Mode's own messages: each ``hello`` is a (re)connection; after the first,
        what was deleted during the gap is caught up by the sweep."""
        if message.get("type") == "disconnect":
            log.info("Slack Socket Mode: disconnect (%s), connecting anew", message.get("reason"))
        if message.get("type") != "hello":
            return
        CONNECTOR_UP.labels(payloads.PLATFORM).set(1)
        self._hellos += 1
        if self._hellos > 1:
            RECONNECTS.labels(payloads.PLATFORM).inc()
            log.info("Slack Socket Mode reconnected: sweeping for deletions missed meanwhile")
            if self._gap_sweep is None or self._gap_sweep.done():
                self._gap_sweep = asyncio.create_task(self._sweep_after_gap())

    async def _on_socket_close(self, client: Any, message: Any = None) -> None:
        CONNECTOR_UP.labels(payloads.PLATFORM).set(0)

    async def _sweep_after_gap(self) -> None:
        """The missed-deletion sweep of this workspace's conversations (deletes made while
        the connection was down sent events nobody received)."""
        memory = self.service.memory
        for ref in await conversations(memory, principal=Principal.job("slack-gap-sweep"), platform=payloads.PLATFORM):
            if ref.workspace_id != self.team:
                continue
            try:
                await self.sweep(memory, ref, self.config.gap_sweep_days)
            except Exception as error:  # noqa: BLE001 - the scheduled sweep tries again later
                log.warning("sweep after the Socket Mode gap failed for %s: %s", ref, error)

    async def close(self) -> None:
        if self._gap_sweep is not None:
            self._gap_sweep.cancel()
        if self._socket is not None:
            await self._socket.close_async()
            self._socket = None
        if self.installations is not None:
            await self.installations.close()

    # --- workspaces ------------------------------------------------------------------

    async def installed(self, team: str, enterprise: str | None = None) -> Any:
        """The bot installed for ``team`` (multi-workspace; cached), or None."""
        if self.installations is None:
            return None
        bot = self._bots.get((team,))
        if bot is None:
            bot = await self.installations.bot(team, enterprise)
            if bot is not None:
                self._bots.put((team,), bot)
        return bot

    async def client_for(self, conversation: ConversationRef) -> AsyncWebClient:
        """The Web API client with the token of the conversation's workspace."""
        if self.installations is None:
            return self.client
        bot = await self.installed(conversation.workspace_id)
        if bot is None:
            raise LookupError(f"Slack workspace {conversation.workspace_id} has no installation (the app was removed from it)")
        return AsyncWebClient(token=bot.bot_token, base_url=self.config.api_url)

    async def _refusal(self, team: str, enterprise: str | None) -> str | None:
        """Why a delivery for ``team`` is not served, or None."""
        if self.installations is not None:
            return None if await self.installed(team, enterprise) else f"workspace {team} has no installation"
        return f"workspace {team} is not the installed one ({self.team})" if self.team and team != self.team else None

    async def _on_uninstalled(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        """The app removed from a workspace (or its bot token revoked): forget the
        installation, and with ``forget_on_uninstall`` the workspace's memory."""
        if self.installations is None or (event.get("type") == "tokens_revoked" and not (event.get("tokens") or {}).get("bot")):
            return
        team, enterprise = payloads.team_of(body), body.get("enterprise_id")
        org = any(a.get("is_enterprise_install") for a in body.get("authorizations") or ())
        await self.installations.remove(None if org else team, enterprise)
        self._bots.drop(lambda key, bot: key == (team,) or (org and bot.enterprise_id == enterprise))
        log.warning("Slack app removed from workspace %s (%s): its installation is forgotten", team, event.get("type"))
        oauth = self.config.oauth
        if event.get("type") == "app_uninstalled" and oauth is not None and oauth.forget_on_uninstall:
            await self._forget_workspace(team, str(body.get("event_id")))

    async def _forget_workspace(self, team: str, event_id: str) -> None:
        """Each of the workspace's conversations dropped, through the inbox like a deleted channel."""
        principal = Principal.job("slack-uninstall")
        for ref in await conversations(self.intake.memory, principal=principal, platform=payloads.PLATFORM):
            if ref.workspace_id == team:
                await self.intake.accept(ChannelDeleted(ref, f"uninstalled:{event_id}"))

    async def sweep(self, memory: Memory, conversation: ConversationRef, days: int) -> SweepReport:
        """The missed-deletion sweep of one Slack conversation (connectors.sweep)."""
        return await sweep_slack_conversation(memory, await self.client_for(conversation), conversation, days)

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

    @property
    def oauth_paths(self) -> tuple[str, ...]:
        """The install flow's GET paths (multi-workspace mode), for the HTTP server."""
        return (INSTALL_PATH, REDIRECT_PATH) if self.installations is not None else ()

    async def handle_oauth(self, request: web.Request) -> web.Response:
        """``/slack/install`` (to Slack's authorize page, with a state in the store and a
        cookie) and ``/slack/oauth_redirect`` (state checked, ``oauth.v2.access``, the
        installation stored): Bolt's OAuth flow."""
        flow = self.app.oauth_flow
        assert flow is not None
        bolt = await to_bolt_request(request)
        handle = flow.handle_installation if request.path == INSTALL_PATH else flow.handle_callback
        return await to_aiohttp_response(await handle(bolt))

    def refused(self, body: dict[str, Any], kind: str, reason: str) -> None:
        """A verified delivery acknowledged without being stored: logged once and counted."""
        log.warning("Slack event %s (%s) refused: %s", body.get("event_id"), kind, reason)
        EVENTS.labels(payloads.PLATFORM, kind, "refused").inc()

    async def _on_event(self, body: dict[str, Any], context: dict[str, Any]) -> None:
        event = body.get("event") or {}
        kind = "/".join(str(k) for k in (event.get("type"), event.get("subtype")) if k)
        reason = await self._refusal(payloads.team_of(body), body.get("enterprise_id")) or payloads.refusal(body)
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

    async def _accept(self, body: dict[str, Any], kind: str, event: ChatEvent | WorkspaceChange) -> None:
        """Into the inbox; an event it cannot hold (ValidationError) is refused, not retried."""
        try:
            await self.intake.accept(event)
        except ValidationError as error:
            self.refused(body, kind, str(error))

    async def _on_other(self, body: dict[str, Any]) -> None:
        event = body.get("event") or {}
        log.debug("Slack event %s (%s) has no handler: acknowledged", body.get("event_id"), event.get("type"))

    async def _on_command(self, ack: Any, body: dict[str, Any]) -> None:
        reason = await self._refusal(str(body.get("team_id") or ""), body.get("enterprise_id"))
        if reason is not None:
            log.warning("/memory refused: %s", reason)
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
            user = (await (await self.client_for(conversation)).users_info(user=author.id)).get("user") or {}
            self._authors.put(key, user)
        return user_author(user, author)

    async def permalink(self, conversation: ConversationRef, message_id: str) -> str:
        key = (conversation.channel_id, message_id)
        link = self._permalinks.get(key)
        if link is None:
            client = await self.client_for(conversation)
            link = (await client.chat_getPermalink(channel=conversation.channel_id, message_ts=message_id))["permalink"]
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
            client = await self.client_for(reply.conversation)
            await client.chat_postEphemeral(channel=reply.conversation.channel_id, user=target.user_id or "", text=text)
        else:
            await (await self.client_for(reply.conversation)).chat_postMessage(
                channel=reply.conversation.channel_id,
                thread_ts=target.thread_id or target.message_id,
                text=text,
                unfurl_links=False,
                unfurl_media=False,
            )
