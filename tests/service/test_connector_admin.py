"""The ``/memory`` commands (connectors/admin.py): parsing and the privacy text (pure),
and one scenario run through each connector (the real slack-bolt and discord.py clients
against their stand-ins) and then the CLI's audit: in a two-channel, three-person
workspace a person forgets themselves (a dry run first, then ``confirm``), which leaves
no word only they said, keeps the others' facts and makes each of their messages'
provenance "deleted"; they opt out (a new message is not stored) and back in (stored
again); anyone may ask what is kept, a non-admin may not forget someone else or set the
retention window, and the audit shows who decided what."""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from clirun import stashbird
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select

import memory as api
from bot.service import Running
from connectors import admin
from connectors.discord.payloads import conversation as discord_conversation
from lab.probes import word_residue
from lab.standins.slack_standin import TEAM, SlackStandIn
from memory.store.schema import Relation
from tests.database.test_forget_person import CHANNELS, others_relations
from tests.service.test_slack_integration import settle as settle_slack

if TYPE_CHECKING:
    from tests.conftest import Discord

OPERATOR = api.Principal.operator("test")
PRIVACY_PAGE = Path(__file__).resolve().parents[2] / "docs" / "guarantees" / "privacy.md"


# --- parsing and text (pure) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("<@U123>", ("U123", False)),
        ("<@U123|ann> confirm", ("U123", True)),
        ("<@!80351110224678912> CONFIRM", ("80351110224678912", True)),
        ("<@80351110224678912>", ("80351110224678912", False)),
        ("U123", ("U123", False)),
    ],
)
def test_the_person_a_command_names(argument: str, expected: tuple[str, bool]) -> None:
    assert admin.parse_target(argument) == expected


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("forget-user", "/memory forget-user: user: name the person by mentioning them (<@U…>) or by their user id"),
        (
            "forget-user @ann",
            "/memory forget-user: user: name the person by mentioning them (<@U…>) or by their user id, got '@ann'",
        ),
        ("forget-user <@U1> now", "/memory forget-user: add nothing or 'confirm', got 'now'"),
        ("forget-me please", "/memory forget-me: add nothing or 'confirm', got 'please'"),
        ("retention 9x", "/memory retention: must be a number of days (90, 90d) or off, got '9x'"),
        ("retention", "/memory retention: must be a number of days (90, 90d) or off, got ''"),
        ("retention 0d", "/memory retention: must be a whole number of days from 1 to 36500, or off, got 0"),
    ],
)
async def test_bad_input_is_one_line_naming_it(text: str, line: str) -> None:
    """Refused before the core is reached (no memory is needed to refuse it)."""
    conversation = api.ConversationRef("slack", "T1", "C1")
    answer, refused = await admin.run(None, conversation, text, api.Principal.user("U1", "admin"))  # type: ignore[arg-type]
    assert (answer, refused) == (line, False)


def test_the_privacy_page_says_what_the_bot_says() -> None:
    """docs/guarantees/privacy.md holds every line /memory privacy answers, word for word
    (the page wraps them: line breaks aside), so the two cannot drift apart."""
    page = " ".join(PRIVACY_PAGE.read_text(encoding="utf-8").split())
    assert [line for line in admin.PRIVACY if " ".join(line.split()) not in page] == []


def test_retention_windows_as_typed() -> None:
    assert [api.parse_days(v) for v in ("90d", "90", " 7D ", "off", "OFF")] == [90, 90, 7, None, None]


IDS = st.text("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789abc", min_size=1, max_size=20)


@given(IDS, st.text(st.characters(blacklist_characters="> \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0"), max_size=20), st.booleans())
def test_any_mention_names_its_id(user: str, name: str, confirm: bool) -> None:
    tail = " confirm" if confirm else ""
    for mention in (f"<@{user}>", f"<@{user}|{name}>", f"<@!{user}>", user):
        assert admin.parse_target(mention + tail) == (user, confirm)


@given(st.integers(1, 36_500))
def test_any_window_in_bounds_reads_back(days: int) -> None:
    assert api.parse_days(f"{days}d") == api.parse_days(str(days)) == days


def _not_a_window(value: str) -> bool:
    word = value.strip().lower()
    return word != "off" and not (word.removesuffix("d").isascii() and word.removesuffix("d").isdigit())


@given(st.text(max_size=8).filter(_not_a_window))
def test_anything_else_is_refused_naming_the_field(value: str) -> None:
    with pytest.raises(api.ValidationError, match="^retention: must be a number of days"):
        api.parse_days(value, "retention")


