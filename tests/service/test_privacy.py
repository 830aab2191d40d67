"""Opting out and retention windows (memory/privacy/commands.py) on the real database:
an opted-out person's new messages are never stored, on every path that stores
messages (the core's ingest, ``stashbird ingest``, a Slack export import, a Discord
export import, a Slack backfill), the flag holds across processes once ``set_optout``
returns, and opting back in stores again."""

from __future__ import annotations

import argparse
import importlib
import json
import random
import uuid
import zipfile
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from clirun import stashbird
from sqlalchemy import select

from bot.service import Running
from bot.settings import DatabaseSettings, Settings
from connectors import admin
from connectors.backfill import store
from connectors.discord.export import read_export as read_discord_export
from connectors.service import ChatService
from connectors.slack.app import SlackConfig, SlackConnector
from connectors.slack.backfill import SlackBackfill
from connectors.slack.payloads import conversation
from jobs import JobSettings, Scheduler
from jobs.work import next_look
from lab.probes import SuppliedEntity, SuppliedGraph, SuppliedRelation, load_supplied, mark_consolidated
from lab.standins.slack_standin import TEAM, SlackStandIn
from memory import (
    AccessDenied,
    ConversationRef,
    Memory,
    Principal,
    Retention,
    UnknownConversation,
    ValidationError,
    Workspace,
    about,
    apply_retention,
    backlog,
    defer_backlog,
    due_backlog,
    edit,
    facts,
    forgotten,
    ingest,
    messages,
    open_memory,
    optout_status,
    provenance,
    resolve_conversation,
    retention,
    set_optout,
    set_retention,
    stats,
    store_audit,
    validate_message,
    watch_retention_default,
)
from memory.store.schema import InboxEvent

if TYPE_CHECKING:
    from tests.conftest import Discord

TEST = Principal.operator("test")
T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
DATA = Path(__file__).parents[1] / "data"
import_command = importlib.import_module("bot.commands.import")


def uid(prefix: str = "U") -> str:
    return f"{prefix}{uuid.uuid4().hex[:9].upper()}"


def said(message_id: str, author: str, text: str, minutes: int = 0) -> dict[str, str]:
    return {"id": message_id, "author": author, "text": text, "ts": (T0 + timedelta(minutes=minutes)).isoformat()}


async def stored_ids(memory: Memory, ref: ConversationRef) -> set[str]:
    try:
        return {str(m["message_id"]) for m in await messages(memory, ref, principal=TEST)}
    except UnknownConversation:
        return set()


async def test_an_opted_out_persons_messages_are_not_stored_until_they_opt_back_in(memory: Memory) -> None:
    team, olive, ann = uid("T"), uid(), uid()
    workspace = Workspace("slack", team)
    general, other = ConversationRef("slack", team, "C1"), ConversationRef("slack", uid("T"), "C1")
    assert await set_optout(memory, olive, workspace=workspace, opted_out=True, principal=TEST)
    assert not await set_optout(memory, olive, workspace=workspace, opted_out=True, principal=TEST)  # already
    assert await optout_status(memory, olive, workspace=workspace, principal=TEST)

    batch = [said("1", ann, "Standup moves to ten."), said("2", olive, "I will be late, dentist at nine.", 1)]
    batch.append(said("3", ann, "Noted.", 2))
    report = await ingest(memory, general, [validate_message(m) for m in batch], principal=TEST)
    assert (report.stored, report.opted_out, report.attempted) == (2, 1, 3)
    assert await stored_ids(memory, general) == {"1", "3"}
    elsewhere = await ingest(memory, other, [validate_message(batch[1])], principal=TEST)  # another workspace
    assert elsewhere.stored == 1

    assert await set_optout(memory, olive, workspace=workspace, opted_out=False, principal=TEST)
    assert not await optout_status(memory, olive, workspace=workspace, principal=TEST)
    logged = [
        (e.action, e.about, e.principal)
        for e in (await store_audit(memory, principal=TEST)).entries
        if e.details == {"author": olive}
    ]
    assert logged == [
        ("optin", f"slack:{team}", "operator:test"),
        ("optout", f"slack:{team}", "operator:test"),
    ]  # newest first, once each
    later = said("4", olive, "Back from the dentist.", 3)
    again = await ingest(memory, general, [validate_message(m) for m in [batch[1], later]], principal=TEST)
    assert (again.stored, again.opted_out) == (2, 0)  # the earlier message, delivered again, is stored now too
    assert await stored_ids(memory, general) == {"1", "2", "3", "4"}

    # Opted out again, their edit of a message stored before is not stored, and the old text goes too.
    await set_optout(memory, olive, workspace=workspace, opted_out=True, principal=TEST)
    edited = await edit(memory, general, "4", "Back, and the dentist says hi.", principal=TEST)
    assert (edited.status, edited.retraction.documents_removed) == ("forgotten", 1)
    assert (await edit(memory, general, "1", "Standup moves to eleven.", principal=TEST)).status == "edited"  # Ann's
    assert await stored_ids(memory, general) == {"1", "2", "3"}
    assert (await provenance(memory, general, "4", principal=TEST)).status == "deleted"


