"""Property: on a consolidated LoCoMo conversation, ``provenance``'s dry run predicts
exactly what ``forget`` then reports, for any message.

The conversation is built once: the first sessions of LoCoMo 30, consolidated by the
offline extractor, followed by the update benchmark's correction sequences with their
supplied extractions (restated facts, so that a deletion keeps a fact on its other
messages, and corrections, so that deleting one restores what it corrected), with a few answered questions and
communities (so that answers are withdrawn and communities dirtied too). Each deletion
runs on a connection whose outer transaction is rolled back afterwards, so every
example starts from the same memory.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import async_sessionmaker

from bot.locomo import load
from lab.bench.correction_sequences import SEQUENCES
from lab.bench.update import correction_sequence
from memory import (
    ConversationRef,
    Memory,
    OfflineExtractor,
    Principal,
    ReplayExtractor,
    ask,
    consolidate,
    forget,
    ingest,
    provenance,
)
from memory.api import resolve_conversation
from memory.audit.forgotten import ID_KINDS
from memory.store.schema import Community, CommunityMember, Entity
from tests.shared_data import shared_file

LOCOMO_30 = shared_file("locomo/30.json")
OPERATOR = Principal.operator("test")
SESSIONS = 4  # of LoCoMo 30's 19: the whole conversation takes a minute to consolidate
QUESTIONS = 6
COMMUNITY_SIZE = 8
EXAMPLES = 100  # drawn with replacement: enough for at least 50 different messages


@dataclasses.dataclass(frozen=True)
class Consolidated:
    ref: ConversationRef
    turns: list[str]
    corrections: list[str]


async def _communities(memory: Memory, ref: ConversationRef) -> None:
    """Communities of consecutive entities (the detection itself is another module's)."""
    conversation_id = await resolve_conversation(memory, ref, principal=OPERATOR)
    async with memory._sessions.begin() as session:
        entities = (
            (await session.execute(select(Entity.id).where(Entity.conversation_id == conversation_id).order_by(Entity.id)))
            .scalars()
            .all()
        )
        for start in range(0, len(entities), COMMUNITY_SIZE):
            community = Community(conversation_id=conversation_id, label=f"group {start}", summary="", dirty=False)
            session.add(community)
            await session.flush()
            session.add_all(
                CommunityMember(community_id=community.id, entity_id=e, conversation_id=conversation_id)
                for e in entities[start : start + COMMUNITY_SIZE]
            )


@pytest.fixture(scope="session")
async def consolidated(memory: Memory) -> Consolidated:
    conversation = load(LOCOMO_30)
    turns = [t.message for t in conversation.turns if t.session <= SESSIONS]
    sequences = [correction_sequence(name, sessions) for name, sessions in SEQUENCES.items()]
    corrections = [m for sequence in sequences for batch in sequence.batches for m in batch]
    ref = ConversationRef("test", "locomo", f"30-{uuid.uuid4().hex[:8]}")
    await ingest(memory, ref, turns, principal=OPERATOR)
    await consolidate(memory, ref, principal=OPERATOR, extractor=OfflineExtractor())
    await ingest(memory, ref, corrections, principal=OPERATOR)
    replay = ReplayExtractor.from_records([r for sequence in sequences for r in sequence.records])
    await consolidate(memory, ref, principal=OPERATOR, extractor=replay)
    for question in conversation.questions[:QUESTIONS]:
        await ask(memory, ref, question.question, principal=OPERATOR)
    await _communities(memory, ref)
    return Consolidated(ref, [m.platform_message_id for m in turns], [m.platform_message_id for m in corrections])


BRANCHES = (*ID_KINDS, "summary_cleared")
seen: Counter[str] = Counter()
deleted: set[str] = set()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
async def test_provenance_predicts_what_forget_reports(memory: Memory, consolidated: Consolidated, data: st.DataObject) -> None:
    message_id = data.draw(st.sampled_from(consolidated.turns) | st.sampled_from(consolidated.corrections), label="message")
    predicted = await provenance(memory, consolidated.ref, message_id, principal=OPERATOR)
    assert predicted.status == "stored"
    async with memory._engine.connect() as connection:
        outer = await connection.begin()
        try:
            inside = dataclasses.replace(
                memory,
                _sessions=async_sessionmaker(bind=connection, expire_on_commit=False, join_transaction_mode="create_savepoint"),
            )
            report = await forget(inside, consolidated.ref, message_id, principal=OPERATOR)
            still_there = (
                await connection.execute(
                    text("SELECT count(*) FROM relations WHERE id = ANY(:ids)"), {"ids": predicted.dry_run.relations_removed}
                )
            ).scalar_one()
        finally:
            await outer.rollback()
    assert report.status == "deleted"
    deleted.add(message_id)
    assert report.retraction == predicted.dry_run
    assert still_there == 0
    assert {r.id for r in predicted.relations} == set(report.retraction.relations_removed) | set(report.retraction.relations_kept)
    for branch in BRANCHES:
        if getattr(report.retraction, branch):
            seen[branch] += 1
            event(branch)


def test_the_property_exercised_every_branch() -> None:
    """Runs after the property (same module, in order): an example set that never hit a
    branch of the rules, or few messages, would prove little. Anchors are the exception:
    consolidation gives every relation's messages to both its ends, so no entity of a
    consolidated graph loses its last message while a relation still needs it (the
    anchor branch is covered in test_forgetting, on a graph built for it). No example,
    or none that reached a branch, is a failure too (the property runs first, in this
    module: run the module, not this test alone)."""
    assert len(deleted) >= 50, f"{len(deleted)} different messages deleted"
    assert set(seen) >= set(BRANCHES) - {"entities_anchored"}, seen
