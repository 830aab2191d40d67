"""``stashbird ARGV`` run by ``bot.cli.main`` in the test process: the same parser, exit
codes and output as the installed script, without a process start per command."""

from __future__ import annotations

import contextlib
import io
import os
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from bot.cli import main


class Run(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def stashbird(database_url: str | None, *args: str) -> Run:
    """``stashbird ARGS``, with DATABASE_URL set to ``database_url`` (None: the
    environment as the test left it). An argparse refusal is exit code 2 with its usage
    on standard error, as in a process."""
    out, err = io.StringIO(), io.StringIO()
    previous = os.environ.get("DATABASE_URL")
    if database_url is not None:
        os.environ["DATABASE_URL"] = database_url
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            # In a thread of its own: main() runs its own event loop, and an async test
            # already runs one in this thread.
            with ThreadPoolExecutor(1) as pool:
                code = pool.submit(_main, list(args)).result()
    finally:
        if previous is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = previous
    return Run(code, out.getvalue(), err.getvalue())


def _main(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exit:  # argparse refusing the arguments
        return exit.code if isinstance(exit.code, int) else 2
