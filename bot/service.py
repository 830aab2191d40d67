"""The service process (``stashbird serve``): the configured connectors (Slack when
``SLACK_BOT_TOKEN`` is set, Discord when ``DISCORD_BOT_TOKEN`` is), the inbox worker,
the scheduler (jobs/: consolidation, communities, each connector's missed-deletion
sweep and the VACUUM after chat deletions, registered here) and an HTTP endpoint,
around one Memory.

HTTP (bot/http_server.py, on a thread of its own so that acknowledgements never wait for
processing): ``POST`` on the Slack events path goes to Bolt (signature checked, the event
stored in the inbox, then acknowledged); ``GET /healthz`` answers 200 when the database
answers, every connector is connected and the inbox is not stuck, else 503 naming what
is wrong, with the inbox and consolidation backlogs either way (past
STASHBIRD_BACKLOG_SHED_MESSAGES: still 200, ``status`` "degraded" and a warning); ``GET /metrics`` is the Prometheus text.

Shutdown (SIGTERM, or leaving ``running``): the HTTP site stops taking requests first,
then the worker lets each conversation finish the event in hand and leaves the rest in
the inbox, claimable by any other process or the next start; then connectors close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.http_server import HttpThread
from bot.settings import ChatSettings, Settings, revealed
from connectors.discord.client import DiscordConnector
from connectors.discord.gateway import GatewayPolicy
from connectors.discord.rest import endpoints_from
from connectors.service import ChatService, Platform, ServiceConfig
from connectors.slack.app import SlackConfig, SlackConnector
from connectors.slack.installations import OAuthConfig
from connectors.sweep import SWEEP, SweepLimit, SweepReport, set_limit, sweep_platform
from jobs import Job, Scheduler, WorkItem
from memory import ConversationRef, Memory, Principal, StashbirdError, conversations, resolve_conversation, vacuum

log = logging.getLogger(__name__)
CLEANUP = Principal.job("vacuum-after-deletions")


class Connector(Platform, Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...


@dataclass
class Running:
    service: ChatService
    slack: SlackConnector | None
    port: int
    connectors: list[Connector] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    scheduler: Scheduler | None = None


def service_config(chat: ChatSettings) -> ServiceConfig:
    set_limit(SweepLimit(chat.sweep_max_share, chat.sweep_min_missing))
    return ServiceConfig(
        admin_ids=chat.admins,
        concurrency=chat.workers,
        stuck_seconds=chat.inbox_stuck_seconds,
        reply_give_up_seconds=chat.reply_give_up_seconds,
        on_member_leave=chat.on_member_leave,
        on_bot_removed=chat.on_bot_removed,
    )


def slack_connector(service: ChatService, chat: ChatSettings) -> SlackConnector | None:
    """The Slack connector: one workspace with a bot token (the signing secret is then
    required), many with the app's OAuth client id and secret (installations stored in
    the database)."""
    oauth = bool(chat.slack_client_id or chat.slack_client_secret)
    if not chat.slack_bot_token and not oauth:
        return None
    if chat.slack_bot_token and oauth:
        raise StashbirdError("set SLACK_BOT_TOKEN (one workspace) or SLACK_CLIENT_ID and SLACK_CLIENT_SECRET (many), not both")
    if oauth and not (chat.slack_client_id and chat.slack_client_secret and chat.slack_signing_secret):
        raise StashbirdError("SLACK_CLIENT_ID, SLACK_CLIENT_SECRET and SLACK_SIGNING_SECRET are required together")
    if not chat.slack_signing_secret and not chat.slack_app_token:
        raise StashbirdError("SLACK_SIGNING_SECRET is required with SLACK_BOT_TOKEN (or SLACK_APP_TOKEN for Socket Mode)")
    return SlackConnector(
        service,
        SlackConfig(
            bot_token=revealed(chat.slack_bot_token),
            signing_secret=revealed(chat.slack_signing_secret) or "",
            api_url=chat.slack_api_url,
            app_token=revealed(chat.slack_app_token),
            gap_sweep_days=chat.sweep_days,
            oauth=slack_oauth(service, chat) if oauth else None,
        ),
    )


def slack_oauth(service: ChatService, chat: ChatSettings) -> OAuthConfig:
    url = service.memory.database_url
    secret = revealed(chat.slack_client_secret)
    return OAuthConfig(str(chat.slack_client_id), str(secret), url, chat.slack_forget_on_uninstall)


async def sweep_all(memory: Memory, connectors: list[Any], days: int) -> list[SweepReport]:
    """The missed-deletion sweep of every conversation of every connector that has one
    (a ``sweep(memory, conversation, days)`` method)."""
    reports: list[SweepReport] = []
    for connector in connectors:
        sweep = getattr(connector, "sweep", None)
        if sweep is not None:

            async def one(memory: Memory, conversation: ConversationRef, days: int, sweep: Any = sweep) -> SweepReport:
                return await sweep(memory, conversation, days)  # type: ignore[no-any-return]

            reports += await sweep_platform(memory, connector.name, one, days)
    return reports


def sweep_job(connector: Any, days: int, hours: float) -> Job:
    """The scheduler job sweeping each of a connector's conversations (one work item per
    conversation, claimed like any other, so several processes never sweep one twice)."""

    async def due(memory: Memory) -> list[WorkItem]:
        refs = await conversations(memory, principal=SWEEP, platform=connector.name)
        return [WorkItem(await resolve_conversation(memory, ref, principal=SWEEP), ref) for ref in refs]

    async def work(memory: Memory, item: WorkItem) -> dict[str, Any]:
        assert item.conversation is not None
        report: SweepReport = await connector.sweep(memory, item.conversation, days)
        connector.service.removals += len(report.forgotten) + report.dropped
        return report.as_dict()

    return Job(f"{connector.name}-sweep", due, work, interval=hours * 3600)


NO_CONNECTOR = (
    "no chat connector configured: set SLACK_BOT_TOKEN with SLACK_SIGNING_SECRET (or SLACK_APP_TOKEN), "
    "or DISCORD_BOT_TOKEN; serving the HTTP endpoints and background jobs only"
)


@dataclass
class VacuumAfterRemovals:
    """``VACUUM (ANALYZE)`` of the memory tables after deletions that came from the chat
    (events, the sweep), as ``stashbird forget`` runs it after each deletion from the
    command line: dead row versions holding deleted text, their index entries and the
    planner statistics go (memory.store.erasure). Batched: one VACUUM covers every
    deletion this process made before it started, and runs at most every ``seconds``
    (a VACUUM reads whole tables). One claimed work item (conversation id 0), so processes
    never vacuum at once; each process vacuums after its own deletions. A process that
    dies between a deletion and its VACUUM leaves that to Postgres's autovacuum."""

    service: ChatService
    seconds: float
    vacuumed: int = 0  # the service's removal count the last VACUUM covered

    async def due(self, memory: Memory) -> list[WorkItem]:
        return [WorkItem(0)] if self.service.removals > self.vacuumed else []

    async def work(self, memory: Memory, item: WorkItem) -> dict[str, Any]:
        covered = self.service.removals
        report = await vacuum(memory, principal=CLEANUP)
        self.vacuumed = covered
        return {"removals": covered, "seconds": report.seconds, "tables": len(report.tables)}

    def job(self) -> Job:
        return Job("vacuum", self.due, self.work, interval=self.seconds)


