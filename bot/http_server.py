"""The HTTP endpoint of ``stashbird serve`` (the Slack events path, ``/healthz`` and
``/metrics``), on a thread of its own with its own event loop and database connections.

Why: an acknowledgement is a signature check, one inbox write and a 200 (target: well
under Slack's 3 seconds, p99 < 300 ms under a burst). The service's processing (storing
and embedding messages, forgetting, answering) runs on the main loop in steps that do not
yield for a long time; a request served on that loop waits for them. On its own thread it
waits only for its share of the interpreter (the GIL is handed over every few
milliseconds) and its own write. Events it stores wake the service on the main loop;
``/healthz`` asks the service there.

``/metrics`` is the Prometheus text format of connectors.metrics; the gauges read from
the database (inbox, outbox, consolidation backlog, backlog shedding) are refreshed on
each scrape, on this thread's connections, so a scrape never waits for processing.

``/healthz`` adds the consolidation backlog to the service's report, read here on this
thread: past STASHBIRD_BACKLOG_SHED_MESSAGES the scheduler sheds derived work (jobs/shed.py),
and the report says so (``status`` "degraded", a line in ``warnings``) without failing the
check: messages are still stored and searchable, only consolidation is behind.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from connectors import metrics
from connectors.intake import ThreadIntake
from connectors.service import ChatService
from connectors.slack.app import SlackConnector
from jobs.shed import SHEDDABLE, shed_jobs, shed_warning
from memory import Memory, Principal, Waiting, inbox_backlog, waiting_backlog

Health = Callable[[], Awaitable[dict[str, Any]]]
Refresh = Callable[[], Awaitable[None]]
SCRAPE = Principal.job("metrics")
log = logging.getLogger(__name__)


def web_app(health: Health, slack: SlackConnector | None, events_path: str, refresh: Refresh | None = None) -> web.Application:
    app = web.Application()

    async def healthz(request: web.Request) -> web.Response:
        report = await health()
        return web.json_response(report, status=200 if report["ok"] else 503, dumps=lambda v: json.dumps(v, default=str))

    async def scrape(request: web.Request) -> web.Response:
        if refresh is not None:
            try:
                await refresh()
            except Exception as error:  # noqa: BLE001 - the counters are still worth serving
                log.warning("metrics: the database gauges were not refreshed: %s", error)
        return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", scrape)
    if slack is not None:
        handler = slack.handle_http

        async def events(request: web.Request) -> web.StreamResponse:
            started = time.perf_counter()
            try:
                return await handler(request)
            finally:
                metrics.ACK_SECONDS.labels(slack.name).observe(time.perf_counter() - started)

        app.router.add_post(events_path, events)
        for path in slack.oauth_paths:  # multi-workspace: the install flow
            app.router.add_get(path, slack.handle_oauth)
    return app


def _lag(waiting: Waiting) -> float | None:
    return (datetime.now(UTC) - waiting.oldest).total_seconds() if waiting.oldest is not None else None


async def refresh_gauges(memory: Memory, shed_messages: int) -> None:
    """The gauges that are database state: inbox and outbox, consolidation backlog and
    lag, which derived work is shed."""
    metrics.observe_backlog(await inbox_backlog(memory, principal=SCRAPE))
    waiting = await waiting_backlog(memory, principal=SCRAPE)
    shed = shed_jobs(waiting.messages, shed_messages)
    metrics.observe_consolidation(waiting.messages, _lag(waiting), {job: job in shed for job in sorted(SHEDDABLE)})


async def with_backlog(report: dict[str, Any], memory: Memory, shed_messages: int) -> dict[str, Any]:
    """The service's health report with the consolidation backlog: ``status`` "ok",
    "degraded" (derived work shed: a warning, the check still passes) or "failing"
    (``ok`` false). A backlog that cannot be read adds nothing: the service's report
    names the database already."""
    warnings: list[str] = []
    try:
        waiting = await waiting_backlog(memory, principal=SCRAPE)
    except Exception as error:  # noqa: BLE001 - health reports, it does not fail on a read
        log.warning("health: the consolidation backlog was not read: %s", error)
    else:
        shed = shed_jobs(waiting.messages, shed_messages)
        lag = _lag(waiting)
        report["consolidation"] = {
            "waiting_messages": waiting.messages,
            "conversations": waiting.conversations,
            "oldest_seconds": round(lag, 3) if lag is not None else None,
            "shed_threshold": shed_messages,
            "shedding": sorted(shed),
        }
        warning = shed_warning(waiting.messages, shed_messages)
        warnings += [warning] if warning else []
    report["warnings"] = warnings
    report["status"] = "failing" if not report["ok"] else "degraded" if warnings else "ok"
    return report


class HttpThread:
    """``await start()`` returns the port once the thread listens; ``await stop()`` stops
    taking requests, lets the ones in hand finish and closes the thread's connections."""

    def __init__(
        self,
        memory: Memory,
        service: ChatService,
        slack: SlackConnector | None,
        events_path: str,
        host: str,
        port: int,
        shed_messages: int = 0,
    ) -> None:
        """``shed_messages``: the scheduler's backlog shedding threshold, for ``/healthz``
        and ``/metrics`` (0: shedding off)."""
        self.memory, self.service, self.slack = memory, service, slack
        self.events_path, self.host, self.port = events_path, host, port
        self.shed_messages = shed_messages
        self._ready: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._stopping: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._thread = threading.Thread(target=self._main, name="stashbird-http", daemon=True)
        self._service_loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> int:
        self._service_loop = asyncio.get_running_loop()
        self._thread.start()
        self.port = await asyncio.wrap_future(self._ready)
        return self.port

    async def stop(self) -> None:
        if self._stopping is not None:
            loop, stop = self._stopping
            loop.call_soon_threadsafe(stop.set)
        await asyncio.to_thread(self._thread.join)

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        service_loop = self._service_loop
        assert service_loop is not None
        try:
            memory = await self.memory.on_this_loop()
        except BaseException as error:
            self._ready.set_exception(error)
            return
        try:
            # Slack's HTTP events (Socket Mode's arrive on the service's loop, through the service)
            events = self.slack if self.slack is not None and not self.slack.config.app_token else None
            if events is not None:
                events.intake = ThreadIntake(memory, self.service, service_loop)

            async def health() -> dict[str, Any]:
                report = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.service.health(), service_loop))
                return await with_backlog(report, memory, self.shed_messages)

            async def refresh() -> None:
                await refresh_gauges(memory, self.shed_messages)

            runner = web.AppRunner(web_app(health, events, self.events_path, refresh), access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
            stop = asyncio.Event()
            self._stopping = (asyncio.get_running_loop(), stop)
            self._ready.set_result(runner.addresses[0][1])
            await stop.wait()
            await site.stop()
            await runner.cleanup()
        except BaseException as error:
            if not self._ready.done():
                self._ready.set_exception(error)
            raise
        finally:
            await memory.close_database()  # the embedder is the service's: not closed here
