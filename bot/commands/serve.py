"""``stashbird serve``: run the chat service until SIGTERM or SIGINT (bot/service.py)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any

from bot.logs import configure_json_logging
from bot.runtime import memory_from_settings, settle_heap
from bot.service import running
from bot.settings import Settings


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="address to listen on (default STASHBIRD_HTTP_HOST)")
    parser.add_argument("--port", type=int, help="port to listen on (default STASHBIRD_HTTP_PORT; 0 picks a free one)")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    configure_json_logging(logging.DEBUG if args.debug else logging.getLevelNamesMapping()[settings.chat.log_level])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with memory_from_settings(settings) as memory, running(memory, settings, args.host, args.port) as state:
        settle_heap()
        print(f"stashbird serve: listening on port {state.port}", flush=True)
        await stop.wait()
        processed = state.service.processed
    return {"stopped": True, "processed": processed}


def render(result: dict[str, Any]) -> str:
    return f"stopped after processing {result['processed']} events"
