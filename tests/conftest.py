"""The kind of a test is its folder, and each test is marked with it (``pytest -m pure``):

- ``pure/``: no database, no server, no process of ours; the whole folder runs in seconds.
- ``database/``: a real Postgres (``memory``, ``database_url``, ``new_database``, ``cli_env``,
  ``pg_data_dir``, one conversation per test); no chat stand-in, no serve or jobs process.
- ``service/``: the chat service, the Slack and Discord connectors against their
  stand-ins (lab/standins/), ``stashbird serve`` and ``jobs`` processes, and the scripted
  LLM server itself.
- ``browser/``: the audit report rendered by headless Chromium (Debian's chromium package).
- ``cluster/``: needs a Citus cluster; also marked ``citus`` (``pytest -m citus``).
- ``faults/``: faults under load; also marked ``faults`` (``pytest -m faults``).
- ``architecture/``: checks that read the source tree and the docs (public imports, one
  writer per table, prompts, module sizes, the docs pages and the paths they name).

A module whose tests are of several kinds sits with its heaviest (pure < database <
service). ``citus`` and ``faults`` are left out of the default run (pyproject.toml);
``CLUSTER_MODULES`` below puts modules of the default run in the cluster suite too. The
modules here beside this one (clirun, hostile, plugins, routing, scratch, servers, shared_data)
and data/ support the tests.

Fixtures: a real embedded Postgres with pgvector (fresh data folder per test run),
migrated to head, the real local embedder, and one fresh conversation per test (memory
is scoped per conversation, so tests do not see each other's data).

``STASHBIRD_TEST_DATABASE_URL`` points the suite at another server instead (any
Postgres with pgvector, or a Citus coordinator): the tests use that database, and
scratch databases are made beside it on the same server. Tests that read the embedded
server's files skip there. ``pytest -m citus`` runs the cluster suite (tests/cluster/),
which needs that variable to name a Citus coordinator (see .ci/run)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

from clirun import stashbird  # noqa: E402
from scratch import scratch_folder  # noqa: E402

from bot.service import Running, running  # noqa: E402
from connectors.discord.client import DiscordConnector  # noqa: E402
from connectors.discord.gateway import GatewayPolicy  # noqa: E402
from connectors.discord.payloads import conversation as discord_conversation  # noqa: E402
from connectors.discord.rest import DiscordEndpoints  # noqa: E402
from connectors.service import ChatService, ServiceConfig  # noqa: E402
from lab.standins.discord_standin import MANAGE_GUILD, DiscordStandIn, User, until  # noqa: E402
from lab.standins.scripted_llm import ScriptedLLMServer  # noqa: E402
from lab.standins.slack_standin import SlackStandIn, service_settings  # noqa: E402
from memory import (  # noqa: E402
    OfflineExtractor,
    Principal,
    UnknownConversation,
    ask,
    citus_plan,
    consolidate,
    forget,
    ingest,
    messages,
    validate_message,
)
from memory.core import Memory, open_memory  # noqa: E402
from memory.models.embedder import LocalEmbedder  # noqa: E402
from memory.models.llm import LLMClient  # noqa: E402
from memory.store.citus import read_catalogue  # noqa: E402
from memory.store.conversations import ConversationRef, ensure_conversation  # noqa: E402
from memory.store.database import async_url  # noqa: E402
from memory.store.embedded import start_embedded  # noqa: E402
from tests.plugins import PROJECT, shadow_metadata  # noqa: E402
from tests.routing import TESTS, Capture, explainable, replayed, task_count  # noqa: E402
from tests.servers import create_database, drop_database, dsn  # noqa: E402

# Another server for the suite (unset: the embedded server, started per run).
TEST_DATABASE_URL = os.environ.get("STASHBIRD_TEST_DATABASE_URL") or None
# Modules of the default suite (file names, in whichever folder) that the cluster suite runs
# too (``-m citus`` selects them when the suite points at another server): locks, discovery, the scheduler's claims with
# two processes, the jobs and audit commands, the chat service's inbox, opting out and
# retention, the order of community regeneration and cold communities.
CLUSTER_MODULES = frozenset(
    {
        "test_locks.py",
        "test_discovery.py",
        "test_jobs_processes.py",
        "test_cli_jobs.py",
        "test_cli_audit.py",
        "test_audit_report.py",  # tests/browser/: the audit report in Chromium, once in test_cli_audit.py
        "test_connector_service.py",
        "test_nodes.py",
        "test_privacy_cluster.py",
        "test_community_use.py",
    }
)


TESTS_DIR = Path(__file__).resolve().parent
# Each folder of tests, its kind: the marker its tests get (the module docstring says which is which).
KINDS = ("pure", "database", "service", "browser", "cluster", "faults", "architecture")
# The folders of the suites that run on their own, and the marker that keeps them out of the default run.
OWN_SUITES = {"cluster": pytest.mark.citus, "faults": pytest.mark.faults}


@pytest.hookimpl(tryfirst=True)  # before pytest's own, which deselects by ``-m``
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its folder's kind (and ``citus``/``faults`` for those suites'
    folders), and the cluster modules with ``citus`` when the suite points at another
    server."""
    unknown = CLUSTER_MODULES - {path.name for path in TESTS_DIR.glob("*/test_*.py")}
    if unknown:
        raise pytest.UsageError(f"tests/conftest.py: CLUSTER_MODULES names no test module {sorted(unknown)}")
    for item in items:
        path = item.path.resolve()
        if not path.is_relative_to(TESTS_DIR):
            continue
        kind = path.relative_to(TESTS_DIR).parts[0]
        if kind not in KINDS:
            raise pytest.UsageError(f"{item.nodeid}: move it to the folder of its kind under tests/: {', '.join(KINDS)}")
        item.add_marker(getattr(pytest.mark, kind))
        if kind in OWN_SUITES:
            item.add_marker(OWN_SUITES[kind])
        if TEST_DATABASE_URL is not None and item.path.name in CLUSTER_MODULES:
            item.add_marker(pytest.mark.citus)


