"""Integration: multi-workspace Slack. Slack's OAuth v2 install flow end to end (Bolt's
flow on ``stashbird serve``'s HTTP server, the stand-in's authorize page and
``oauth.v2.access``, the installation in our Postgres), then per-workspace tokens for
every Web API call, refusal of workspaces without an installation, and uninstalls."""

from __future__ import annotations

import urllib.parse
import uuid
from collections.abc import AsyncIterator

import aiohttp
import pytest
from pydantic import SecretStr
from slack_sdk.oauth.installation_store.models.installation import Installation

from bot.service import Running, running
from connectors.slack.installations import Installations, OAuthConfig
from lab.standins.slack_standin import SlackStandIn, service_settings
from memory import ConversationRef, Memory, UnknownConversation, messages
from tests.service.test_slack_integration import TEST, settle

SECOND = "T0SECOND"


@pytest.fixture
async def multi(memory: Memory, slack: SlackStandIn) -> AsyncIterator[Running]:
    served = service_settings(slack)
    chat = served.chat.model_copy(
        update={
            "slack_bot_token": None,
            "slack_client_id": slack.client_id,
            "slack_client_secret": SecretStr(slack.client_secret),  # model_copy does not validate
            "slack_forget_on_uninstall": True,
        }
    )
    settings = served.model_copy(update={"chat": chat})
    async with running(memory, settings, "127.0.0.1", 0) as state:
        slack.events_url = f"http://127.0.0.1:{state.port}/slack/events"
        slack.oauth_redirect = f"http://127.0.0.1:{state.port}/slack/oauth_redirect"
        yield state


async def install(slack: SlackStandIn, port: int, team: str, forged_state: bool = False) -> aiohttp.ClientResponse:
    """A browser through the install flow: /slack/install, Slack's authorize page, back
    to /slack/oauth_redirect with the state cookie (followed by hand: it is Secure)."""
    slack.installing = team
    async with aiohttp.ClientSession() as browser:
        started = await browser.get(f"http://127.0.0.1:{port}/slack/install", allow_redirects=False)
        assert started.status == 302
        authorize = urllib.parse.urlsplit(started.headers["Location"])
        assert authorize.path == "/oauth/v2/authorize" and "chat:write" in urllib.parse.parse_qs(authorize.query)["scope"][0]
        cookie = started.headers["Set-Cookie"].split(";")[0]
        allowed = await browser.get(started.headers["Location"], allow_redirects=False)
        assert allowed.status == 302
        back = allowed.headers["Location"]
        if forged_state:
            back = back.replace("state=", "state=forged")
        async with browser.get(back, headers={"Cookie": cookie}, allow_redirects=False) as finished:
            await finished.read()
            return finished


def envelope(slack: SlackStandIn, team: str, event: dict) -> dict:
    return {
        **slack.envelope(event),
        "team_id": team,
        "authorizations": [{"team_id": team, "user_id": "U0STASHBIRD", "is_bot": True}],
    }


