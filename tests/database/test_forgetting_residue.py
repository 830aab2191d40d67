"""No trace of a deleted (or edited-away) message survives anywhere: messages carry unique
marker tokens, are consolidated by the offline extractor, deleted, and then every text,
JSON, text-array and tsvector column of every table (from the catalogue) is scanned."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import datetime, timedelta, timezone

from sqlalchemy import select

import memory as api
from memory.api import Principal
from memory.core import Memory
from memory.episodes.append import validate_message
from memory.store.conversations import ConversationRef, find_conversation
from memory.store.documents import Document, upsert_documents
from memory.store.residue import find_tokens, text_columns
from memory.store.schema import (
    AnswerEvidence,
    AnswerTrace,
    Community,
    CommunityMember,
    Entity,
    Episode,
    Relation,
    RelationProvenance,
)

OPERATOR = Principal.operator("test")

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def markers(count: int) -> list[str]:
    """Unique lowercase alphanumeric tokens ending in a digit (stemming leaves them whole)."""
    return [f"zq{uuid.uuid4().hex[:8]}{i}" for i in range(count)]


async def ingest(memory: Memory, ref: ConversationRef, texts: list[str]) -> None:
    messages = [
        validate_message({"id": f"m{i}", "author": "Ann", "text": text, "ts": T0 + timedelta(minutes=i)})
        for i, text in enumerate(texts, start=1)
    ]
    await api.ingest(memory, ref, messages, principal=OPERATOR)


async def scan(memory: Memory, tokens: list[str]) -> dict[str, set[str]]:
    async with memory._sessions() as session:
        found = await find_tokens(session, "zq[0-9a-f]{8}[0-9]")
    return {t: found[t] for t in tokens if t in found}


async def test_the_scan_covers_every_text_like_column(memory: Memory) -> None:
    async with memory._sessions() as session:
        columns = set(await text_columns(session))
    expected = {
        ("episodes", "text"),
        ("search_documents", "tsv"),
        ("rolling_context_entries", "text"),
        ("checkpoints", "summary"),
        ("answer_traces", "answer"),
        ("audit_log", "details"),
        ("entities", "attributes"),
    }
    assert expected <= columns
    assert ("episodes", "message_time") not in columns
    # A partitioned table is read through itself (migration 0024's search documents), not
    # through its partitions too, whose identifier columns NOT_WORDS names by the table.
    assert not {t for t, _ in columns if t.startswith("search_documents_")}


async def test_deleted_markers_survive_nowhere(memory: Memory, conversation_ref: ConversationRef) -> None:
    gone1, gone2, gone3, kept = markers(4)
    await ingest(
        memory,
        conversation_ref,
        [
            f"I moved to {gone1.capitalize()} last spring.",
            f"Bob visited {gone2.capitalize()} with me.",
            f"I adopted a dog named {gone3.capitalize()}.",
            f"Bob likes {kept.capitalize()} a lot.",
            "I work at Google.",
        ],
    )
    await api.consolidate(memory, conversation_ref, principal=OPERATOR)
    async with memory._sessions.begin() as session:
        cid = await find_conversation(session, conversation_ref)
        episodes = dict(
            (await session.execute(select(Episode.platform_message_id, Episode.id).where(Episode.conversation_id == cid))).all()
        )
        ids = list((await session.execute(select(Entity.id).where(Entity.conversation_id == cid))).scalars())
        group = Community(conversation_id=cid, label=f"{gone1} group", summary=f"Ann, who moved to {gone1}", dirty=False)
        trace = AnswerTrace(conversation_id=cid, principal="u", question="Where did Ann move?", answer=f"To {gone1}.")
        session.add_all([group, trace])
        await session.flush()
        session.add_all([CommunityMember(community_id=group.id, entity_id=e, conversation_id=cid) for e in ids])
        session.add(AnswerEvidence(trace_id=trace.id, episode_id=episodes["m1"], conversation_id=cid))
        await upsert_documents(session, cid, [Document("community", group.id, group.summary, [1.0] + [0.0] * 383)])

    before = await scan(memory, [gone1, gone2, gone3, kept])
    derived = {"relations.fact", "entities.name", "checkpoints.summary", "rolling_context_entries.text"}
    assert before[gone1] & derived and before[gone3] & derived, before  # consolidation did carry them over

    for message in ("m1", "m2", "m3"):
        assert (await api.forget(memory, conversation_ref, message, principal=OPERATOR)).status == "deleted"

    after = await scan(memory, [gone1, gone2, gone3, kept])
    assert set(after) == {kept}, after  # the kept marker proves the scan still sees text
    async with memory._sessions() as session:
        unsupported = (
            await session.execute(
                select(Relation.id).where(
                    Relation.conversation_id == cid, ~Relation.id.in_(select(RelationProvenance.relation_id))
                )
            )
        ).all()
    assert unsupported == []


async def test_an_edit_leaves_no_trace_of_the_old_text_and_keeps_what_it_still_states(
    memory: Memory, conversation_ref: ConversationRef
) -> None:
    old, new = markers(2)
    await ingest(memory, conversation_ref, [f"I adopted a dog named {old.capitalize()}.", "I work at Google."])
    await api.consolidate(memory, conversation_ref, principal=OPERATOR)

    report = await api.edit(memory, conversation_ref, "m2", f"I work at Google with {new.capitalize()}.", principal=OPERATOR)
    assert report.status == "edited" and report.retraction.relations_removed
    await api.edit(memory, conversation_ref, "m1", "I adopted a cat.", principal=OPERATOR)
    assert await scan(memory, [old]) == {}
    await api.consolidate(memory, conversation_ref, principal=OPERATOR)

    facts: dict[str, set[str]] = {}
    async with memory._sessions() as session:
        cid = await find_conversation(session, conversation_ref)
        rows = await session.execute(
            select(Relation.fact, Episode.platform_message_id)
            .join(RelationProvenance, RelationProvenance.relation_id == Relation.id)
            .join(Episode, Episode.id == RelationProvenance.episode_id)
            .where(Episode.platform_message_id.in_(["m1", "m2"]), Relation.conversation_id == cid)
        )
        for fact, message in rows:
            facts.setdefault(fact, set()).add(message)
    assert any("Google" in fact and support == {"m2"} for fact, support in facts.items()), facts
    assert any("cat" in fact and support == {"m1"} for fact, support in facts.items()), facts
    assert await scan(memory, [old]) == {}


async def test_delete_during_consolidation_resurrects_nothing(memory: Memory, conversation_ref: ConversationRef) -> None:
    gone, kept = markers(2)
    texts = [f"I moved to {gone.capitalize()} last spring."] + [f"I visited city number {i} with Bob." for i in range(12)]
    texts.append(f"Bob likes {kept.capitalize()} a lot.")
    await ingest(memory, conversation_ref, texts)
    small_chunks = dataclasses.replace(memory, params=dataclasses.replace(memory.params, chunk_tokens=60))
    first_chunk_saved = asyncio.Event()
    deleted: list[str] = []

    async def delete_after_first_chunk() -> None:
        await first_chunk_saved.wait()
        deleted.append((await api.forget(memory, conversation_ref, "m1", principal=OPERATOR)).status)

    report, _ = await asyncio.gather(
        api.consolidate(small_chunks, conversation_ref, principal=OPERATOR, on_progress=lambda n: first_chunk_saved.set()),
        delete_after_first_chunk(),
    )
    assert report.chunks > 1 and deleted == ["deleted"]
    await api.consolidate(memory, conversation_ref, principal=OPERATOR)
    found = await scan(memory, [gone, kept])
    assert set(found) == {kept}, found