# --- one scenario through each connector --------------------------------------------------


@dataclass
class Chat:
    """A platform as the scenario sees it: its two channels' conversations, its three
    people (U1, U2, U3 of ``CHANNELS``) and an admin as platform user ids, and how
    someone posts, runs ``/memory …`` (returning the ephemeral reply) and waits."""

    refs: dict[str, api.ConversationRef]
    people: dict[str, str]
    admin: str
    post: Callable[[str, str, str], Awaitable[str]]  # channel, user id, text -> message id
    command: Callable[[str, str, str], Awaitable[str]]  # channel, user id, text -> reply
    settle: Callable[[], Awaitable[None]]


async def _relations(memory: api.Memory, ref: api.ConversationRef) -> set[int]:
    cid = await api.resolve_conversation(memory, ref, principal=OPERATOR)
    async with memory._sessions() as session:
        return set((await session.execute(select(Relation.id).where(Relation.conversation_id == cid))).scalars())


async def _stored(memory: api.Memory, ref: api.ConversationRef) -> set[str]:
    return {m.message_id for m in await api.stored_messages(memory, ref, principal=OPERATOR)}


async def scenario(memory: api.Memory, chat: Chat) -> None:
    bob = chat.people["U2"]
    ids: dict[str, dict[str, str]] = {channel: {} for channel in CHANNELS}  # channel -> message id -> text
    bobs: dict[str, set[str]] = {channel: set() for channel in CHANNELS}
    for channel, lines in CHANNELS.items():
        for who, _, text in lines:
            message = await chat.post(channel, chat.people[who], text)
            ids[channel][message] = text
            if who == "U2":
                bobs[channel].add(message)
    await chat.settle()
    for ref in chat.refs.values():
        await api.consolidate(memory, ref, principal=OPERATOR)
    others = {
        c: await others_relations(memory, await api.resolve_conversation(memory, ref, principal=OPERATOR), bobs[c])
        for c, ref in chat.refs.items()
    }
    assert all(others.values())

    # anyone may ask what is kept; a non-admin may not forget someone else or set the window
    privacy = await chat.command("C1", bob, "privacy")
    assert all(line in privacy for line in admin.PRIVACY) and "kept until deleted" in privacy
    assert await chat.command("C1", bob, f"forget-user <@{chat.people['U1']}>") == admin.refusal("forget-user")
    assert await chat.command("C1", bob, "retention 30d") == admin.refusal("retention")
    assert await chat.command("C1", bob, "stats") == admin.refusal("stats")

    cy = chat.people["U3"]
    asked = await chat.command("C2", chat.admin, f"forget-user <@{cy}>")  # an admin's, for anyone: also asked twice
    assert asked.startswith(f"Would forget 2 message(s) by {cy}") and asked.endswith(
        f"/memory forget-user {cy} confirm to go ahead."
    )
    planned = await chat.command("C1", bob, "forget-me")
    assert planned.startswith(f"Would forget 4 message(s) by {bob} in 2 conversation(s)")
    assert planned.endswith("Reply /memory forget-me confirm to go ahead.")
    for channel, ref in chat.refs.items():
        assert await _stored(memory, ref) == set(ids[channel])  # a dry run changes nothing
    done = await chat.command("C2", bob, "forget-me confirm")
    assert done.startswith(f"Forgot 4 message(s) by {bob} in 2 conversation(s)") and "others' messages still support" in done
    assert "Others' messages stay, including those that quote or name them" in done
    for channel, ref in chat.refs.items():
        residue = await word_residue(memory, ref, [ids[channel][m] for m in bobs[channel]])
        assert residue.checked and residue.found == {}, residue.found
        assert others[channel] <= await _relations(memory, ref)  # the others' facts stay
        assert await _stored(memory, ref) == set(ids[channel]) - bobs[channel]
        for message in bobs[channel]:
            assert (await api.provenance(memory, ref, message, principal=OPERATOR)).status == "deleted"

    # opting out: a new message is not stored, until they opt back in
    assert "/memory forget-me" in await chat.command("C1", bob, "ignore-me")
    assert "opted out" in await chat.command("C1", bob, "privacy")
    unstored = await chat.post("C1", bob, "My new flat is near Alfama.")
    await chat.settle()
    assert await chat.command("C1", bob, "remember-me") == "Your new messages are stored again."
    stored = await chat.post("C1", bob, "I finally bought a bike.")
    await chat.settle()
    assert unstored not in await _stored(memory, chat.refs["C1"]) and stored in await _stored(memory, chat.refs["C1"])

    # the admin sets the window and sees who decided what
    assert (
        await chat.command("C1", chat.admin, "retention 90d")
        == "Messages here are now kept for 90 days (this conversation's setting)."
    )
    log = await chat.command("C1", chat.admin, "forgotten")
    workspace = log[log.index("In this workspace:") :]
    assert f"forget_author {bob}: 4 message(s) in 2 conversation(s) (asked by user: user:{bob})" in workspace
    assert f"optout {bob} (asked by user: user:{bob})" in workspace and f"optin {bob}" in workspace


