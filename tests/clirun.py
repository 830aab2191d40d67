"""``stashbird ARGV`` in the test process: ``bot.cli.main`` on its own event loop, in a
thread (the tests' loop is running), with its exit code and captured output."""

from __future__ import annotations

import asyncio

import pytest

from bot.cli import main


async def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err
