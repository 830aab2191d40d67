"""Structured logs for the service process: one JSON object a line on stderr.

A record's structured fields (what a command passes in ``extra``: the memory core's door
adds operation, conversation, principal, elapsed_ms and outcome) are printed beside the
message. Stashbird's own loggers (``memory``, ``connectors``, ``jobs``, ``bot``) log at
``level``; every library (the embedded server, Alembic, APScheduler, httpx, discord.py, slack-bolt)
at WARNING, unless ``--debug`` or STASHBIRD_LOG_LEVEL=DEBUG asks for everything.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

OURS = ("memory", "connectors", "jobs", "bot")
_PLAIN = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields a record carries beyond the standard ones. Pure."""
    return {k: v for k, v in vars(record).items() if k not in _PLAIN and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in fields(record).items() if k not in entry})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_json_logging(level: int = logging.INFO) -> None:
    """JSON lines on stderr: ours at ``level``, libraries at WARNING (all at DEBUG when
    ``level`` is DEBUG)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level if level <= logging.DEBUG else max(level, logging.WARNING))
    for name in OURS:
        logging.getLogger(name).setLevel(level)
