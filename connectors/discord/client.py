"""The Discord connector: a thin ``discord.Client`` shell around ``payloads``.

It takes every gateway dispatch as the raw frame (``socket_raw_receive``, handled inside
``dispatch`` before discord.py applies the frame to its cache, so frames are parsed in
gateway order against the cache as it was), turns it into normalised events and hands
them, in that order, to ``ChatService.accept``. ``/memory`` is an application command
(a command tree): it is stored in the inbox (behind the events before it), deferred
ephemerally (Discord wants an answer within 3 seconds) and answered when the service
has run it. An interaction a gateway RESUME replays is the same inbox event
(``<interaction id>:command``): it is neither deferred nor run again. Replies are posted
with the bodies ``payloads.reply_body`` builds.

The connection is ``gateway.GatewaySupervisor``'s: each frame is parsed in isolation (a
frame that cannot be read is logged, counted and skipped), any end of the connection is
followed by a RESUME or a fresh IDENTIFY, and ``connected`` is true only while a session
is up and its heartbeats are answered.

The Discord gateway has no acknowledgement to withhold: events the process did not see
(it was down, or died between receiving and storing) are caught up by a RESUME when the
session survives. When it does not (a new session after a gap), the missed-deletion
sweep runs at once for the conversations of the session's servers, so deletes made
while the bot was away are applied; messages posted meanwhile come with ``backfill``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket
from discord.http import Route
from pydantic import SecretStr

from connectors.discord import payloads
from connectors.discord.gateway import FaultReport, GatewayPolicy, GatewaySupervisor, Heartbeat, isolate_parsers
from connectors.discord.payloads import GuildInfo
from connectors.discord.sweep import sweep_discord_conversation
from connectors.events import Author, ChatEvent, Reply, WorkspaceChange
from connectors.metrics import CONNECTOR_UP, PARSE_ERRORS, RECONNECTS
from connectors.service import ChatService
from connectors.sweep import SweepReport, sweep_platform
from memory import ConfigurationError, ConversationRef, Memory, ValidationError

log = logging.getLogger(__name__)

DEFER_WITHIN = 2.0  # seconds to wait for a command to be stored before deferring anyway (Discord allows 3)
ALREADY_ACKNOWLEDGED = 40060  # Discord's error code for a second response to one interaction
# How long a reply waits out Discord's rate limits (beyond discord.py's own five tries)
# before the failure goes to the service's retries: a reply is posted late, not given up.
REPLY_PATIENCE = 300.0

PARSED = frozenset(
    {
        "MESSAGE_CREATE",
        "MESSAGE_UPDATE",
        "MESSAGE_DELETE",
        "MESSAGE_DELETE_BULK",
        "CHANNEL_DELETE",
        "THREAD_DELETE",
        "GUILD_MEMBER_REMOVE",
        "GUILD_DELETE",
        "GUILD_CREATE",
    }
)


@dataclass(frozen=True)
class DiscordEndpoints:
    """Where Discord is: the REST base and gateway URL differ behind a rate-limit proxy
    (nirn-proxy) and in tests (the loopback stand-in). The token is left out of the repr."""

    token: str = field(repr=False)
    api_base: str
    gateway_url: str

    def apply(self) -> None:
        """discord.py reads both from class attributes: one Discord per process."""
        Route.BASE = self.api_base.rstrip("/")
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.gateway_url)


def intents(members: bool = False) -> discord.Intents:
    """Guilds, guild messages and the privileged message content intent (enabled in the
    application's Bot settings); the privileged members intent only when ``members``
    (STASHBIRD_ON_MEMBER_LEAVE=forget: GUILD_MEMBER_REMOVE comes with it alone), nothing
    else."""
    chosen = discord.Intents.none()
    chosen.guilds = True
    chosen.guild_messages = True
    chosen.message_content = True
    chosen.members = members
    return chosen


def guild_info(guild: discord.Guild | None) -> GuildInfo | None:
    """The parser's view of a cached guild."""
    if guild is None:
        return None
    return GuildInfo(
        id=str(guild.id),
        owner_id=str(guild.owner_id) if guild.owner_id else None,
        role_permissions={str(role.id): role.permissions.value for role in guild.roles},
        thread_parents={str(thread.id): str(thread.parent_id) for thread in guild.threads},
    )


def interaction_payload(interaction: discord.Interaction[Any]) -> dict[str, Any]:
    """The INTERACTION_CREATE shape ``payloads.admin_command`` reads, from discord.py's
    Interaction (the tree hands us that, not the raw payload)."""
    user = interaction.user
    member: dict[str, Any] = {
        "user": {"id": str(user.id), "username": user.name, "global_name": user.global_name, "bot": user.bot},
        "nick": getattr(user, "nick", None),
        "permissions": str(interaction.permissions.value),
    }
    return {
        "id": str(interaction.id),
        "type": interaction.type.value,
        "token": interaction.token,
        "application_id": str(interaction.application_id),
        "guild_id": str(interaction.guild_id or ""),
        "channel_id": str(interaction.channel_id),
        "member": member,
        "data": dict(interaction.data or {}),
    }


class StashbirdClient(discord.Client):
    """discord.Client that hands every raw frame to ``on_frame`` as it arrives (before
    discord.py parses it), and whose own parsers each run in isolation (``on_fault``)."""

    def __init__(
        self,
        on_frame: Callable[[dict[str, Any]], None],
        on_command: Callable[[discord.Interaction[Any]], Awaitable[None]],
        on_fault: FaultReport,
        members: bool = False,
    ) -> None:
        super().__init__(intents=intents(members), enable_debug_events=True, max_messages=None)
        self._on_frame = on_frame
        isolate_parsers(self._connection.parsers, on_fault, lambda: self.ws.sequence if self.ws is not None else None)
        self.tree = app_commands.CommandTree(self)
        self.tree.add_command(MemoryCommands(on_command))

    def dispatch(self, event: str, /, *args: Any, **kwargs: Any) -> None:
        if event == "socket_raw_receive" and args:
            try:
                frame = json.loads(args[0])
            except (TypeError, ValueError):
                frame = None  # not JSON: discord.py fails on it too, and the supervisor reconnects
            if isinstance(frame, dict):
                self._on_frame(frame)
        super().dispatch(event, *args, **kwargs)

    async def setup_hook(self) -> None:
        await self.tree.sync()


Confirm = Literal["confirm"]  # an option whose one value reads as the text's "confirm"


class MemoryCommands(app_commands.Group):
    """``/memory about|why|forgotten|provenance|stats|forget-user|retention`` (admins) and
    ``privacy|forget-me|ignore-me|remember-me`` (anyone, about themselves): each
    subcommand hands its interaction to ``on_command``, whose options read as the
    command's text (``payloads.command_text``); the service decides who may do what."""

    def __init__(self, on_command: Callable[[discord.Interaction[Any]], Awaitable[None]]) -> None:
        super().__init__(
            name=payloads.COMMAND, description="This channel's memory: audit it, or decide about yours", guild_only=True
        )
        self._on_command = on_command

    @app_commands.command(description="What the bot keeps here and how to opt out or be forgotten")
    async def privacy(self, interaction: discord.Interaction[Any]) -> None:
        await self._on_command(interaction)

    @app_commands.command(name="forget-me", description="Forget everything you wrote in this server (shows what first)")
    async def forget_me(self, interaction: discord.Interaction[Any], confirm: Confirm | None = None) -> None:
        await self._on_command(interaction)

    @app_commands.command(name="ignore-me", description="Stop storing your new messages")
    async def ignore_me(self, interaction: discord.Interaction[Any]) -> None:
        await self._on_command(interaction)

    @app_commands.command(name="remember-me", description="Store your new messages again")
    async def remember_me(self, interaction: discord.Interaction[Any]) -> None:
        await self._on_command(interaction)

    @app_commands.command(name="forget-user", description="Forget everything someone wrote in this server (admins)")
    async def forget_user(
        self, interaction: discord.Interaction[Any], user: discord.User, confirm: Confirm | None = None
    ) -> None:
        await self._on_command(interaction)

    @app_commands.command(description="How long this channel's messages are kept: 90d, or off (admins)")
    async def retention(self, interaction: discord.Interaction[Any], window: str) -> None:
        await self._on_command(interaction)

    @app_commands.command(description="What memory holds about someone or something")
    async def about(self, interaction: discord.Interaction[Any], name: str) -> None:
        await self._on_command(interaction)

    @app_commands.command(description="Why an answer said what it did")
    async def why(self, interaction: discord.Interaction[Any], answer: str) -> None:
        await self._on_command(interaction)

    @app_commands.command(description="What was forgotten")
    async def forgotten(self, interaction: discord.Interaction[Any]) -> None:
        await self._on_command(interaction)

    @app_commands.command(description="Which facts rest on a message")
    async def provenance(self, interaction: discord.Interaction[Any], message: str) -> None:
        await self._on_command(interaction)

    @app_commands.command(description="Totals of this channel's memory")
    async def stats(self, interaction: discord.Interaction[Any]) -> None:
        await self._on_command(interaction)


class DiscordConnector:
    """The ``Platform`` the chat service talks to for Discord, and the gateway client
    feeding it (built with the service it feeds, like every connector)."""

    name = payloads.PLATFORM

    def __init__(self, service: ChatService, endpoints: DiscordEndpoints, policy: GatewayPolicy | None = None) -> None:
        self.service = service
        self.endpoints = endpoints
        self.policy = policy or GatewayPolicy()
        # Events in gateway order, each with a future told whether the inbox took it as new.
        self._queue: asyncio.Queue[tuple[ChatEvent | WorkspaceChange, asyncio.Future[bool] | None]] = asyncio.Queue()
        self._deferring: dict[str, asyncio.Event] = {}  # interactions whose defer is on its way
        self.heartbeat = Heartbeat()
        members = service.config.on_member_leave == "forget"  # the members intent only when a leave is acted on
        self.client = StashbirdClient(self._on_frame, self._on_command, self._frame_fault, members)
        self.supervisor = GatewaySupervisor(self.client, self.heartbeat, self.policy)
        self.sessions = 0  # gateway sessions established (READY or RESUMED)
        self._last_fault: tuple[str, int | None] | None = None
        self._gap_sweep: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def connected(self) -> bool:
        """A gateway session is up and its last heartbeat ACK is at most two intervals old."""
        return self.supervisor.connected

    async def start(self) -> None:
        """Log in (a refused token fails here, clearly), sync ``/memory``, then connect
        the gateway in the background, under the supervisor."""
        self.endpoints.apply()
        await _login(self.client, self.endpoints.token)
        CONNECTOR_UP.labels(payloads.PLATFORM).set_function(lambda: float(self.connected))
        self._tasks = [asyncio.create_task(self._store()), asyncio.create_task(self._connect())]

    async def _connect(self) -> None:
        try:
            await self.supervisor.run()
        except Exception:  # noqa: BLE001 - a fault of the supervisor itself: reported down, never quiet
            self.supervisor.stopped = "the gateway supervisor failed"
            log.exception("the Discord gateway supervisor failed: the connector is down")

    async def close(self) -> None:
        """Stop taking events, store what was already parsed, disconnect."""
        if self._gap_sweep is not None:
            self._gap_sweep.cancel()
        if not self.client.is_closed():
            await self.client.close()
        if self._tasks:
            try:
                await asyncio.wait_for(self._queue.join(), timeout=10)
            except TimeoutError:
                log.warning("closing with %d Discord events parsed but not stored", self._queue.qsize())
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def sweep(self, memory: Memory, conversation: ConversationRef, days: int) -> SweepReport:
        """The missed-deletion sweep of one Discord conversation (``connectors.sweep``);
        logs in over REST first when the connector was not started (``stashbird sweep``)."""
        if self.client.user is None:
            self.endpoints.apply()
            await _login(self.client, self.endpoints.token)
        return await sweep_discord_conversation(memory, self.client.http, conversation, days)

    # --- events in ---------------------------------------------------------------------

    def _on_frame(self, frame: dict[str, Any]) -> None:
        """Every frame: the session's health; the dispatches memory cares about, parsed in
        gateway order, synchronously (``_store`` stores in the same order)."""
        session = self.heartbeat.observe(frame, time.monotonic())
        if session is not None:
            self._session_started(session, frame.get("d"))
        user = self.client.user
        if frame.get("op") != 0 or frame.get("t") not in PARSED or user is None:
            return
        data = frame.get("d") or {}
        try:
            guild_id = str(data.get("guild_id") or "")
            guild = guild_info(self.client.get_guild(int(guild_id))) if guild_id.isdigit() else None
            ws = self.client.ws
            delivery = f"{ws.session_id if ws is not None else None}:{frame.get('s')}"
            events = payloads.dispatch(frame["t"], data, str(user.id), guild, delivery)
        except Exception as error:  # noqa: BLE001 - one payload never stops the stream
            self._frame_fault(str(frame["t"]), frame.get("s"), data, error)
            return
        for event in events:
            self._queue.put_nowait((event, None))

    def _frame_fault(self, name: str, sequence: int | None, data: Any, error: BaseException) -> None:
        """A frame that could not be read (by our parser or discord.py's): one line with
        its type, id and reason, one count; a frame both refused is reported once."""
        if (name, sequence) == self._last_fault and sequence is not None:
            return
        self._last_fault = (name, sequence)
        PARSE_ERRORS.labels(payloads.PLATFORM, name).inc()
        frame_id = data.get("id") if isinstance(data, Mapping) else None
        reason = str(error) if isinstance(error, ValidationError) else f"{type(error).__name__}: {error}"
        log.warning("discord %s frame %s (sequence %s) skipped: %s", name, frame_id, sequence, reason)
        log.debug("the %s frame's error", name, exc_info=error)

    def _session_started(self, kind: str, data: Any) -> None:
        """A READY or RESUMED: a reconnect when it is not the first; a READY after one is
        a new session, so the events of the gap are gone: sweep its servers."""
        self.sessions += 1
        if self.sessions == 1:
            return
        RECONNECTS.labels(payloads.PLATFORM).inc()
        if kind == "ready" and self.policy.gap_sweep_days > 0:
            listed = data.get("guilds") if isinstance(data, Mapping) else None
            guilds = {str(g.get("id")) for g in listed or [] if isinstance(g, Mapping)}
            self._gap_sweep = asyncio.create_task(self._sweep_gap(guilds, self._gap_sweep))

    async def _sweep_gap(self, guilds: set[str], previous: asyncio.Task[None] | None) -> None:
        """The missed-deletion sweep of the conversations of ``guilds`` (after an earlier
        one still running), once the events parsed before it are in the inbox."""
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)

        async def one(memory: Memory, conversation: ConversationRef, days: int) -> SweepReport:
            if conversation.workspace_id not in guilds:
                return SweepReport(str(conversation))
            return await self.sweep(memory, conversation, days)

        try:
            await self.settled()
            reports = await sweep_platform(self.service.memory, self.name, one, self.policy.gap_sweep_days)
        except Exception as error:  # noqa: BLE001 - the scheduled sweep catches up
            log.warning("the Discord sweep after a gap failed: %s", error)
            return
        forgotten, dropped = sum(len(r.forgotten) for r in reports), sum(r.dropped for r in reports)
        self.service.removals += forgotten + dropped
        log.info(
            "Discord: a new session after a gap; swept %d servers: %d forgotten, %d dropped", len(guilds), forgotten, dropped
        )

    async def _store(self) -> None:
        """Hand queued events to the service in order; a failing store is retried (the
        database may be briefly away), never dropped."""
        delay = 0.5
        while True:
            event, stored = await self._queue.get()
            while True:
                try:
                    new = await self.service.accept(event)
                    if stored is not None and not stored.done():
                        stored.set_result(new)
                    delay = 0.5
                    break
                except Exception as error:  # noqa: BLE001 - keep the event and retry
                    log.warning("storing discord event %s failed, retrying: %s", event.event_id, error)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 30.0)
            self._queue.task_done()

    async def settled(self) -> None:
        """Wait until every event parsed so far has been stored (tests, shutdown)."""
        await self._queue.join()

    async def _on_command(self, interaction: discord.Interaction[Any]) -> None:
        """Store the command behind the events that came before it, then defer
        ephemerally; a replayed interaction (the inbox has it) gets nothing. If storing
        takes longer than Discord allows, defer anyway: the inbox still takes it once, and
        a replay is then refused by Discord itself (already acknowledged)."""
        event = payloads.admin_command(interaction_payload(interaction))
        if event is None:
            return
        deferred = self._deferring.setdefault(event.event_id, asyncio.Event())
        try:
            stored: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            self._queue.put_nowait((event, stored))
            try:
                new = await asyncio.wait_for(asyncio.shield(stored), DEFER_WITHIN)
            except TimeoutError:
                new = True
            if not new:
                log.info("discord interaction %s replayed: already taken, not answered again", interaction.id)
                return
            await interaction.response.defer(ephemeral=True, thinking=True)
        except discord.HTTPException as error:
            if error.code != ALREADY_ACKNOWLEDGED:
                raise
            log.info("discord interaction %s was acknowledged before (a replay)", interaction.id)
        finally:
            deferred.set()
            self._deferring.pop(event.event_id, None)

    # --- replies out ------------------------------------------------------------------

    async def describe(self, conversation: ConversationRef, author: Author) -> Author:
        """Discord payloads name the author and carry their role: nothing to look up."""
        return replace(author, name=author.name or author.id, role=author.role or "user")

    async def deliver(self, reply: Reply) -> None:
        body = payloads.reply_body(reply)
        handle = reply.target.handle
        if handle.get("token"):  # an interaction: replace the deferred "thinking" reply
            deferring = self._deferring.get(payloads.command_event_id(handle.get("interaction_id", "")))
            if deferring is not None:  # stored before deferring: let the defer go first
                await asyncio.wait_for(deferring.wait(), 10)
            route = Route(
                "PATCH",
                "/webhooks/{application_id}/{token}/messages/@original",
                application_id=handle["application_id"],
                token=handle["token"],
            )
            body.pop("flags", None)
        else:
            route = Route("POST", "/channels/{channel_id}/messages", channel_id=reply.conversation.channel_id)
        await self._post(route, body)

    async def _post(self, route: Route, body: dict[str, Any]) -> None:
        """One REST request, however long Discord rate-limits it (up to ``REPLY_PATIENCE``).
        discord.py waits out each 429 itself (per route and global, by ``retry_after``),
        but raises after five tries; then this waits as Discord asks and tries again."""
        waited = 0.0
        while True:
            try:
                await self.client.http.request(route, json=body)
                return
            except discord.HTTPException as error:
                wait = retry_after(error.response.headers) if error.status == 429 else None
                if wait is None or waited + wait > REPLY_PATIENCE:
                    raise
                log.info("Discord still rate-limits %s %s: trying again in %.2fs", route.method, route.path, wait)
                await asyncio.sleep(wait)
                waited += wait


