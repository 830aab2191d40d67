"""The audit queries against the real database: a corrected fact's history and its
restoration, access control and its log, answer traces, the deletion log, stats, and
privacy (no deleted text, nothing from another conversation). Pure rules first."""

from __future__ import annotations

import dataclasses
import json
import random
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select, text

from bot.commands.audit import table
from lab.probes import SuppliedEntity, SuppliedGraph, SuppliedRelation, load_supplied
from memory import (
    AccessDenied,
    ConversationRef,
    Memory,
    OfflineExtractor,
    Principal,
    UnknownConversation,
    ValidationError,
    about,
    ask,
    audit_conversations,
    consolidate,
    explain,
    forget,
    forgotten,
    ingest,
    overview,
    provenance,
    resolve_conversation,
    stats,
    validate_message,
)
from memory.access import ACCESS, permits
from memory.audit.about import RELATIONS_PER_ENTITY, best_matches, shown_relations
from memory.audit.facts import MESSAGES_PER_FACT
from memory.audit.forgotten import requester
from memory.audit.messages import permalink
from memory.store.residue import find_tokens
from memory.store.schema import AuditEntry

OPERATOR = Principal.operator("test")


# --- pure rules ----------------------------------------------------------------------


def test_who_may_audit() -> None:
    admins = frozenset({"U42"})

    def may(rule: str, principal: Principal) -> bool:
        return permits(ACCESS[rule], principal, admins)

    assert may("stats", Principal.operator("cli"))
    assert may("stats", Principal.user("U1", "admin"))
    assert may("stats", Principal.user("U42"))
    assert not may("stats", Principal.user("U1"))
    assert not may("stats", Principal.event("U42")) and not may("stats", Principal.job("sweep"))
    assert may("audit_conversations", Principal.operator("cli")) and may("audit_conversations", Principal.user("U42"))
    assert not may("audit_conversations", Principal.user("U1", "admin"))  # a platform admin: of its own workspace only


def test_requester_and_permalink() -> None:
    assert [requester(p) for p in ("user:U1", "event:Ev9", "job:sweep", "operator:cli", "cli")] == [
        "user",
        "platform event",
        "job sweep",
        "operator",
        "operator",
    ]
    assert permalink(ConversationRef("discord", "111", "222"), "333") == "https://discord.com/channels/111/222/333"
    assert permalink(ConversationRef("slack", "T1", "C1"), "1712345678.000100") is None


def test_best_matches_by_name_or_meaning() -> None:
    found = best_matches({1: 95.0, 2: 60.0, 3: 81.0}, {2: 0.9, 4: 0.3, 3: 0.5}, limit=5)
    assert found == [(1, 0.95), (2, 0.9), (3, 0.81)]
    assert best_matches({1: 95.0, 2: 90.0}, {}, limit=1) == [(1, 0.95)]


relation_ends = st.lists(
    st.tuples(st.integers(1, 3), st.integers(1, 3), st.booleans()), max_size=60, unique_by=lambda t: (t[0], t[1])
)


@given(relation_ends, st.integers(1, 5))
def test_shown_relations_lose_nothing_to_the_per_end_limits(ends: list[tuple[int, int, bool]], limit: int) -> None:
    """Relations ``(subject, object, current)`` numbered by position: the candidates the
    query returns (per entity, end and status, the newest ``limit``) rank to the same
    relations as ranking each entity's whole list."""
    relations = list(enumerate(ends, start=1))
    candidates = []
    for entity in (1, 2, 3):
        for end in (0, 1):
            for current in (True, False):
                group = sorted((r for r, e in relations if e[end] == entity and e[2] is current), reverse=True)
                candidates += [(entity, r, current) for r in group[:limit]]
    for entity in (1, 2, 3):
        whole = sorted({r for r, e in relations if entity in e[:2]}, key=lambda r: (not ends[r - 1][2], -r))
        assert shown_relations(candidates, limit).get(entity, []) == whole[:limit]


def test_table_lines_up_columns() -> None:
    lines = table(["a", "bb"], [("x", 1), ("long cell", None)])
    assert lines[0] == "a          bb" and lines[2] == "x          1" and lines[3] == "long cell"


