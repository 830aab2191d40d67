"""The embedded Postgres (with pgvector) used when no DATABASE_URL is configured.

pgserver keeps a list of the processes using a data folder and stops the server only
when the last one exits, so a second ``stashbird`` command reuses a running server.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from urllib.parse import quote

import platformdirs


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("stashbird")) / "postgres"


def _server(data_dir: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pgserver

        data_dir.mkdir(parents=True, exist_ok=True)
        return pgserver.get_server(data_dir, cleanup_mode="stop")


def start_embedded(data_dir: Path, database: str = "stashbird") -> str:
    """Start (or join) the embedded server and return an asyncpg URL for ``database``."""
    server = _server(data_dir)
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
    if "(0 rows)" in exists:
        server.psql(f'CREATE DATABASE "{database}";')
    socket_dir = server.get_postmaster_info().socket_dir
    return f"postgresql+asyncpg://postgres@/{quote(database)}?host={socket_dir}"


def drop_embedded_database(data_dir: Path, database: str) -> None:
    _server(data_dir).psql(f'SET client_min_messages = warning; DROP DATABASE IF EXISTS "{database}" WITH (FORCE);')
