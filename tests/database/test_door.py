"""The door (memory/door.py) and its access table (memory/access.py): every public command
called as each kind of principal, against the allow/deny table written out here (not
read from the access table), with the audit rows each call leaves; and the rule decision's
properties."""

from __future__ import annotations

import dataclasses
import inspect
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select

import memory as api
from memory import AccessDenied, ConversationRef, Memory, Principal, validate_message
from memory.access import ACCESS, Grant, Rule, actor, permits
from memory.store.schema import AuditEntry, StoreAuditEntry

T0 = datetime(2026, 3, 1, 9, tzinfo=UTC)
PRINCIPALS = {
    "operator": Principal.operator("t"),
    "job": Principal.job("t"),
    "event": Principal.event("Ev-t"),
    "user": Principal.user("U-plain"),
    "workspace admin": Principal.user("U-ws", "admin"),
    "configured admin": Principal.user("U-conf"),
    "bot": Principal.user("B-bot", "bot"),
}
ADMINS = frozenset({"U-conf"})
EVERYONE = set(PRINCIPALS)
CONTENT = {"operator", "job", "event"}
WORK = {"operator", "job"}
AUDIT = {"operator", "workspace admin", "configured admin"}

# command -> (who may, the audit row's action or None when the command leaves none)
TABLE: dict[str, tuple[set[str], str | None]] = {
    "ingest": (CONTENT, "ingest"),
    "forget": (CONTENT, "delete_episode"),
    "edit": (CONTENT, "edit_episode"),
    "drop_conversation": (CONTENT, None),  # its audit log goes with it: the store-wide log says who
    "stored_messages": (CONTENT, None),
    "resolve_conversation": (CONTENT, None),
    "set_bot_present": (CONTENT, "set_bot_present"),  # the calls say "present": the test's conversation keeps storing
    "ask": ({"operator", "user", "workspace admin", "configured admin"}, "ask"),
    # the user's own opt-out only (the calls name U-plain); audited store-wide, not in the conversation
    "set_optout": ({"operator", "user", "workspace admin", "configured admin"}, None),
    "optout_status": ({"operator", "user", "workspace admin", "configured admin"}, None),
    "set_retention": (AUDIT, "set_retention"),
    "retention": ({"operator", "user", "workspace admin", "configured admin"}, None),
    "apply_retention": (WORK, "retention"),
    "watch_retention_default": (WORK, None),
    "about": (AUDIT, "audit"),
    "explain": (AUDIT, "audit"),
    "forgotten": (AUDIT, "audit"),
    "provenance": (AUDIT, "audit"),
    "stats": (AUDIT, "audit"),
    "overview": (AUDIT, "audit"),
    "facts": (AUDIT, "audit"),
    "messages": (AUDIT, "audit"),
    "list_communities": (AUDIT, "audit"),
    "usage": (AUDIT, None),
    "audit_conversations": ({"operator", "configured admin"}, None),  # of the whole store
    "store_audit": ({"operator", "configured admin"}, None),
    "consolidate": (WORK, "consolidate"),
    "pending": (WORK, None),
    "backlog": (WORK, None),
    "due_backlog": (WORK, None),
    "defer_backlog": (WORK, None),
    "waiting_backlog": (WORK, None),
    "build_communities": (WORK, "build_communities"),
    "update_communities": (WORK, "update_communities"),
    "regenerate_communities": (WORK, "regenerate_communities"),
    "regenerate_summary": (WORK, "regenerate_summary"),
    "vacuum": (WORK, None),
    "index_conversation": (WORK, None),
    "conversations": (WORK, None),
    "read_cursor": (WORK, None),
    "save_cursor": (WORK, None),
    "inbox_put": (WORK, None),
    "inbox_conversations": (WORK, None),
    "inbox_claim": (WORK, None),
    "inbox_backlog": (WORK, None),
    "inbox_prune": (WORK, None),
    "outbox_take": (WORK, None),
    "outbox_settle": (WORK, None),
    "claim_work": (WORK, None),
    "renew_claim": (WORK, None),
    "release_claim": (WORK, None),
    "last_runs": (WORK, None),
    "forget_author": (EVERYONE - {"bot"}, None),  # a user on themselves (OWN); the test's person has said nothing
    "erase": ({"operator"}, "erase"),
    "reindex": ({"operator"}, "reindex"),
    "citus_plan": ({"operator"}, None),
}
# commands that do not name the test's conversation (the whole store, or another one)
ELSEWHERE = {
    "drop_conversation",
    "set_optout",
    "optout_status",
    "watch_retention_default",
    "forget_author",  # a workspace's conversations
    "audit_conversations",
    "store_audit",
    "vacuum",
    "conversations",
    "inbox_put",
    "inbox_conversations",
    "inbox_backlog",
    "inbox_prune",
    "outbox_take",
    "outbox_settle",
    "citus_plan",
    "claim_work",
    "renew_claim",
    "release_claim",
    "last_runs",
    "due_backlog",
    "defer_backlog",
    "waiting_backlog",
}

