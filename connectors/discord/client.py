"""The Discord connector: a thin ``discord.Client`` shell around ``payloads``.

It takes every gateway dispatch as the raw frame (``socket_raw_receive``, handled inside
``dispatch`` before discord.py applies the frame to its cache, so frames are parsed in
gateway order against the cache as it was), turns it into normalised events and hands
them, in that order, to ``ChatService.accept``. ``/memory`` is an application command
(a command tree, declared in ``commands``): it is stored in the inbox (behind the events before it), deferred
ephemerally (Discord wants an answer within 3 seconds) and answered when the service
has run it. An interaction a gateway RESUME replays is the same inbox event
(``<interaction id>:command``): it is neither deferred nor run again. Replies are posted
with the bodies ``payloads.reply_body`` builds, over REST (``rest``: logging in, waiting
out rate limits, and the endpoints, which commands without a gateway use too).

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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

import discord
from discord import app_commands
from discord.http import Route

from connectors.discord import payloads
from connectors.discord.commands import MemoryCommands, interaction_payload
from connectors.discord.gateway import FaultReport, GatewayPolicy, GatewaySupervisor, Heartbeat, intents, isolate_parsers
from connectors.discord.payloads import GuildInfo
from connectors.discord.rest import DiscordEndpoints, login, post
from connectors.discord.sweep import sweep_discord_conversation
from connectors.events import Author, ChatEvent, Reply, WorkspaceChange
from connectors.metrics import CONNECTOR_UP, PARSE_ERRORS, RECONNECTS
from connectors.service import ChatService
from connectors.sweep import SweepReport, sweep_platform
from memory import ConversationRef, Memory, ValidationError

log = logging.getLogger(__name__)

DEFER_WITHIN = 2.0  # seconds to wait for a command to be stored before deferring anyway (Discord allows 3)
ALREADY_ACKNOWLEDGED = 40060  # Discord's error code for a second response to one interaction

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
        await login(self.client, self.endpoints.token)
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
            await login(self.client, self.endpoints.token)
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
        await post(self.client, route, body)