async def test_the_flag_holds_in_another_process_once_set_optout_returns(memory: Memory) -> None:
    """Another process (its own pool and cache) that read the flags just before: a
    message it checks after ``set_optout`` returned is checked against the new flag."""
    team, olive = uid("T"), uid()
    ref, workspace = ConversationRef("slack", team, "C1"), Workspace("slack", team)
    other = await memory.on_this_loop()
    try:
        first = await ingest(other, ref, [validate_message(said("1", olive, "Before opting out."))], principal=TEST)
        assert first.stored == 1  # the other process has read (and cached) the flags
        await set_optout(memory, olive, workspace=workspace, opted_out=True, principal=TEST)
        second = await ingest(other, ref, [validate_message(said("2", olive, "After opting out.", 1))], principal=TEST)
        assert (second.stored, second.opted_out) == (0, 1)
    finally:
        await other.close_database()
    assert await stored_ids(memory, ref) == {"1"}


async def test_only_the_person_or_an_admin_may_opt_them_out(memory: Memory) -> None:
    team, olive = uid("T"), uid()
    workspace = Workspace("discord", team)
    with pytest.raises(AccessDenied):
        await set_optout(memory, olive, workspace=workspace, opted_out=True, principal=Principal.user(uid()))
    with pytest.raises(AccessDenied):
        await optout_status(memory, olive, workspace=workspace, principal=Principal.user(uid()))
    assert await set_optout(memory, olive, workspace=workspace, opted_out=True, principal=Principal.user(olive))
    assert await optout_status(memory, olive, workspace=workspace, principal=Principal.user(uid(), "admin"))
    assert await set_optout(memory, olive, workspace=workspace, opted_out=False, principal=Principal.user(uid(), "admin"))


def test_the_commands_refuse_a_workspace_that_is_not_one(database_url: str) -> None:
    done = stashbird(database_url, "optout", "--author", "U1", "--workspace", "slack")
    assert done.returncode == 2 and "workspace" in done.stderr and "PLATFORM:WORKSPACE" in done.stderr


