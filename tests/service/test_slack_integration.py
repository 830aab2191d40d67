"""Integration: the Slack connector end to end. The Slack stand-in (loopback HTTP) signs
Events API requests into the running service's real aiohttp endpoint and Bolt app; the
real ``AsyncWebClient`` calls the stand-in's Web API; memory is the real database."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import Sequence

import pytest

from bot.service import Running, running, scheduler_for, sweep_all
from bot.settings import ChatSettings, Settings
from lab.standins.serve_process import start_serve, stop_serve
from lab.standins.slack_standin import TEAM, SlackStandIn, service_settings
from lab.standins.slack_storm import Storm
from memory import ConversationRef, Memory, Principal, UnknownConversation, inbox_conversations, messages
from memory.store.residue import find_tokens

TEST = Principal.operator("test")


def channel() -> str:
    return f"C{uuid.uuid4().hex[:10].upper()}"


def ref(channel_id: str) -> ConversationRef:
    return ConversationRef("slack", TEAM, channel_id)


async def settle(memory: Memory, state: Running, channels: Sequence[str], timeout: float = 30, team: str = TEAM) -> None:
    """Wait until the service has processed everything those channels' inboxes hold."""
    wanted = {ConversationRef("slack", team, c) for c in channels}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = set(await inbox_conversations(memory, principal=TEST))
        if not (ready & wanted) and not state.service.busy:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the service did not settle")


async def stored(memory: Memory, channel_id: str) -> dict[str, str]:
    return {str(m["message_id"]): str(m["text"]) for m in await messages(memory, ref(channel_id), principal=TEST)}


def answers(slack: SlackStandIn, channel_id: str) -> list[dict]:
    return [p for p in slack.posted if p.get("channel") == channel_id]


async def test_bad_or_stale_signatures_get_401_and_store_nothing(served: Running, slack: SlackStandIn, memory: Memory) -> None:
    c = channel()
    message = slack.message(c, "U1", "Unsigned words.")
    body = slack.envelope({**message, "channel": c})
    assert (await slack.deliver(body, secret="not-the-secret")).status == 401
    assert (await slack.deliver(body, timestamp=int(time.time()) - 600)).status == 401
    with pytest.raises(UnknownConversation):
        await stored(memory, c)
    assert (await slack.deliver(body)).status == 200
    await settle(memory, served, [c])
    assert await stored(memory, c) == {message["ts"]: "Unsigned words."}


async def test_end_to_end_mentions_deletes_edits_redelivery(served: Running, slack: SlackStandIn, memory: Memory) -> None:
    c, other = channel(), channel()
    marker = f"zq{uuid.uuid4().hex[:8]}5"
    venue = await slack.post(c, "U1", f"The offsite venue is the Lisbon harbour hotel, booking code {marker}.")
    await slack.post(c, "U2", "Lunch on the first day is at noon.")
    await slack.post(other, "U2", "The offsite venue for the sales team is the Madrid tower.")
    question = "Where is the offsite venue?"
    asked = await slack.mention(c, "U2", question)
    await settle(memory, served, [c, other])
    [reply] = answers(slack, c)
    assert reply["thread_ts"] == asked
    assert "Lisbon" in reply["text"] and "Madrid" not in reply["text"]
    assert slack.permalink(c, venue) in reply["text"]
    assert await stored(memory, c) == slack.history(c)  # the question too, stored once

    # redelivered (Slack's retry of the same envelope): stored once
    retried = slack.envelope({**slack.message(c, "U1", "Bring a jacket."), "channel": c}, "EvRETRY1")
    for attempt in (None, 1, 2):
        assert (await slack.deliver(retried, retry=attempt)).status == 200

    # an edit changes the answer
    await slack.edit(c, venue, f"The offsite venue is the Porto river lodge, booking code {marker}.")
    await slack.mention(c, "U2", question)
    await settle(memory, served, [c])
    edited = answers(slack, c)[-1]["text"]
    assert "Porto" in edited and "Lisbon" not in edited
    assert list((await stored(memory, c)).values()).count("Bring a jacket.") == 1

    # the cited message deleted: never cited again, and nothing of its text remains
    await slack.delete(c, venue)
    await slack.mention(c, "U2", question)
    await settle(memory, served, [c])
    after = answers(slack, c)[-1]["text"]
    assert slack.permalink(c, venue) not in after and "Porto" not in after
    async with memory._sessions() as session:
        assert marker not in await find_tokens(session, "zq[0-9a-f]{8}5")
    assert await stored(memory, c) == slack.history(c)