# commands whose audit row goes to the store-wide log (memory/store/audit.py), by action
STORE_WIDE = {
    "drop_conversation": "drop_conversation",
    "forget_author": "forget_author",  # the forgetting as a whole; a row per conversation touched too
    "audit_conversations": "audit",
    "store_audit": "audit",
    "vacuum": "vacuum",
    "citus_plan": "citus_plan",
    "set_optout": "optout",  # or "optin": the calls alternate (``_calls``), each one a change
}
# commands of the whole store (no conversation): their refusals go to the store-wide log
NO_CONVERSATION = ELSEWHERE - {"drop_conversation"}


async def _claim(memory: Memory, ref: ConversationRef, principal: Principal) -> None:
    async with api.inbox_claim(memory, ref, principal=principal):
        pass


Call = Callable[[Memory, ConversationRef, Principal], Awaitable[Any]]


def _calls(n: int, fresh: ConversationRef, trace: int, held: api.Claim) -> dict[str, Call]:
    unposted = api.OutboxItem(fresh, 0, api.InboxItem(0, "door", "reply", {}, 0), 0.0)  # no such row: settles nothing
    """One call of each command; ``n`` makes message ids unique per call, ``fresh`` is a
    conversation of its own for the command that drops one."""
    message = validate_message({"id": f"new-{n}", "author": "ann", "text": "I moved to Lisbon.", "ts": T0.isoformat()})
    entry = api.inbox_entry(fresh, f"ev-{n}", "message", {"n": n})
    return {
        "ingest": lambda m, r, p: api.ingest(m, r, [message], principal=p),
        "forget": lambda m, r, p: api.forget(m, r, f"f{n}", principal=p),
        "edit": lambda m, r, p: api.edit(m, r, "m1", f"I adopted a cat called Tom {n}.", principal=p),
        "drop_conversation": lambda m, r, p: api.drop_conversation(m, fresh, principal=p),
        "stored_messages": lambda m, r, p: api.stored_messages(m, r, principal=p),
        "resolve_conversation": lambda m, r, p: api.resolve_conversation(m, r, principal=p),
        "set_bot_present": lambda m, r, p: api.set_bot_present(m, r, True, principal=p),
        "ask": lambda m, r, p: api.ask(m, r, "Who has a cat?", principal=p, date=T0 + timedelta(days=1)),
        "set_optout": lambda m, r, p: api.set_optout(m, "U-plain", workspace=r.workspace, opted_out=n % 2 == 0, principal=p),
        "optout_status": lambda m, r, p: api.optout_status(m, "U-plain", workspace=r.workspace, principal=p),
        "set_retention": lambda m, r, p: api.set_retention(m, r, None, principal=p),
        "retention": lambda m, r, p: api.retention(m, r, principal=p),
        "apply_retention": lambda m, r, p: api.apply_retention(m, r, principal=p),
        "watch_retention_default": lambda m, r, p: api.watch_retention_default(m, principal=p),
        "about": lambda m, r, p: api.about(m, r, "Ann", principal=p),
        "explain": lambda m, r, p: api.explain(m, r, trace, principal=p),
        "forgotten": lambda m, r, p: api.forgotten(m, r, principal=p),
        "provenance": lambda m, r, p: api.provenance(m, r, "m2", principal=p),
        "stats": lambda m, r, p: api.stats(m, r, principal=p),
        "overview": lambda m, r, p: api.overview(m, r, principal=p),
        "facts": lambda m, r, p: api.facts(m, r, principal=p),
        "messages": lambda m, r, p: api.messages(m, r, principal=p),
        "list_communities": lambda m, r, p: api.list_communities(m, r, principal=p),
        "usage": lambda m, r, p: api.usage(m, r, principal=p),
        "audit_conversations": lambda m, r, p: api.audit_conversations(m, principal=p),
        "store_audit": lambda m, r, p: api.store_audit(m, principal=p, conversation=r),
        "consolidate": lambda m, r, p: api.consolidate(m, r, principal=p),
        "pending": lambda m, r, p: api.pending(m, r, principal=p),
        "backlog": lambda m, r, p: api.backlog(m, principal=p, conversation=r),
        "due_backlog": lambda m, r, p: api.due_backlog(m, principal=p, limit=1),
        "defer_backlog": lambda m, r, p: api.defer_backlog(
            m, api.Backlog(0, r, 0, 0, None, None, 0, False, False), None, principal=p
        ),
        "waiting_backlog": lambda m, r, p: api.waiting_backlog(m, principal=p),
        "build_communities": lambda m, r, p: api.build_communities(m, r, principal=p),
        "update_communities": lambda m, r, p: api.update_communities(m, r, principal=p),
        "regenerate_communities": lambda m, r, p: api.regenerate_communities(m, r, principal=p),
        "regenerate_summary": lambda m, r, p: api.regenerate_summary(m, r, principal=p),
        "vacuum": lambda m, r, p: api.vacuum(m, principal=p),
        "index_conversation": lambda m, r, p: api.index_conversation(m, r, principal=p),
        "conversations": lambda m, r, p: api.conversations(m, principal=p, platform="door-test"),
        "read_cursor": lambda m, r, p: api.read_cursor(m, r, "door", principal=p),
        "save_cursor": lambda m, r, p: api.save_cursor(m, r, "door", {"n": n}, principal=p),
        "inbox_put": lambda m, r, p: api.inbox_put(m, [entry], principal=p),
        "inbox_conversations": lambda m, r, p: api.inbox_conversations(m, principal=p),
        "inbox_claim": _claim,
        "inbox_backlog": lambda m, r, p: api.inbox_backlog(m, principal=p),
        "inbox_prune": lambda m, r, p: api.inbox_prune(m, timedelta(days=30), principal=p),
        "outbox_take": lambda m, r, p: api.outbox_take(m, ["door-test"], principal=p),
        "outbox_settle": lambda m, r, p: api.outbox_settle(m, unposted, principal=p),
        "claim_work": lambda m, r, p: api.claim_work(m, 0, f"door-{n}", "test", 30, principal=p),
        "renew_claim": lambda m, r, p: api.renew_claim(m, held, 30, principal=p),
        "release_claim": lambda m, r, p: api.release_claim(m, held, "ok", {}, principal=p),
        "last_runs": lambda m, r, p: api.last_runs(m, [0], principal=p),
        "forget_author": lambda m, r, p: api.forget_author(
            m, p.id if p.kind == "user" else "U-silent", workspace=r.workspace, principal=p
        ),
        "erase": lambda m, r, p: api.erase(m, r, principal=p),
        "reindex": lambda m, r, p: api.reindex(m, r, principal=p),
        "citus_plan": lambda m, r, p: api.citus_plan(m, principal=p),
    }


