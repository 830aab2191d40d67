"""Databases on a server the suite did not start (STASHBIRD_TEST_DATABASE_URL): a plain
scratch database beside the test database, and, on a Citus coordinator, a database made
on every node with both extensions and the workers registered (Citus keeps its node list
per database), as ../shared/citus/citus-cluster.sh makes its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import asyncpg
from sqlalchemy.engine import make_url

T = TypeVar("T")


def _blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to the end on a loop of its own (the fixtures that need it are
    called from inside the test's running loop)."""
    box: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            box.append(asyncio.run(coroutine))
        except BaseException as error:  # handed back to the caller's thread
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return box[0]


def _with_database(url: str, database: str, host: str | None = None, port: int | None = None) -> str:
    parsed = make_url(url).set(database=database)
    if host is not None:
        parsed = parsed.set(host=host, port=port)
    return parsed.render_as_string(hide_password=False)


def dsn(url: str) -> str:
    """asyncpg's own DSN for a SQLAlchemy URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _execute(url: str, *statements: str) -> list[Any]:
    connection = await asyncpg.connect(dsn(url))
    try:
        return [await connection.fetch(statement) for statement in statements]
    finally:
        await connection.close()


def create_database(url: str, name: str) -> str:
    """An empty database ``name`` on the server of ``url`` (on a Citus coordinator: on the
    coordinator only, a plain Postgres database); its URL."""
    _blocking(_execute(url, f'CREATE DATABASE "{name}"'))
    return _with_database(url, name)


def drop_database(url: str, name: str) -> None:
    _blocking(_execute(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _workers(url: str) -> list[tuple[str, int]]:
    rows = (await _execute(url, "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 ORDER BY nodeid"))[0]
    return [(str(row[0]), int(row[1])) for row in rows]


async def _create_cluster_database(url: str, name: str, citus: bool) -> str:
    workers = await _workers(url)
    coordinator = make_url(url)
    for host, port in [(coordinator.host, coordinator.port)] + workers:
        await _execute(_with_database(url, "postgres", host, port), f'CREATE DATABASE "{name}"')
        extensions = ("CREATE EXTENSION citus",) if citus or (host, port) in workers else ()
        await _execute(_with_database(url, name, host, port), *extensions, "CREATE EXTENSION vector")
    created = _with_database(url, name)
    if citus:
        await _join(created, workers)
    return created


async def _join(url: str, workers: list[tuple[str, int]]) -> None:
    coordinator = make_url(url)
    await _execute(
        url,
        f"SELECT citus_set_coordinator_host('{coordinator.host}', {coordinator.port})",
        *(f"SELECT citus_add_node('{host}', {port})" for host, port in workers),
    )


async def _drop_cluster_database(url: str, name: str) -> None:
    coordinator = make_url(url)
    for host, port in [(coordinator.host, coordinator.port)] + await _workers(url):
        await _execute(_with_database(url, "postgres", host, port), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def create_cluster_database(url: str, name: str, citus: bool = True) -> str:
    """A database ``name`` on every node of the Citus cluster whose coordinator ``url``
    names, with citus and vector, the workers registered; its URL. Without ``citus``
    the coordinator's is a plain Postgres database with vector (a server that is to
    become the coordinator: ``make_coordinator``)."""
    return _blocking(_create_cluster_database(url, name, citus))


async def _make_coordinator(url: str, cluster: str) -> None:
    await _execute(url, "CREATE EXTENSION citus")
    await _join(url, await _workers(cluster))


def make_coordinator(url: str, cluster: str) -> None:
    """Make the database of ``url``, made without citus, the coordinator of the workers
    that the coordinator ``cluster`` names (docs/guides/citus.md, step 2)."""
    _blocking(_make_coordinator(url, cluster))


def drop_cluster_database(url: str, name: str) -> None:
    _blocking(_drop_cluster_database(url, name))


def worker_url(url: str, index: int = 0) -> str:
    """``url`` with the host and port of the cluster's ``index``-th worker (a process
    connected there runs distributed queries itself: Citus syncs its metadata to them)."""
    host, port = _blocking(_workers(url))[index]
    return _with_database(url, make_url(url).database or "", host, port)