async def test_a_mention_in_a_thread_is_answered_from_its_thread_first(
    served: Running, slack: SlackStandIn, memory: Memory
) -> None:
    """Two threads each name a venue in the same words; the same question asked in each
    thread is answered from that thread."""
    c = channel()
    offsite = await slack.post(c, "U1", "Planning the team offsite, details in this thread.")
    lisbon = await slack.post(c, "U1", "The venue is the Lisbon harbour hotel.", thread_ts=offsite)
    party = await slack.post(c, "U2", "Planning the holiday party, details in this thread.")
    porto = await slack.post(c, "U2", "The venue is the Porto river lodge.", thread_ts=party)
    for thread in (offsite, party):
        await slack.mention(c, "U3", "Where is the venue?", thread_ts=thread)
    await settle(memory, served, [c])
    replies = {reply["thread_ts"]: reply["text"] for reply in answers(slack, c)}
    assert replies.keys() == {offsite, party}
    for thread, venue, other in ((offsite, lisbon, porto), (party, porto, lisbon)):
        first = replies[thread].splitlines()[0]
        assert slack.history(c)[venue] in first and slack.history(c)[other] not in first, replies[thread]


async def test_a_mention_about_its_asker_is_answered_from_their_own_message(
    served: Running, slack: SlackStandIn, memory: Memory
) -> None:
    """Two people said the same thing of themselves; each who asks "where did I move?"
    gets their own message (the mention's author is who "I" is)."""
    c = channel()
    lisbon = await slack.post(c, "U1", "I moved to the Lisbon office in March.")
    berlin = await slack.post(c, "U2", "I moved to the Berlin office last week.")
    await settle(memory, served, [c])
    for user in ("U1", "U2"):
        await slack.mention(c, user, "where did I move?")
        await settle(memory, served, [c])
    first, second = (reply["text"].splitlines()[0] for reply in answers(slack, c))
    texts = slack.history(c)
    assert texts[lisbon] in first and texts[berlin] not in first, first
    assert texts[berlin] in second and texts[lisbon] not in second, second


async def test_a_delete_before_its_create_leaves_it_unstored(served: Running, slack: SlackStandIn, memory: Memory) -> None:
    c = channel()
    message = slack.message(c, "U1", "Posted, then deleted; the events arrive the other way round.")
    delete = slack.delete_event(c, message["ts"])
    await slack.deliver(delete)
    await slack.deliver(slack.envelope({**message, "channel": c}))
    await slack.post(c, "U1", "This one stays.")
    await settle(memory, served, [c])
    assert await stored(memory, c) == slack.history(c)


async def test_admin_commands_are_ephemeral_and_refused_to_others(served: Running, slack: SlackStandIn, memory: Memory) -> None:
    c = channel()
    await slack.post(c, "U1", "Something to count.")
    for user in ("U1", "UADMIN", "UOPS"):
        assert (await slack.command(c, user, "stats")).status == 200
    await settle(memory, served, [c])
    refusal, workspace_admin, configured_admin = slack.ephemeral[-3:]
    assert refusal["response_type"] == "ephemeral" and "admins only" in refusal["text"]
    assert workspace_admin["text"].startswith("1 messages by 1 speakers")
    assert configured_admin["text"].startswith("1 messages by 1 speakers")


async def test_the_sweep_forgets_deletions_whose_events_never_arrived(
    served: Running, slack: SlackStandIn, memory: Memory
) -> None:
    c = channel()
    kept = await slack.post(c, "U1", "Still on the platform.")
    lost = await slack.post(c, "U1", "Deleted while the service was down.")
    parent = await slack.post(c, "U2", "A thread about the budget.")
    reply = await slack.post(c, "U1", "The reply that was deleted.", thread_ts=parent)
    await slack.post(c, "U2", "The reply that stays.", thread_ts=parent)
    await settle(memory, served, [c])
    del slack.channels[c][lost], slack.channels[c][reply]  # deleted; Slack gave up delivering the events
    assert served.slack is not None
    reports = await sweep_all(memory, [served.slack], days=36500)
    [report] = [r for r in reports if r.conversation == str(ref(c))]
    assert sorted(report.forgotten) == sorted([lost, reply])
    assert await stored(memory, c) == slack.history(c)
    assert kept in slack.history(c)


async def test_serve_schedules_the_sweep_with_the_core_jobs(served: Running, slack: SlackStandIn, memory: Memory) -> None:
    c = channel()
    await slack.post(c, "U1", "Kept.")
    lost = await slack.post(c, "U1", "Deleted while no event reached us.")
    await settle(memory, served, [c])
    del slack.channels[c][lost]
    served_settings = service_settings(slack)
    with_jobs = served_settings.model_copy(update={"chat": served_settings.chat.model_copy(update={"serve_jobs": True})})
    scheduler = scheduler_for(memory, with_jobs, served.service, list(served.connectors))
    assert scheduler is not None and {"consolidation", "slack-sweep", "vacuum"} <= set(scheduler.jobs)
    results = [r for r in await scheduler.run_job("slack-sweep") if r.result.get("conversation") == str(ref(c))]
    assert [(r.status, r.result["forgotten"]) for r in results] == [("ok", [lost])]
    assert await stored(memory, c) == slack.history(c)
    assert [r.status for r in await scheduler.run_job("vacuum")] == ["ok"]  # the sweep's deletion is vacuumed


async def last_vacuum(memory: Memory) -> object:
    async with memory._engine.connect() as connection:
        query = "SELECT last_vacuum FROM pg_stat_user_tables WHERE relname = 'episodes'"
        return (await connection.exec_driver_sql(query)).scalar()


