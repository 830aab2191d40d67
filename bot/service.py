"""The service process (``stashbird serve``): the configured connectors, the inbox
worker, the periodic missed-deletion sweep and an HTTP endpoint, around one Memory.

HTTP: ``POST`` on the Slack events path goes to Bolt (signature checked, the event
stored in the inbox, then acknowledged); ``GET /healthz`` answers 200 when the database
answers and every connector is connected, else 503, with the inbox backlog either way.

Shutdown (SIGTERM, or leaving ``running``): the HTTP site stops taking requests first,
then the worker lets each conversation finish the event in hand and leaves the rest in
the inbox, claimable by any other process or the next start; then connectors close.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web

from bot.settings import Settings
from connectors.service import ChatService, ServiceConfig
from connectors.slack.app import SlackConfig, SlackConnector
from connectors.slack.sweep import sweep_slack
from memory import Memory, StashbirdError

log = logging.getLogger(__name__)


@dataclass
class Running:
    service: ChatService
    slack: SlackConnector | None
    port: int
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


def slack_connector(service: ChatService, settings: Settings) -> SlackConnector | None:
    """The Slack connector when a bot token is set (the signing secret is then required)."""
    if not settings.slack_bot_token:
        return None
    if not settings.slack_signing_secret and not settings.slack_app_token:
        raise StashbirdError("SLACK_SIGNING_SECRET is required with SLACK_BOT_TOKEN (or SLACK_APP_TOKEN for Socket Mode)")
    return SlackConnector(
        service,
        SlackConfig(
            bot_token=settings.slack_bot_token,
            signing_secret=settings.slack_signing_secret or "",
            api_url=settings.slack_api_url,
            app_token=settings.slack_app_token,
        ),
    )


def service_config(settings: Settings) -> ServiceConfig:
    return ServiceConfig(admin_ids=settings.admins, concurrency=settings.workers)


def web_app(service: ChatService, slack: SlackConnector | None, events_path: str) -> web.Application:
    app = web.Application()

    async def healthz(request: web.Request) -> web.Response:
        health = await service.health()
        return web.json_response(health, status=200 if health["ok"] else 503, dumps=lambda v: json.dumps(v, default=str))

    app.router.add_get("/healthz", healthz)
    if slack is not None:
        app.router.add_post(events_path, slack.handle_http)
    return app


async def _sweep_every(slack: SlackConnector, memory: Memory, days: int, hours: float) -> None:
    while True:
        await asyncio.sleep(hours * 3600)
        try:
            reports = await sweep_slack(memory, slack, days)
            forgotten = sum(len(r.forgotten) for r in reports)
            log.info("sweep: %d conversations, %d missed deletions forgotten", len(reports), forgotten)
        except Exception:  # noqa: BLE001 - a failed sweep is logged and tried again next time
            log.exception("sweep failed")


@asynccontextmanager
async def running(memory: Memory, settings: Settings, host: str | None = None, port: int | None = None) -> AsyncIterator[Running]:
    """Start everything; on exit shut down gracefully (see the module doc)."""
    service = ChatService(memory, config=service_config(settings))
    slack = slack_connector(service, settings)
    if slack is not None:
        service.add_platform(slack)
        await slack.start()
    runner = web.AppRunner(web_app(service, slack, settings.slack_events_path), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host or settings.http_host, settings.http_port if port is None else port)
    await site.start()
    state = Running(service, slack, runner.addresses[0][1])
    state.tasks.append(asyncio.create_task(service.run()))
    if slack is not None and settings.sweep_hours > 0:
        state.tasks.append(asyncio.create_task(_sweep_every(slack, memory, settings.sweep_days, settings.sweep_hours)))
    log.info("serving on port %d", state.port)
    try:
        yield state
    finally:
        await site.stop()
        service.stop()
        for task in state.tasks[1:]:
            task.cancel()
        await asyncio.gather(*state.tasks, return_exceptions=True)
        if slack is not None:
            await slack.close()
        await runner.cleanup()
