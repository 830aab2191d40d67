"""Start ``stashbird serve`` as a separate process against a Slack stand-in (tests that
kill it, and ``stashbird bench serve``)."""

from __future__ import annotations

import asyncio
import os
import sys

from lab.standins.slack_standin import SlackStandIn


async def start_serve(slack: SlackStandIn, database_url: str, **env: str) -> tuple[asyncio.subprocess.Process, int]:
    """The process and the port it listens on (it prints it once it is ready)."""
    environment = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SLACK_BOT_TOKEN": "xoxb-standin",
        "SLACK_SIGNING_SECRET": slack.signing_secret,
        "SLACK_API_URL": slack.api_url,
        "STASHBIRD_HTTP_HOST": "127.0.0.1",
        "STASHBIRD_SERVE_JOBS": "0",
        **env,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "serve",
        "--port",
        "0",
        env=environment,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 180)).decode()
    if "listening on port" not in line:
        process.kill()
        raise RuntimeError(f"stashbird serve did not start: {line!r}")
    return process, int(line.rsplit(" ", 1)[1])


async def stop_serve(process: asyncio.subprocess.Process, timeout: float = 30) -> int:
    """SIGTERM, then wait for the graceful exit (killed if it does not come)."""
    if process.returncode is None:
        process.terminate()
    try:
        return await asyncio.wait_for(process.wait(), timeout)
    except TimeoutError:
        process.kill()
        return await process.wait()