# --- against the database ------------------------------------------------------------


def _messages(rows: list[tuple[str, str, str]]) -> list:
    return [
        validate_message({"id": i, "author": a, "text": t, "ts": datetime(2026, 1, 1 + n, 10, tzinfo=timezone.utc)})
        for n, (i, a, t) in enumerate(rows)
    ]


async def _corrected(memory: Memory, ref: ConversationRef, marker: str) -> None:
    rows = [
        ("1", "Ann", "I live in Boston now."),
        ("2", "Bob", "Nice, Boston is great."),
        ("3", "Ann", f"Correction: I moved to Denver last month, {marker}."),
    ]
    await ingest(memory, ref, _messages(rows), principal=OPERATOR)
    await consolidate(memory, ref, principal=OPERATOR, extractor=OfflineExtractor())


def _texts(result: object) -> str:
    return json.dumps(result, default=str).lower()


async def test_about_shows_a_correction_and_its_restoration(memory: Memory, conversation_ref: ConversationRef) -> None:
    marker = f"zq{uuid.uuid4().hex[:10]}"
    await _corrected(memory, conversation_ref, marker)
    ann = (await about(memory, conversation_ref, "ann", principal=OPERATOR)).entities[0]
    assert ann.name == "Ann" and not ann.is_anchor
    (current,) = ann.current
    (old,) = ann.superseded
    assert "Denver" in current.fact and [m.platform_message_id for m in current.messages] == ["3"]
    assert marker in current.messages[0].text
    assert "Boston" in old.fact and old.superseded_by == current.id and old.superseded_by_fact == current.fact
    assert old.superseded_at is not None and [m.platform_message_id for m in old.messages] == ["1"]

    predicted = (await provenance(memory, conversation_ref, "3", principal=OPERATOR)).dry_run
    assert predicted.relations_restored == [old.id] and current.id in predicted.relations_removed
    report = await forget(memory, conversation_ref, "3", principal=OPERATOR)
    assert report.retraction == predicted

    after = await about(memory, conversation_ref, "Ann", principal=OPERATOR)
    (restored,) = after.entities[0].current
    assert restored.id == old.id and restored.status == "active" and not after.entities[0].superseded
    assert [m.platform_message_id for m in restored.messages] == ["1"]
    outputs = [
        after.as_dict(),
        (await about(memory, conversation_ref, "Denver", principal=OPERATOR)).as_dict(),
        (await provenance(memory, conversation_ref, "3", principal=OPERATOR)).as_dict(),
        (await forgotten(memory, conversation_ref, principal=OPERATOR)).as_dict(),
        (await overview(memory, conversation_ref, principal=OPERATOR)).as_dict(),
        (await stats(memory, conversation_ref, principal=OPERATOR)).as_dict(),
    ]
    assert marker not in _texts(outputs) and "correction: i moved" not in _texts(outputs)
    assert outputs[2]["status"] == "deleted"
    (entry,) = outputs[3]["entries"]
    assert (entry["messages"], entry["requested_by"], entry["ids"]["relations_restored"]) == (
        ["3"],
        "operator",
        [old.id],
    )
    async with memory._sessions() as session:
        assert marker not in await find_tokens(session, "zq[0-9a-f]{10}")  # nor anywhere in the store