def test_the_table_covers_every_command_that_takes_a_principal() -> None:
    takes = {
        name
        for name in api.__all__
        if inspect.isfunction(value := getattr(api, name)) and "principal" in inspect.signature(value).parameters
    }
    assert takes == set(TABLE) == set(ACCESS)
    assert set(_calls(0, ConversationRef("t", "", "x"), 0, api.Claim(0, "t", "t", 0))) == set(TABLE)


async def _audit_rows(memory: Memory, ref: ConversationRef) -> Counter[tuple[str, str]]:
    conversation_id = await api.resolve_conversation(memory, ref, principal=PRINCIPALS["operator"])
    async with memory._sessions() as session:
        rows = await session.execute(
            select(AuditEntry.principal, AuditEntry.action).where(AuditEntry.conversation_id == conversation_id)
        )
        return Counter((principal, action) for principal, action in rows)


async def _store_rows(memory: Memory) -> Counter[tuple[str, str]]:
    async with memory._sessions() as session:
        rows = await session.execute(select(StoreAuditEntry.principal, StoreAuditEntry.action))
        return Counter((principal, action) for principal, action in rows)


async def test_every_command_as_every_principal(memory: Memory) -> None:
    memory = dataclasses.replace(memory, admin_ids=ADMINS)
    operator = PRINCIPALS["operator"]
    ref = ConversationRef("door-test", "", f"c-{uuid.uuid4().hex[:10]}")
    chat = [
        {"id": "m1", "author": "ann", "text": "I adopted a cat called Tom.", "ts": T0.isoformat()},
        {"id": "m2", "author": "bob", "text": "Ann lives in Porto.", "ts": (T0 + timedelta(minutes=1)).isoformat()},
        *({"id": f"f{n}", "author": "bob", "text": f"Note {n}.", "ts": T0.isoformat()} for n in range(40)),
    ]
    await api.ingest(memory, ref, [validate_message(m) for m in chat], principal=operator)
    trace = (await api.ask(memory, ref, "Who has a cat?", principal=operator)).trace_id
    outcomes: dict[tuple[str, str], str] = {}
    for n, (kind, principal) in enumerate(PRINCIPALS.items()):
        fresh = ConversationRef("door-test", "", f"fresh-{uuid.uuid4().hex[:10]}")
        await api.ingest(memory, fresh, [validate_message(chat[0])], principal=operator)
        held = await api.claim_work(memory, 0, f"door-held-{n}", "test", 30, principal=operator)
        assert held is not None
        for command, call in _calls(n, fresh, trace, held).items():
            allowed, action = TABLE[command]
            before, store_before = await _audit_rows(memory, ref), await _store_rows(memory)
            try:
                await call(memory, ref, principal)
                outcomes[command, kind] = "allowed"
            except AccessDenied as error:
                outcomes[command, kind] = "denied"
                assert str(principal) in str(error) and "only the operator" in str(error)
            added = await _audit_rows(memory, ref) - before
            if action is not None and outcomes[command, kind] == "allowed":
                assert added[str(principal), action] >= 1, (command, kind, added)
            if outcomes[command, kind] == "denied" and command not in ELSEWHERE:  # every refusal is recorded
                refused = f"{action if action in ('audit', 'retention') else command}_refused"  # a rule's own action
                assert added == Counter({(str(principal), refused): 1}), (command, kind, added)
            elif action is None or command in ELSEWHERE:
                assert added == Counter(), (command, kind, added)
            store_added = await _store_rows(memory) - store_before
            if outcomes[command, kind] == "allowed" and command in STORE_WIDE:
                logged = "optin" if command == "set_optout" and n % 2 else STORE_WIDE[command]
                assert store_added == Counter({(str(principal), logged): 1}), (command, kind, store_added)
            elif outcomes[command, kind] == "denied" and command in NO_CONVERSATION:
                refused = f"{command if command == 'set_optout' else STORE_WIDE.get(command, command)}_refused"
                assert store_added == Counter({(str(principal), refused): 1}), (command, kind, store_added)
            else:
                assert store_added == Counter(), (command, kind, store_added)
    expected = {(c, k): "allowed" if k in TABLE[c][0] else "denied" for c in TABLE for k in PRINCIPALS}
    assert outcomes == expected