def retry_after(headers: Mapping[str, str]) -> float:
    """Seconds a 429 asks to wait: ``X-RateLimit-Reset-After`` (precise), else
    ``Retry-After`` (whole seconds), else one second."""
    for name in ("X-RateLimit-Reset-After", "Retry-After"):
        try:
            return max(0.0, float(headers[name]))
        except (KeyError, ValueError):
            continue
    return 1.0


async def _login(client: discord.Client, token: str) -> None:
    try:
        await client.login(token)
    except discord.LoginFailure:
        await client.close()
        raise ConfigurationError("DISCORD_BOT_TOKEN was refused by Discord (401): check the bot token") from None


@asynccontextmanager
async def rest_client(endpoints: DiscordEndpoints) -> AsyncIterator[discord.Client]:
    """A client logged in over REST only, no gateway (backfill, the sweep from the CLI)."""
    endpoints.apply()
    client = discord.Client(intents=intents())
    await _login(client, endpoints.token)
    try:
        yield client
    finally:
        await client.close()


class DiscordSettings(Protocol):
    """The settings the connector reads (``bot.settings.Settings`` has them); a protocol,
    so that connectors do not import the process's settings."""

    @property
    def discord_bot_token(self) -> SecretStr | None: ...

    @property
    def discord_api_base(self) -> str: ...

    @property
    def discord_gateway_url(self) -> str: ...


def endpoints_from(settings: DiscordSettings) -> DiscordEndpoints:
    if not settings.discord_bot_token:
        raise ConfigurationError("DISCORD_BOT_TOKEN is not set: the Discord connector needs the bot's token")
    token = settings.discord_bot_token.get_secret_value()
    return DiscordEndpoints(token, settings.discord_api_base, settings.discord_gateway_url)