async def test_about_caps_relations_and_messages_and_counts_them_all(memory: Memory, conversation_ref: ConversationRef) -> None:
    """A hub with more relations than are shown (some superseded) and a fact with more
    supporting messages than are shown: the newest current relations first, each fact's
    earliest messages by message time (not by storage order), and every count whole."""
    count = RELATIONS_PER_ENTITY + 6
    times = random.Random(5).sample(range(count), count)  # stored in an order unlike their times
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    messages = [
        validate_message({"id": f"m{n}", "author": "Ann", "text": f"note {n}", "ts": start + timedelta(minutes=t)})
        for n, t in enumerate(times)
    ]
    popular = frozenset(f"m{n}" for n in range(MESSAGES_PER_FACT + 2))
    graph = SuppliedGraph(
        entities={"hub": SuppliedEntity("Quorvex", "thing", frozenset(m.platform_message_id for m in messages))}
        | {f"t{n}": SuppliedEntity(f"Item {n}", "thing", frozenset({f"m{n}"})) for n in range(count)},
        relations=[
            SuppliedRelation("hub", f"t{n}", "has", f"Quorvex has item {n}", popular if n == 0 else frozenset({f"m{n}"}))
            for n in range(count)
        ],
    )
    rng = random.Random(7)
    vectors = [[rng.gauss(0, 1) for _ in range(384)] for _ in range(3 * count + 1)]  # messages, entities, relations
    ids = await load_supplied(memory, conversation_ref, messages, vectors[:count], graph, iter(vectors[count:]))
    conversation_id = await resolve_conversation(memory, conversation_ref, principal=OPERATOR)
    superseded = set(ids.relations[-8:])  # the newest, so the older current ones must pass them
    async with memory._sessions.begin() as session:
        await session.execute(
            text("UPDATE relations SET status = 'superseded' WHERE conversation_id = :c AND id = ANY(:ids)"),
            {"c": conversation_id, "ids": sorted(superseded)},
        )

    (hub, *_) = (await about(memory, conversation_ref, "Quorvex", principal=OPERATOR)).entities
    assert (hub.name, hub.mentions, hub.relation_count) == ("Quorvex", count, count)
    newest = sorted(ids.relations, key=lambda r: (r in superseded, -r))[:RELATIONS_PER_ENTITY]
    assert [f.id for f in hub.current + hub.superseded] == newest
    assert len(hub.current) == count - len(superseded) and all(f.status == "active" for f in hub.current)
    assert [f.id for f in hub.superseded] == sorted(superseded, reverse=True)[: RELATIONS_PER_ENTITY - len(hub.current)]
    first = next(f for f in hub.current if f.id == ids.relations[0])
    by_time = sorted((m for m in messages if m.platform_message_id in popular), key=lambda m: m.message_time)
    assert first.message_count == len(popular)
    assert [m.platform_message_id for m in first.messages] == [m.platform_message_id for m in by_time][:MESSAGES_PER_FACT]
    assert (first.subject, first.object, first.messages[0].speaker) == ("Quorvex", "Item 0", "Ann")


async def test_a_non_admin_is_refused_by_every_query_and_logged(memory: Memory, conversation_ref: ConversationRef) -> None:
    await _corrected(memory, conversation_ref, "plain")
    trace = (await ask(memory, conversation_ref, "Where does Ann live?", principal=OPERATOR)).trace_id
    outsider = Principal.user("U-outsider")
    queries = {
        "about": about(memory, conversation_ref, "Ann", principal=outsider),
        "explain": explain(memory, conversation_ref, trace, principal=outsider),
        "forgotten": forgotten(memory, conversation_ref, principal=outsider),
        "provenance": provenance(memory, conversation_ref, "1", principal=outsider),
        "stats": stats(memory, conversation_ref, principal=outsider),
        "overview": overview(memory, conversation_ref, principal=outsider),
    }
    for call in queries.values():
        with pytest.raises(AccessDenied, match="STASHBIRD_ADMIN_IDS"):
            await call
    for principal in (Principal.event("Ev1"), Principal.job("sweep")):
        with pytest.raises(AccessDenied):
            await stats(memory, conversation_ref, principal=principal)
    with pytest.raises(AccessDenied):
        await audit_conversations(memory, principal=Principal.user("U-admin", "admin"))
    conversation_id = await resolve_conversation(memory, conversation_ref, principal=OPERATOR)
    async with memory._sessions() as session:
        refused = (
            await session.execute(
                select(AuditEntry.principal, AuditEntry.details["query"].astext).where(
                    AuditEntry.conversation_id == conversation_id, AuditEntry.action == "audit_refused"
                )
            )
        ).all()
    assert sorted(q for p, q in refused if p == "user:U-outsider") == sorted(queries)
    assert {p for p, _ in refused} == {"user:U-outsider", "event:Ev1", "job:sweep"}

    assert (await stats(memory, conversation_ref, principal=Principal.user("U-admin", "admin"))).messages == 3
    configured = dataclasses.replace(memory, admin_ids=frozenset({"U-outsider"}))
    assert (await stats(configured, conversation_ref, principal=outsider)).messages == 3
    with pytest.raises(AccessDenied):  # an unknown conversation is refused too, not revealed
        await stats(memory, ConversationRef("test", "", "no-such-conversation"), principal=outsider)
    with pytest.raises(UnknownConversation):
        await stats(memory, ConversationRef("test", "", "no-such-conversation"), principal=OPERATOR)