async def test_a_dropped_conversation_leaves_who_dropped_it_in_the_store_wide_log(memory: Memory) -> None:
    """Its own audit log goes with it; the store-wide row survives, names it and the
    principal, and is found by the conversation's name once it is gone."""
    ref = ConversationRef("door-test", "W-drop", f"gone-{uuid.uuid4().hex[:10]}")
    message = validate_message({"id": "m1", "author": "ann", "text": "I adopted a cat.", "ts": T0.isoformat()})
    await api.ingest(memory, ref, [message], principal=PRINCIPALS["operator"])
    conversation_id = await api.resolve_conversation(memory, ref, principal=PRINCIPALS["operator"])
    channel_gone = Principal.event("Ev-channel-deleted")
    assert await api.drop_conversation(memory, ref, principal=channel_gone)
    assert not await api.drop_conversation(memory, ref, principal=channel_gone)  # nothing left: nothing recorded
    async with memory._sessions() as session:
        left = await session.execute(select(AuditEntry.id).where(AuditEntry.conversation_id == conversation_id))
        assert left.all() == []
    found = await api.store_audit(memory, principal=PRINCIPALS["operator"], conversation=ref)
    assert [(e.action, e.about, e.principal, e.requested_by) for e in found.entries] == [
        ("drop_conversation", str(ref), "event:Ev-channel-deleted", "platform event")
    ]
    assert found.entries[0].details["conversation_id"] == conversation_id
    elsewhere = ConversationRef("door-test", "W-drop", "another")
    assert (await api.store_audit(memory, principal=PRINCIPALS["operator"], conversation=elsewhere)).entries == ()