async def test_deletions_from_the_chat_are_vacuumed_by_a_scheduled_job(
    served: Running, slack: SlackStandIn, memory: Memory
) -> None:
    c = channel()
    kept, gone = [await slack.post(c, user, text) for user, text in (("U1", "The review is on Thursday."), ("U2", "Badge 4411."))]
    await settle(memory, served, [c])
    assert served.scheduler is not None and set(served.scheduler.jobs) == {"vacuum"}  # no core jobs: serve_jobs off
    assert await served.scheduler.run_job("vacuum") == []  # nothing deleted: nothing to do
    await slack.edit(c, kept, "The budget review moved to Friday.")
    await slack.delete(c, gone)
    await settle(memory, served, [c])
    before = await last_vacuum(memory)
    [result] = await served.scheduler.run_job("vacuum")
    assert result.status == "ok" and result.result["removals"] == 2  # one edit, one deletion: one VACUUM
    assert result.result["tables"] > 0 and (before is None or await last_vacuum(memory) > before)
    assert await served.scheduler.run_job("vacuum") == []  # covered until the next deletion


async def test_healthz_reports_database_connectors_and_backlog(served: Running, slack: SlackStandIn) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{served.port}/healthz") as response:
            health = await response.json()
    assert response.status == 200
    assert health["database"] is True and health["connectors"] == {"slack": True}
    assert {"pending", "failed", "oldest_pending_seconds", "replies_pending"} <= set(health["backlog"])


async def test_a_process_killed_after_acknowledging_events_is_recovered_at_restart(
    slack: SlackStandIn, memory: Memory, database_url: str
) -> None:
    c = channel()
    slack.delays["users.info"] = 60.0  # processing stalls after the events are acknowledged
    first, port = await start_serve(slack, database_url)
    try:
        slack.events_url = f"http://127.0.0.1:{port}/slack/events"
        for text in ("Acknowledged before the crash.", "Also acknowledged."):
            assert (await slack.deliver(slack.envelope({**slack.message(c, "U1", text), "channel": c}))).status == 200
        await slack.delete(c, next(iter(slack.history(c))))
    finally:
        first.send_signal(signal.SIGKILL)
        await first.wait()
    assert await stored(memory, c) == {}  # acknowledged, not processed
    slack.delays.clear()
    second, port = await start_serve(slack, database_url)
    try:
        deadline = time.monotonic() + 60
        while await stored(memory, c) != slack.history(c) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert await stored(memory, c) == slack.history(c)
        assert len(slack.history(c)) == 1
    finally:
        assert await stop_serve(second) == 0  # SIGTERM: a graceful exit


async def test_a_message_storm_ends_with_the_platform_history(served: Running, slack: SlackStandIn, memory: Memory) -> None:
    """A reduced storm (the full 2,000 events run in ``stashbird bench serve``)."""
    channels = [channel() for _ in range(3)]
    report = await Storm(slack, channels, seed=11).run(events=300, concurrency=16)
    assert report.acked == report.events - 2 * report.kinds.get("mention", 0)  # mentions are counted, not timed
    assert {"message", "edit", "delete", "duplicate", "mention"} <= set(report.kinds)
    await settle(memory, served, channels, timeout=120)
    for c in channels:
        listed = await messages(memory, ref(c), principal=TEST)
        assert len(listed) == len({m["message_id"] for m in listed})
        assert await stored(memory, c) == slack.history(c)
    assert len(answers(slack, channels[0]) + answers(slack, channels[1]) + answers(slack, channels[2])) == len(report.mentions)


async def test_socket_mode_takes_the_same_events(memory: Memory, slack: SlackStandIn) -> None:
    settings = Settings(
        chat=ChatSettings(
            slack_bot_token="xoxb-standin", slack_app_token="xapp-standin", slack_api_url=slack.api_url, serve_jobs=False
        )
    )
    async with running(memory, settings, "127.0.0.1", 0) as state:
        assert state.slack is not None and state.slack.connected and slack.socket_connected
        c = channel()
        venue = slack.message(c, "U1", "The offsite venue is the Lisbon harbour hotel.")
        await slack.deliver_socket(slack.envelope({**venue, "channel": c}))
        asked = slack.message(c, "U2", "<@U0STASHBIRD> where is the offsite venue?")
        await slack.deliver_socket(slack.envelope({**asked, "channel": c, "type": "app_mention"}))
        await settle(memory, state, [c])
        assert await stored(memory, c) == slack.history(c)
        [answer] = answers(slack, c)
        assert answer["thread_ts"] == asked["ts"] and slack.permalink(c, venue["ts"]) in answer["text"]


async def test_a_malformed_event_is_acknowledged_and_refused_once(served: Running, slack: SlackStandIn, memory: Memory) -> None:
    c = channel()
    body = slack.envelope({**slack.message(c, "U1", "No envelope id."), "channel": c})
    del body["event_id"]  # Slack would deliver it again on a 500, to the same end
    assert (await slack.deliver(body)).status == 200
    with pytest.raises(UnknownConversation):
        await stored(memory, c)