async def test_explain_an_answer_then_its_withdrawal(memory: Memory, conversation_ref: ConversationRef) -> None:
    marker = f"zq{uuid.uuid4().hex[:10]}"
    await _corrected(memory, conversation_ref, marker)
    answer = await ask(memory, conversation_ref, "Where did Ann move?", principal=OPERATOR)
    shown = await explain(memory, conversation_ref, answer.trace_id, principal=OPERATOR)
    assert shown.question == "Where did Ann move?" and shown.answer == answer.answer and not shown.withdrawn
    assert [e.label for e in shown.evidence] == [item.label for item in answer.evidence]
    assert shown.evidence[0].score == pytest.approx(answer.evidence[0].score, abs=1e-4)
    assert any(m.platform_message_id == "3" for e in shown.evidence for m in e.messages)
    assert shown.usage and shown.retrieval["mode"] == "extractive"

    await forget(memory, conversation_ref, "3", principal=Principal.event("Ev-del"))
    withdrawn = await explain(memory, conversation_ref, answer.trace_id, principal=OPERATOR)
    assert withdrawn.withdrawn and withdrawn.answer is None
    assert [(w.action, w.platform_message_id) for w in withdrawn.withdrawn_because] == [("delete", "3")]
    assert marker not in _texts(withdrawn.as_dict())
    assert any(e.messages_removed for e in withdrawn.evidence)
    with pytest.raises(ValidationError, match="answer"):
        await explain(memory, conversation_ref, answer.trace_id + 10_000, principal=OPERATOR)
    (entry,) = (await forgotten(memory, conversation_ref, principal=OPERATOR)).entries
    assert entry.requested_by == "platform event" and entry.ids["answers_withdrawn"] == [answer.trace_id]


async def test_nothing_from_another_conversation(memory: Memory, conversation_ref: ConversationRef) -> None:
    other = ConversationRef("test", "", f"other-{uuid.uuid4().hex[:8]}")
    marker = f"zq{uuid.uuid4().hex[:10]}"
    await ingest(
        memory,
        other,
        _messages([("1", "Ann", f"I live in Lisbon {marker}."), ("9", "Zed", "Zed owns a boat.")]),
        principal=OPERATOR,
    )
    await consolidate(memory, other, principal=OPERATOR, extractor=OfflineExtractor())
    await _corrected(memory, conversation_ref, "plain")
    answer = await ask(memory, conversation_ref, "Where does Ann live?", principal=OPERATOR)
    outputs = [
        (await about(memory, conversation_ref, "Ann", principal=OPERATOR)).as_dict(),
        (await about(memory, conversation_ref, "Zed", principal=OPERATOR)).as_dict(),
        (await about(memory, conversation_ref, "Lisbon", principal=OPERATOR)).as_dict(),
        (await provenance(memory, conversation_ref, "1", principal=OPERATOR)).as_dict(),
        (await explain(memory, conversation_ref, answer.trace_id, principal=OPERATOR)).as_dict(),
        (await overview(memory, conversation_ref, principal=OPERATOR)).as_dict(),
    ]
    for output in outputs[:3]:
        output.pop("query")  # the asker's own words
    text = _texts(outputs)
    assert marker not in text and "lisbon" not in text and "zed" not in text and "boat" not in text
    assert not outputs[1]["entities"]
    with pytest.raises(ValidationError, match="message"):
        await provenance(memory, conversation_ref, "9", principal=OPERATOR)  # the other conversation's message
    mine = await stats(memory, conversation_ref, principal=OPERATOR)
    assert (mine.messages, mine.speakers, mine.relations_active, mine.relations_superseded, mine.answers) == (3, 2, 1, 1, 1)
    listed = {c.conversation: c.messages for c in await audit_conversations(memory, principal=OPERATOR)}
    assert listed[str(conversation_ref)] == 3 and listed[str(other)] == 2