async def test_the_install_flow_stores_a_workspace_whose_events_are_served_with_its_own_token(
    multi: Running, slack: SlackStandIn, memory: Memory
) -> None:
    c = f"C{uuid.uuid4().hex[:10].upper()}"
    team = f"T{uuid.uuid4().hex[:8].upper()}"
    assert (await install(slack, multi.port, team, forged_state=True)).status >= 400  # the state is checked
    assert multi.slack is not None and await multi.slack.installed(team) is None

    # not installed yet: acknowledged, neither stored nor answered
    said = {**slack.message(c, "U1", "The offsite is in Porto."), "channel": c, "channel_type": "channel"}
    assert (await slack.deliver(envelope(slack, team, said))).status == 200
    await settle(memory, multi, [c], team=team)
    with pytest.raises(UnknownConversation):
        await messages(memory, ConversationRef("slack", team, c), principal=TEST)

    finished = await install(slack, multi.port, team)
    assert finished.status == 200
    token = next(t for t, owner in slack.tokens.items() if owner == team)
    assert (await multi.slack.installed(team)).bot_token == token

    assert (await slack.deliver(envelope(slack, team, {**said, "event_id": None}))).status == 200
    asked = {**slack.message(c, "U2", "<@U0STASHBIRD> where is the offsite?"), "channel": c}
    assert (await slack.deliver(envelope(slack, team, {**asked, "type": "app_mention"}))).status == 200
    await settle(memory, multi, [c], team=team)
    ref = ConversationRef("slack", team, c)
    assert {m["text"] for m in await messages(memory, ref, principal=TEST)} == {said["text"], asked["text"]}
    [answer] = [p for p in slack.posted if p.get("channel") == c]
    assert answer["_token"] == token and "Porto" in answer["text"]
    assert slack.calls["users.info"] >= 1

    # removed from the workspace: installation and (configured so) memory gone, events refused
    uninstalled = envelope(slack, team, {"type": "app_uninstalled", "event_ts": slack.next_ts()})
    assert (await slack.deliver(uninstalled)).status == 200
    await settle(memory, multi, [c], team=team)
    assert await multi.slack.installed(team) is None
    with pytest.raises(UnknownConversation):
        await messages(memory, ref, principal=TEST)
    later = {**slack.message(c, "U1", "After the uninstall."), "channel": c, "channel_type": "channel"}
    assert (await slack.deliver(envelope(slack, team, later))).status == 200
    await settle(memory, multi, [c], team=team)
    with pytest.raises(UnknownConversation):
        await messages(memory, ref, principal=TEST)


async def test_a_revoked_bot_token_removes_the_installation_and_keeps_the_memory(
    multi: Running, slack: SlackStandIn, memory: Memory
) -> None:
    c = f"C{uuid.uuid4().hex[:10].upper()}"
    team = f"T{uuid.uuid4().hex[:8].upper()}"
    assert (await install(slack, multi.port, team)).status == 200
    said = {**slack.message(c, "U1", "Kept after a revocation."), "channel": c, "channel_type": "channel"}
    assert (await slack.deliver(envelope(slack, team, said))).status == 200
    await settle(memory, multi, [c], team=team)
    revoked = envelope(slack, team, {"type": "tokens_revoked", "tokens": {"bot": ["U0STASHBIRD"]}, "event_ts": slack.next_ts()})
    assert (await slack.deliver(revoked)).status == 200
    await settle(memory, multi, [c], team=team)
    assert multi.slack is not None and await multi.slack.installed(team) is None
    assert [m["text"] for m in await messages(memory, ConversationRef("slack", team, c), principal=TEST)] == [said["text"]]


async def test_enterprise_grid_installs_are_found_per_workspace_and_removed_per_org(memory: Memory, database_url: str) -> None:
    installations = Installations(OAuthConfig("111.grid", "secret", database_url))
    org, team, alone = f"E{uuid.uuid4().hex[:8].upper()}", f"T{uuid.uuid4().hex[:8].upper()}", f"T{uuid.uuid4().hex[:8].upper()}"
    try:
        # an org-wide install (no team of its own) and a single-workspace install in the same org
        for grid_team, token, whole in ((None, "xoxb-org", True), (alone, "xoxb-alone", False)):
            installation = Installation(
                app_id="A0STANDIN",
                enterprise_id=org,
                team_id=grid_team,
                bot_token=token,
                bot_id="B0STASHBIRD",
                bot_user_id="U0STASHBIRD",
                user_id="U1",
                is_enterprise_install=whole,
            )
            await installations.store.async_save(installation)
        assert (await installations.bot(team, org)).bot_token == "xoxb-org"  # a workspace of the org
        assert (await installations.bot(team)).bot_token == "xoxb-org"  # its org not known (after a restart)
        assert (await installations.bot(alone, org)).bot_token == "xoxb-alone"  # its own install first
        await installations.remove(None, org)  # the org-wide install uninstalled
        assert await installations.bot(team, org) is None
        assert (await installations.bot(alone, org)).bot_token == "xoxb-alone"
    finally:
        await installations.remove(alone, org)
        await installations.close()