def test_stashbird_optout_and_ingest(database_url: str, tmp_path: Path) -> None:
    team, olive, ann = uid("T"), uid(), uid()
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in [said("1", ann, "Hello."), said("2", olive, "Hi all.", 1)]))
    done = stashbird(database_url, "optout", "--author", olive, "--workspace", f"slack:{team}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{olive} in slack:{team}: opted out: new messages are not stored"
    ingested = stashbird(database_url, "ingest", str(path), "--conversation", f"slack:{team}:C1", "--json")
    assert ingested.returncode == 0, ingested.stderr
    assert (json.loads(ingested.stdout)["ingested"], json.loads(ingested.stdout)["opted_out"]) == (1, 1)
    plain = stashbird(database_url, "ingest", str(path), "--conversation", f"slack:{team}:C1")
    assert "not stored (authors opted out) 1" in plain.stdout

    back = stashbird(database_url, "optout", "--author", olive, "--workspace", f"slack:{team}", "--off", "--json")
    assert json.loads(back.stdout) == {"author": olive, "workspace": f"slack:{team}", "opted_out": False, "changed": True}
    again = json.loads(stashbird(database_url, "ingest", str(path), "--conversation", f"slack:{team}:C1", "--json").stdout)
    assert (again["ingested"], again["duplicates"], again["opted_out"]) == (1, 1, 0)


async def test_a_slack_export_import_skips_the_opted_out(tmp_path: Path, memory: Memory, database_url: str) -> None:
    team = uid("T")
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted((DATA / "slack_export").rglob("*.json")):
            archive.write(file, f"export/{file.relative_to(DATA / 'slack_export')}")
    await set_optout(memory, "U05MAYA01", workspace=Workspace("slack", team), opted_out=True, principal=TEST)
    args = argparse.Namespace(format="slack-export", file=path, workspace=team)
    result = await import_command.run(args, Settings(database=DatabaseSettings(url=database_url)))
    general = result["channels"][0]
    assert general["opted_out"] > 0 and "not stored (their authors opted out)" in import_command.render(result)
    for channel in result["channels"]:
        ref = ConversationRef.parse(channel["conversation"])
        speakers = {m["speaker"] for m in await messages(memory, ref, principal=TEST)}
        assert "maya" not in speakers and speakers  # Maya's display name; the others are stored


async def test_a_discord_export_import_skips_the_opted_out(memory: Memory) -> None:
    contents = read_discord_export(json.loads((DATA / "discord_export.json").read_text(encoding="utf-8")))
    authors = sorted({m.author.id for m in contents.messages})
    ref = contents.conversation
    await set_optout(memory, authors[0], workspace=ref.workspace, opted_out=True, principal=TEST)
    try:
        from memory import drop_conversation

        await drop_conversation(memory, ref, principal=TEST)
        report = await store(memory, ref, contents.messages, TEST)
        theirs = {m.id for m in contents.messages if m.author.id == authors[0]}
        assert report.opted_out == len(theirs) > 0
        assert await stored_ids(memory, ref) == {m.id for m in contents.messages} - theirs
    finally:
        await set_optout(memory, authors[0], workspace=ref.workspace, opted_out=False, principal=TEST)


async def test_a_slack_backfill_skips_the_opted_out(memory: Memory) -> None:
    olive = uid()
    async with SlackStandIn(names={"U1": "Maya", olive: "Olive"}) as slack:
        channel = f"C{uuid.uuid4().hex[:8].upper()}"
        kept = slack.message(channel, "U1", "The budget review is on Thursday.")["ts"]
        slack.message(channel, olive, "I think the budget is too small.")
        service = ChatService(memory)
        connector = SlackConnector(service, SlackConfig("xoxb-standin", slack.signing_secret, slack.api_url))
        service.add_platform(connector)
        await connector.identify()
        await set_optout(memory, olive, workspace=Workspace("slack", TEAM), opted_out=True, principal=TEST)
        report = await SlackBackfill(service, connector, TEAM, channel).run()
        assert (report.stored, report.opted_out) == (1, 1)
        assert await stored_ids(memory, conversation(TEAM, channel)) == {kept}


def test_a_bad_author_is_refused(database_url: str) -> None:
    with pytest.raises(ValidationError):
        Workspace.parse("slack:")
    done = stashbird(database_url, "optout", "--author", "", "--workspace", "slack:T1")
    assert done.returncode == 2 and "author" in done.stderr


OLIVE = "U0OLIVE1"  # this module's own person: no other test's stand-in knows them


@pytest.fixture
async def slack() -> AsyncIterator[SlackStandIn]:
    """The Slack stand-in ``served`` (conftest) takes events from, knowing Olive too."""
    async with SlackStandIn(admins={"UADMIN"}, names={"U1": "Maya", "U2": "Tom", OLIVE: "Olive"}) as stand_in:
        yield stand_in


async def test_live_slack_an_opted_out_persons_messages_are_not_stored_and_their_mention_is_answered(
    served: Running, slack: SlackStandIn, memory: Memory
) -> None:
    from test_slack_integration import answers, settle

    channel = f"C{uuid.uuid4().hex[:10].upper()}"
    ref = conversation(TEAM, channel)
    await set_optout(memory, OLIVE, workspace=ref.workspace, opted_out=True, principal=TEST)
    try:
        venue = await slack.post(channel, "U1", "The offsite venue is the Lisbon harbour hotel.")
        await slack.post(channel, OLIVE, "My flight lands in Lisbon at noon, gate 42.")
        asked = await slack.mention(channel, OLIVE, "Where is the offsite venue?")
        await settle(memory, served, [channel])
        [reply] = answers(slack, channel)
        assert reply["thread_ts"] == asked and "Lisbon harbour" in reply["text"]
        assert await stored_ids(memory, ref) == {venue}  # neither Olive's message nor her question
        async with memory._sessions() as session:  # and nothing of hers waits in the inbox
            rows = (
                await session.execute(
                    select(InboxEvent.kind, InboxEvent.payload).where(
                        InboxEvent.message_id.in_(set(slack.history(channel)) - {venue})
                    )
                )
            ).all()
        assert len([kind for kind, _ in rows if kind != "reply"]) == 2  # her message and her question, done
        assert [payload for kind, payload in rows if kind != "reply" and payload is not None] == []
    finally:
        await set_optout(memory, OLIVE, workspace=ref.workspace, opted_out=False, principal=TEST)
    later = await slack.post(channel, OLIVE, "Landed.")
    await settle(memory, served, [channel])
    assert later in await stored_ids(memory, ref)  # opted back in: stored again


async def test_live_discord_an_opted_out_persons_messages_are_not_stored_and_their_mention_is_answered(
    discord_env: Discord, memory: Memory
) -> None:
    env = discord_env
    workspace = Workspace("discord", env.guild)
    earlier = await env.standin.post(env.general, env.bob, "My desk is by the north window.")
    await env.settle()
    assert earlier["id"] in await env.stored(env.general)  # said before opting out: stored
    await set_optout(memory, env.bob.id, workspace=workspace, opted_out=True, principal=Principal.user(env.bob.id))
    fact = await env.standin.post(env.general, env.carol, "The release train leaves on Thursday at 4pm.")
    theirs = await env.standin.post(env.general, env.bob, "I am out on Thursday for a wedding.")
    await env.standin.edit(env.general, earlier["id"], "My desk moved to the quorvex room.")  # an edit after opting out
    reply = await env.ask(env.general, env.bob, "when does the release train leave?")
    assert "Thursday" in reply["content"] and "4pm" in reply["content"]
    await env.settle()
    stored = await env.stored(env.general)
    assert fact["id"] in stored and theirs["id"] not in stored and len(stored) == 1  # the edited message forgotten too
    ref = ConversationRef("discord", env.guild, env.general)
    [entry] = [e for e in (await forgotten(memory, ref, principal=TEST)).entries if e.messages == (earlier["id"],)]
    assert (entry.action, entry.status, entry.requested_by) == ("delete", "deleted", "platform event")
    await set_optout(memory, env.bob.id, workspace=workspace, opted_out=False, principal=Principal.user(env.bob.id))
    back = await env.standin.post(env.general, env.bob, "Plans changed, I am in on Thursday.")
    await env.settle()
    assert back["id"] in await env.stored(env.general)


def _vectors(count: int, seed: int) -> list[list[float]]:
    rng = random.Random(seed)
    return [[rng.gauss(0, 1) for _ in range(384)] for _ in range(count)]


async def _aged_conversation(memory: Memory, now: datetime) -> tuple[ConversationRef, dict[str, datetime]]:
    """Messages said 3 days, 2 days and a day and a minute ago (past a 1-day window),
    exactly a day ago (at the boundary: kept), 23 hours ago and now; facts resting on old
    messages only, on old and new ones, and on new ones only."""
    ref = ConversationRef("local", "", f"retention-{uuid.uuid4().hex[:8]}")
    ages = {"old1": timedelta(days=3), "old2": timedelta(days=2), "old3": timedelta(days=1, minutes=1)}
    ages |= {"edge": timedelta(days=1), "new1": timedelta(hours=23), "new2": timedelta(0)}
    when = {message_id: now - age for message_id, age in ages.items()}
    chat = [validate_message(said(m, "ann", f"Note {m}.") | {"ts": at.isoformat()}) for m, at in when.items()]
    graph = SuppliedGraph(
        entities={
            "ann": SuppliedEntity("Ann", "person", frozenset(when)),
            "lisbon": SuppliedEntity("Lisbon", "place", frozenset({"old1", "new1"})),
            "acme": SuppliedEntity("Acme", "organisation", frozenset({"old2", "new2"})),
            "porto": SuppliedEntity("Porto", "place", frozenset({"old3"})),
        },
        relations=[
            SuppliedRelation("ann", "lisbon", "moved_to", "Ann moved to Lisbon", frozenset({"old1"})),
            SuppliedRelation("ann", "acme", "works_at", "Ann works at Acme", frozenset({"old2", "new2"})),
            SuppliedRelation("ann", "porto", "visited", "Ann visited Porto", frozenset({"old3"})),
            SuppliedRelation("ann", "lisbon", "likes", "Ann likes Lisbon", frozenset({"edge", "new1"})),
        ],
    )
    vectors = _vectors(len(chat) + 8, 11)
    await load_supplied(memory, ref, chat, vectors[: len(chat)], graph, iter(vectors[len(chat) :]))
    return ref, when


async def test_a_one_day_window_forgets_exactly_the_older_messages_and_what_rested_only_on_them(memory: Memory) -> None:
    now = datetime.now(UTC)
    ref, _ = await _aged_conversation(memory, now)
    assert (await retention(memory, ref, principal=TEST)).source in ("none", "default")
    await set_retention(memory, ref, 1, principal=TEST)
    assert await retention(memory, ref, principal=TEST) == Retention(1, "conversation")
    report = await apply_retention(memory, ref, principal=Principal.job("retention"), now=now, batch=2)
    assert (report.forgotten, report.batches, report.remaining, report.days) == (3, 2, 0, 1)
    assert await stored_ids(memory, ref) == {"edge", "new1", "new2"}
    current = {f["fact"]: f["messages"] for f in await facts(memory, ref, principal=TEST)}
    assert current == {"Ann works at Acme": ["new2"], "Ann likes Lisbon": ["edge", "new1"]}
    names = {e.name for e in (await about(memory, ref, "Porto", principal=TEST)).entities}
    assert "Porto" not in names  # it rested on old3 alone
    log = await forgotten(memory, ref, principal=TEST)
    batches = [(e.action, e.messages, e.requested_by, e.status) for e in reversed(log.entries)]
    assert batches == [
        ("retention", ("old1", "old2"), "job retention", "deleted"),
        ("retention", ("old3",), "job retention", "deleted"),
    ]  # one row per batch, oldest first, naming the job
    assert sum(e.counts["relations_removed"] for e in log.entries) == 2  # moved_to, visited: rested on old messages only
    assert log.entries[1].message == "2 messages" and log.entries[0].message == "message old3"
    assert (await stats(memory, ref, principal=TEST)).deletions == 3  # messages forgotten, not audit rows
    again = await apply_retention(memory, ref, principal=Principal.job("retention"), now=now)
    assert (again.forgotten, again.remaining) == (0, 0)

    await set_retention(memory, ref, None, principal=TEST)  # off: kept whatever the default
    assert await retention(memory, ref, principal=TEST) == Retention(None, "conversation")
    later = await apply_retention(memory, ref, principal=TEST, now=now + timedelta(days=30))
    assert later.forgotten == 0 and await stored_ids(memory, ref) == {"edge", "new1", "new2"}


async def test_a_run_forgets_at_most_its_limit_and_the_next_continues(memory: Memory) -> None:
    now = datetime.now(UTC)
    ref, _ = await _aged_conversation(memory, now)
    await set_retention(memory, ref, 1, principal=TEST)
    first = await apply_retention(memory, ref, principal=TEST, now=now, limit=2)
    assert (first.forgotten, first.remaining) == (2, 1)
    assert await stored_ids(memory, ref) == {"old3", "edge", "new1", "new2"}  # oldest first
    second = await apply_retention(memory, ref, principal=TEST, now=now, limit=2)
    assert (second.forgotten, second.remaining) == (1, 0)


async def test_the_scheduler_runs_the_retention_job_when_the_oldest_message_passes_the_window(memory: Memory) -> None:
    now = datetime.now(UTC)
    ref, when = await _aged_conversation(memory, now)
    cid = await resolve_conversation(memory, ref, principal=TEST)
    settings = JobSettings()
    scheduler = Scheduler(memory, settings, only=frozenset({cid}))
    assert not [r for r in await scheduler.run_once() if r.job == "retention"]  # no window: nothing due
    [item] = [b for b in await backlog(memory, principal=TEST, conversation=ref)]
    assert item.retention_due is None

    await set_retention(memory, ref, 1, principal=TEST)  # marks the conversation due
    [ran] = [r for r in await scheduler.run_once() if r.job == "retention"]
    # the job's clock is later than ``now``: "edge", a day old at ``now``, is past the window by then
    assert (ran.status, ran.result["forgotten"], ran.result["remaining"]) == ("ok", 4, 0)
    assert await stored_ids(memory, ref) == {"new1", "new2"}
    [item] = [b for b in await backlog(memory, principal=TEST, conversation=ref)]
    assert item.retention_due == when["new1"] + timedelta(days=1)  # when the oldest left passes the window
    quiet = replace(
        item, unconsolidated_messages=0, dirty_communities=0, warm_communities=0, summary_dirty=False, graph_changed=False
    )
    assert next_look(quiet, settings, now - timedelta(hours=1)) == item.retention_due  # deferred to then, not to never


async def test_a_new_default_window_marks_every_conversation_due_once(new_database: Callable[[], str], memory: Memory) -> None:
    fresh = await open_memory(new_database(), memory.embedder)
    try:
        ref, _ = await _aged_conversation(fresh, datetime.now(UTC))
        await mark_consolidated(fresh, ref)
        assert await watch_retention_default(fresh, principal=TEST) == 0  # no default: nothing to mark
        for item in await due_backlog(fresh, principal=TEST):  # discovery finds nothing to do: defers to never
            await defer_backlog(fresh, item, None, principal=TEST)
        assert await due_backlog(fresh, principal=TEST) == []
        windowed = replace(fresh, retention_days=1)
        assert await watch_retention_default(windowed, principal=TEST) > 0
        assert await watch_retention_default(windowed, principal=TEST) == 0  # once
        [due] = await due_backlog(windowed, principal=TEST)
        assert due.retention_due is not None and due.retention_due < datetime.now(UTC)
        assert await retention(windowed, ref, principal=TEST) == Retention(1, "default")
    finally:
        await fresh.close_database()


async def test_stats_show_the_window_and_who_opted_out(memory: Memory, database_url: str) -> None:
    team = uid("T")
    ref = ConversationRef("slack", team, "C1")
    await ingest(memory, ref, [validate_message(said("1", uid(), "Hello."))], principal=TEST)
    for person in (uid(), uid()):
        await set_optout(memory, person, workspace=ref.workspace, opted_out=True, principal=TEST)
    shown = stashbird(database_url, "retention", "--conversation", str(ref), "--days", "30d")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"{ref}: set; messages are kept for 30 days (this conversation's setting)"
    found = await stats(memory, ref, principal=TEST)
    assert (found.retention, found.opted_out) == (Retention(30, "conversation"), 2)
    assert "Messages are kept for 30 days (this conversation's setting); 2 people opted out" in admin.render_stats(found)
    audited = json.loads(stashbird(database_url, "audit", "stats", "--conversation", str(ref), "--json").stdout)
    assert (audited["retention_days"], audited["retention_source"], audited["opted_out"]) == (30, "conversation", 2)

    off = json.loads(stashbird(database_url, "retention", "--conversation", str(ref), "--days", "off", "--json").stdout)
    assert (off["days"], off["source"]) == (None, "conversation")
    for bad in ("banana", "0", "-3"):
        refused = stashbird(database_url, "retention", "--conversation", str(ref), "--days", bad)
        assert refused.returncode == 2 and "days" in refused.stderr, bad
    unknown = stashbird(database_url, "retention", "--conversation", f"slack:{team}:NOPE", "--days", "3")
    assert unknown.returncode == 2 and "NOPE" in unknown.stderr  # a mistyped conversation creates nothing