async def _distributed_tables(urls: set[str]) -> frozenset[str]:
    """The distributed tables (memory.store.citus) of the databases the tests used."""
    tables: set[str] = set()
    for url in urls:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as connection:
                catalogue = await read_catalogue(connection)
                tables.update(name for name in catalogue.tables if catalogue.distributed(name))
        except (OSError, DBAPIError):  # a scratch database a test dropped or never created
            pass
        finally:
            await engine.dispose()
    return frozenset(tables)


async def _explained(capture: Capture, distributed: frozenset[str]) -> list[str]:
    """On a Citus test database, the cluster's own answer: EXPLAIN of every served
    statement pinned to a conversation must send one task to one worker."""
    if TEST_DATABASE_URL is None or not distributed:
        return []
    connection = await asyncpg.connect(dsn(async_url(TEST_DATABASE_URL)))
    lines = []
    planned = 0
    try:
        if await connection.fetchval("SELECT count(*) FROM pg_extension WHERE extname = 'citus'") == 0:
            return []
        for statement, summaries in capture.executed.items():
            if all(o.startswith(TESTS) for o in capture.origins[statement]) or not explainable(statement, distributed):
                continue
            for summary in sorted(summaries, key=repr)[:3]:
                try:
                    plan = await connection.fetchval("EXPLAIN (FORMAT JSON) " + statement, *replayed(summary))
                except asyncpg.PostgresError as error:
                    lines.append(f"EXPLAIN failed ({type(error).__name__}: {error})\n    {' '.join(statement.split())[:300]}")
                    break
                tasks = task_count(json.loads(plan) if isinstance(plan, str) else plan)
                planned += tasks is not None
                if tasks is not None and tasks != 1:
                    lines.append(f"{tasks} tasks on the cluster\n    {' '.join(statement.split())[:300]}")
                    break
    finally:
        await connection.close()
    if not planned:
        lines.append("the cluster planned none of the served statements as distributed (is the database distributed?)")
    return lines


@pytest.fixture(scope="session", autouse=True)
async def routing_check() -> AsyncIterator[None]:
    """Every statement the suite executes must route to one shard under Citus
    (tests/routing.py); checked once, at the end of the session. On a Citus test
    database the cluster plans each one too (``_explained``)."""
    capture = Capture()
    event.listen(Engine, "before_cursor_execute", capture.record)
    yield
    event.remove(Engine, "before_cursor_execute", capture.record)
    distributed = await _distributed_tables(capture.urls)
    report = capture.report(distributed) + await _explained(capture, distributed)
    assert not report, "statements that would not route to one shard:\n" + "\n".join(report)


@pytest.fixture(scope="session")
def pg_data_dir() -> Path:
    """The embedded test server's folder (``scratch_folder``: a run leaves no 450 MB
    folder behind). Only the embedded server has one."""
    if TEST_DATABASE_URL is not None:
        pytest.skip("reads the embedded server's files (STASHBIRD_TEST_DATABASE_URL names another server)")
    return scratch_folder("stashbird-test-pg-")