def scheduler_for(memory: Memory, settings: Settings, service: ChatService, connectors: list[Any]) -> Scheduler | None:
    """The core's jobs plus a sweep per connector that has one (with ``STASHBIRD_SERVE_JOBS``),
    and the VACUUM after chat deletions (always: it follows this process's deletions)."""
    scheduler = Scheduler(memory, settings.jobs, jobs=None if settings.chat.serve_jobs else [])
    if settings.chat.serve_jobs and settings.chat.sweep_hours > 0:
        for connector in connectors:
            if getattr(connector, "sweep", None) is not None:
                scheduler.register(sweep_job(connector, settings.chat.sweep_days, settings.chat.sweep_hours))
    if settings.chat.vacuum_seconds > 0:
        scheduler.register(VacuumAfterRemovals(service, settings.chat.vacuum_seconds).job())
    return scheduler if scheduler.jobs else None


def build_connectors(service: ChatService, settings: Settings) -> tuple[SlackConnector | None, list[Connector]]:
    """The configured connectors, registered with the service."""
    slack = slack_connector(service, settings.chat)
    connectors: list[Connector] = [slack] if slack is not None else []
    if settings.chat.discord_bot_token:
        policy = GatewayPolicy(gap_sweep_days=settings.chat.sweep_days)  # the sweep after a gateway gap
        connectors.append(DiscordConnector(service, endpoints_from(settings.chat), policy))
    for connector in connectors:
        service.add_platform(connector)
    return slack, connectors


@asynccontextmanager
async def running(memory: Memory, settings: Settings, host: str | None = None, port: int | None = None) -> AsyncIterator[Running]:
    """Start everything; on exit shut down gracefully (see the module doc)."""
    service = ChatService(memory, config=service_config(settings.chat))
    slack, connectors = build_connectors(service, settings)
    if not connectors:
        log.warning(NO_CONNECTOR)
    for connector in connectors:
        await connector.start()
    http = HttpThread(
        memory,
        service,
        slack,
        settings.chat.slack_events_path,
        host or settings.chat.http_host,
        settings.chat.http_port if port is None else port,
        settings.jobs.shed_messages,
    )
    state = Running(service, slack, await http.start(), connectors)
    state.tasks.append(asyncio.create_task(service.run()))
    scheduler = scheduler_for(memory, settings, service, list(connectors))
    if scheduler is not None:
        scheduler.start()
    state.scheduler = scheduler
    log.info("serving on port %d", state.port)
    try:
        yield state
    finally:
        await http.stop()
        service.stop()
        if scheduler is not None:
            await scheduler.shutdown()
        await asyncio.gather(*state.tasks, return_exceptions=True)
        for connector in connectors:
            await connector.close()