async def test_forgetting_a_person_everywhere_or_someone_else(memory: Memory) -> None:
    """The whole store takes the operator or a configured admin (EVERYWHERE's rule); a
    plain user may forget themselves only (OWN)."""
    memory = dataclasses.replace(memory, admin_ids=ADMINS)
    outcomes = {}
    for kind, principal in PRINCIPALS.items():
        try:
            await api.forget_author(memory, "U-silent", workspace=None, principal=principal, dry_run=True)
            outcomes[kind] = "allowed"
        except AccessDenied:
            outcomes[kind] = "denied"
    assert {k for k, v in outcomes.items() if v == "allowed"} == {"operator", "configured admin"}
    workspace = api.Workspace("door-test", "")
    with pytest.raises(AccessDenied):
        await api.forget_author(memory, "U-other", workspace=workspace, principal=PRINCIPALS["user"])
    with pytest.raises(AccessDenied):
        await api.forget_author(memory, "U-other", workspace=workspace, principal=PRINCIPALS["bot"])


async def test_a_refusal_comes_before_the_conversation_is_looked_up(memory: Memory) -> None:
    """An unknown conversation is refused, not revealed, to a principal who may not act."""
    nowhere = ConversationRef("door-test", "", "nowhere")
    with pytest.raises(AccessDenied, match="may not run consolidate"):
        await api.consolidate(memory, nowhere, principal=PRINCIPALS["user"])
    with pytest.raises(api.UnknownConversation):
        await api.consolidate(memory, nowhere, principal=PRINCIPALS["job"])


kinds = st.sampled_from(["operator", "job", "event", "user"])
roles = st.sampled_from(["user", "admin", "bot"])
grants = st.dictionaries(st.sampled_from(["job", "event", "admin", "user", "bot"]), st.sampled_from(list(Grant)))


@given(kinds, roles, st.booleans(), grants, st.booleans(), st.sampled_from([None, "U1", "U2"]))
def test_the_decision(kind: Any, role: Any, configured: bool, granted: Any, store_wide: bool, owner: str | None) -> None:
    principal = Principal(kind, "U1", role)
    rule = Rule(granted, store_wide=store_wide)
    admin_ids = frozenset({"U1"}) if configured else frozenset()
    who = actor(principal, admin_ids, store_wide)
    allowed = permits(rule, principal, admin_ids, owner)
    assert who == kind or kind == "user"
    if kind == "operator":
        assert allowed  # the operator holds the database anyway
    if kind == "user" and role == "admin" and store_wide and not configured:
        assert who == "user"  # a workspace's admin is not an admin of the whole store
    if kind == "user" and role == "bot":
        assert who == "bot"
    if kind != "operator":
        grant = granted.get(who, Grant.NONE)
        assert allowed == (grant is Grant.ALL or (grant is Grant.OWN and owner == "U1"))