@pytest.fixture(scope="session")
def database_url(request: pytest.FixtureRequest) -> str:
    if TEST_DATABASE_URL is not None:
        return async_url(TEST_DATABASE_URL)
    return start_embedded(request.getfixturevalue("pg_data_dir"), "stashbird_test")


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, database_url: str) -> None:
    """``stashbird`` commands run in this process use the test database."""
    monkeypatch.setenv("DATABASE_URL", database_url)


@pytest.fixture
def declared_plugins(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """``stashbird`` finds the plugin commands (``bench``) that pyproject.toml declares,
    whatever the installed metadata says (tests/plugins.py)."""
    shadow_metadata(monkeypatch, tmp_path_factory.mktemp("metadata"), PROJECT["entry-points"])


@pytest.fixture(scope="session")
def new_database(request: pytest.FixtureRequest):
    """Factory for an extra empty database on the test server (migration tests); on
    another server they are dropped at the end (the embedded one goes with its folder)."""
    made: list[str] = []

    def make() -> str:
        name = f"scratch_{uuid.uuid4().hex[:8]}"
        if TEST_DATABASE_URL is None:
            return start_embedded(request.getfixturevalue("pg_data_dir"), name)
        made.append(name)
        return create_database(async_url(TEST_DATABASE_URL), name)

    yield make
    for name in made:
        drop_database(async_url(TEST_DATABASE_URL or ""), name)


@pytest.fixture(scope="session")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


@pytest.fixture(scope="session")
async def memory(database_url: str, embedder: LocalEmbedder) -> Memory:
    """The test database migrated to head; on a Citus coordinator also distributed
    (``citus-plan --apply``), so the tests run on sharded tables."""
    handle = await open_memory(database_url, embedder)
    plan = await citus_plan(handle, principal=Principal.operator("test"))
    if plan.citus is not None:
        await citus_plan(handle, principal=Principal.operator("test"), apply=True)
    yield handle
    await handle.close()


@pytest.fixture
def conversation_ref() -> ConversationRef:
    return ConversationRef("test", "", f"c-{uuid.uuid4().hex[:12]}")


@pytest.fixture
async def conversation_id(memory: Memory, conversation_ref: ConversationRef) -> int:
    async with memory._sessions.begin() as session:
        return await ensure_conversation(session, conversation_ref)


@pytest.fixture
def scripted_llm() -> ScriptedLLMServer:
    """A started scripted OpenAI-compatible server on loopback, fresh per test."""
    with ScriptedLLMServer() as server:
        yield server


@pytest.fixture
async def llm_client(scripted_llm: ScriptedLLMServer) -> LLMClient:
    """The real LLM client pointed at ``scripted_llm``, with short backoff and a timeout
    that a loaded machine's first call still meets (a timeout test uses its own client)."""
    client = LLMClient(base_url=scripted_llm.base_url, api_key="test", model="scripted", timeout=10, max_retries=2, backoff=0.01)
    yield client
    await client.close()


@pytest.fixture
def llm_memory(memory: Memory, llm_client: LLMClient) -> Memory:
    """The shared test Memory with ``llm_client`` as its LLM (do not close it: the engine is shared)."""
    return dataclasses.replace(memory, llm=llm_client)


@dataclasses.dataclass
class Discord:
    """A stand-in Discord with one guild (two channels, four people) and the connector and
    chat service connected to it (fixture ``discord_env``)."""

    standin: DiscordStandIn
    connector: DiscordConnector
    service: ChatService
    guild: str
    general: str
    random: str
    owner: User
    bob: User
    carol: User
    mod: User

    async def settle(self) -> None:
        client = self.connector.client
        await until(lambda: client.ws is not None and (client.ws.sequence or 0) >= self.standin.sequence)
        await self.connector.settled()
        await self.service.drain()

    async def stored(self, channel: str) -> dict[str, str]:
        """message id -> text of what memory holds for a channel."""
        try:
            ref = discord_conversation(self.guild, channel)
            rows = await messages(self.service.memory, ref, principal=Principal.operator("test"))
        except UnknownConversation:
            return {}
        return {str(row["message_id"]): str(row["text"]) for row in rows}

    async def ask(self, channel: str, user: User, question: str) -> dict[str, Any]:
        """Mention the bot; return the reply it posted to that message."""
        asked = await self.standin.post(channel, user, f"<@{self.standin.bot.id}> {question}", mentions=[self.standin.bot])
        await self.settle()
        return next(m for m in self.standin.posted if (m.get("message_reference") or {}).get("message_id") == asked["id"])


@pytest.fixture
async def discord_env(memory: Memory) -> AsyncIterator[Discord]:
    async with discord_world(memory, DiscordStandIn()) as env:
        yield env


@pytest.fixture
def discord_worlds(memory: Memory) -> Callable[..., contextlib.AbstractAsyncContextManager[Discord]]:
    """``discord_world`` on the test Memory: ``async with discord_worlds(standin, policy) as env``."""
    return functools.partial(discord_world, memory)


@contextlib.asynccontextmanager
async def discord_world(
    memory: Memory, standin: DiscordStandIn, policy: GatewayPolicy | None = None, config: ServiceConfig | None = None
) -> AsyncIterator[Discord]:
    """``discord_env`` around a given stand-in (a short heartbeat, say), gateway policy
    and service settings (``config``: the admin is carol whatever it says)."""
    await standin.start()
    owner = User(standin.snowflake(), "olga")
    bob, carol = User(standin.snowflake(), "bob"), User(standin.snowflake(), "carol")
    mod = User(standin.snowflake(), "maya", permissions=MANAGE_GUILD)
    guild = standin.add_guild("Team", owner)
    for user in (bob, carol, mod):
        standin.add_member(guild, user)
    general, random = await standin.add_channel(guild, "general"), await standin.add_channel(guild, "random")
    service = ChatService(memory, config=dataclasses.replace(config or ServiceConfig(), admin_ids=frozenset({carol.id})))
    connector = DiscordConnector(service, DiscordEndpoints(standin.token, standin.rest_base, standin.gateway_url), policy)
    service.add_platform(connector)
    await connector.start()
    await standin.connected()  # parsing needs only the login's user and the guild cache, not READY's 2 s wait
    try:
        yield Discord(standin, connector, service, guild, general, random, owner, bob, carol, mod)
    finally:
        await connector.close()
        await standin.stop()


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    """The Slack stand-in (its Web API and the sending side of the Events API)."""
    async with SlackStandIn(admins={"UADMIN"}, names={"U1": "Maya", "U2": "Tom"}) as stand_in:
        yield stand_in


@pytest.fixture
async def served(memory: Memory, slack: SlackStandIn) -> AsyncIterator[Running]:
    """``stashbird serve`` in this process, taking the stand-in's signed HTTP events."""
    async with running(memory, service_settings(slack), "127.0.0.1", 0) as state:
        slack.events_url = f"http://127.0.0.1:{state.port}/slack/events"
        yield state


async def _consolidated(memory: Memory, ref: ConversationRef, rows: list[tuple[str, str, str]]) -> None:
    validated = [
        validate_message({"id": i, "author": a, "text": t, "ts": f"2026-02-0{n + 1}T10:00:00Z"})
        for n, (i, a, t) in enumerate(rows)
    ]
    await ingest(memory, ref, validated, principal=Principal.operator("test"))
    await consolidate(memory, ref, principal=Principal.operator("test"), extractor=OfflineExtractor())


@dataclasses.dataclass(frozen=True)
class Audited:
    """A conversation with a corrected fact, an answer and a deleted message (holding
    ``gone``), beside another conversation (holding ``foreign``), and its HTML report."""

    name: str
    ref: ConversationRef
    gone: str
    foreign: str
    report: Path


@pytest.fixture(scope="module")
async def audited(memory: Memory, database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Audited:
    """``Audited``, made once per module that asks (tests/database/test_cli_audit.py and
    the report in Chromium, tests/browser/test_audit_report.py)."""
    name = f"cli-audit-{uuid.uuid4().hex[:8]}"
    ref, other = ConversationRef.parse(name), ConversationRef("slack", "T9", f"C{uuid.uuid4().hex[:6]}")
    gone, foreign = f"zq{uuid.uuid4().hex[:10]}", f"zq{uuid.uuid4().hex[:10]}"
    await _consolidated(memory, other, [("1", "Zed", f"Zed keeps a boat in Oslo {foreign}.")])
    await _consolidated(
        memory,
        ref,
        [
            ("1", "Ann", "I live in Boston now."),
            ("2", "Bob", "Marco from the data team sits on the fourth floor."),
            ("3", "Ann", "Correction: I moved to Denver last month."),
            ("4", "Bob", f"I adopted a cat called Miso {gone}."),
        ],
    )
    await ask(memory, ref, "Where does Ann live?", principal=Principal.operator("test"))
    await forget(memory, ref, "4", principal=Principal.operator("test"))
    out = tmp_path_factory.mktemp("audit") / "report.html"
    written = stashbird(database_url, "audit", "report", "--conversation", name, "--out", str(out))
    assert written.returncode == 0, written.stderr
    return Audited(name, ref, gone, foreign, out)