async def test_slack(served: Running, slack: SlackStandIn, memory: api.Memory, database_url: str) -> None:
    team_channels = {c: f"C{uuid.uuid4().hex[:10].upper()}" for c in CHANNELS}

    async def command(channel: str, user: str, text: str) -> str:
        before = len(slack.ephemeral)
        assert (await slack.command(team_channels[channel], user, text)).status == 200
        await settle_slack(memory, served, list(team_channels.values()))
        (reply,) = slack.ephemeral[before:]
        assert reply["response_type"] == "ephemeral"
        return str(reply["text"])

    async def post(channel: str, user: str, text: str) -> str:
        return await slack.post(team_channels[channel], user, text)

    async def settle() -> None:
        await settle_slack(memory, served, list(team_channels.values()))

    refs = {c: api.ConversationRef("slack", TEAM, channel) for c, channel in team_channels.items()}
    # people of their own: the stand-in's team is every Slack test's, and U2 is forgotten in all of it
    people = {who: f"{who}X{uuid.uuid4().hex[:8].upper()}" for who in ("U1", "U2", "U3")}
    await scenario(memory, Chat(refs, people, "UADMIN", post, command, settle))
    bob = people["U2"]

    # the CLI's audit shows the same decisions, with their principal
    cli = stashbird(database_url, "audit", "forgotten", "--json")
    rows = [(e["action"], e["about"], e["principal"], e["summary"]) for e in json.loads(cli.stdout)["entries"]]
    assert ("forget_author", f"slack:{TEAM}", f"user:{bob}", f"{bob}: 4 message(s) in 2 conversation(s)") in rows
    assert ("optout", f"slack:{TEAM}", f"user:{bob}", bob) in rows and ("optin", f"slack:{TEAM}", f"user:{bob}", bob) in rows
    text = stashbird(database_url, "audit", "forgotten", "--conversation", str(refs["C1"])).stdout
    assert "people of its workspace forgotten, opted out or back in:" in text and f"{bob}: 4 message(s)" in text


# Each subcommand's Discord options, in the order the text gives their values.
OPTIONS: dict[str, list[tuple[str, int]]] = {
    "forget-me": [("confirm", 3)],
    "forget-user": [("user", 6), ("confirm", 3)],
    "retention": [("window", 3)],
}


async def test_discord(discord_env: Discord, memory: api.Memory) -> None:
    env = discord_env
    users = {u.id: u for u in (env.owner, env.bob, env.carol, env.mod)}
    channels = {"C1": env.general, "C2": env.random}

    async def command(channel: str, user: str, text: str) -> str:
        name, *values = text.split()
        values = [v.removeprefix("<@").removesuffix(">") for v in values]
        options: list[dict[str, Any]] = [
            {"name": option, "type": kind, "value": value}
            for (option, kind), value in zip(OPTIONS.get(name, []), values, strict=False)
        ]
        interaction = await env.standin.invoke(
            channels[channel], users[user], "memory", [{"type": 1, "name": name, "options": options}]
        )

        await env.standin.wait_for(lambda: any(r["interaction_id"] == interaction for r in env.standin.interaction_replies))
        await env.settle()  # the service answers once it has processed the command
        (reply,) = [r for r in env.standin.interaction_replies if r["interaction_id"] == interaction and r["type"] == "edit"]
        assert reply["flags"] == 64  # ephemeral
        return str(reply["content"])

    async def post(channel: str, user: str, text: str) -> str:
        return str((await env.standin.post(channels[channel], users[user], text))["id"])

    refs = {c: discord_conversation(env.guild, channel) for c, channel in channels.items()}
    people = {"U1": env.owner.id, "U2": env.bob.id, "U3": env.carol.id}
    await scenario(memory, Chat(refs, people, env.mod.id, post, command, env.settle))
