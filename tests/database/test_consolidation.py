"""Consolidation on the real database: offline extraction, provenance, bot messages,
replayed decisions, crash and resume, deletions during a run."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select

import memory as api
from memory.api import Principal
from memory.consolidation.extraction import (
    Chunk,
    Extraction,
    OfflineExtractor,
    ReplayExtractor,
)
from memory.core import Memory
from memory.episodes.append import validate_message
from memory.forgetting.apply import remove_episode
from memory.params import MemoryParams
from memory.store.conversations import ConversationRef
from memory.store.rolling_context import in_order, load_context
from memory.store.schema import (
    Checkpoint,
    Entity,
    EntityProvenance,
    Episode,
    Relation,
    RelationProvenance,
    SearchDocument,
)

OPERATOR = Principal.operator("test")

T0 = datetime(2026, 3, 1, 9, tzinfo=timezone.utc)


def messages(rows: list[tuple[str, str, str]], start: int = 0) -> list:
    """(id, author, text) rows; an author called "bot" speaks with the bot role."""
    return [
        validate_message(
            {
                "id": mid,
                "author": author,
                "role": "bot" if author == "bot" else "user",
                "text": text,
                "ts": T0 + timedelta(minutes=start + i),
            }
        )
        for i, (mid, author, text) in enumerate(rows)
    ]


async def episode_ids(memory: Memory, conversation_id: int) -> dict[str, int]:
    async with memory._sessions() as session:
        rows = await session.execute(
            select(Episode.platform_message_id, Episode.id).where(Episode.conversation_id == conversation_id)
        )
        return dict(rows.all())


async def graph_state(memory: Memory, conversation_id: int) -> dict:
    """Entities by name with provenance; relations with status and provenance."""
    async with memory._sessions() as session:
        entities = {
            e.id: e.name
            for e in (await session.execute(select(Entity).where(Entity.conversation_id == conversation_id))).scalars()
        }
        entity_support: dict[str, set[int]] = {}
        for entity_id, episode_id in await session.execute(
            select(EntityProvenance.entity_id, EntityProvenance.episode_id).where(
                EntityProvenance.conversation_id == conversation_id
            )
        ):
            entity_support.setdefault(entities[entity_id], set()).add(episode_id)
        relations = list(
            (
                await session.execute(select(Relation).where(Relation.conversation_id == conversation_id).order_by(Relation.id))
            ).scalars()
        )
        relation_support: dict[int, set[int]] = {}
        for relation_id, episode_id in await session.execute(
            select(RelationProvenance.relation_id, RelationProvenance.episode_id).where(
                RelationProvenance.conversation_id == conversation_id
            )
        ):
            relation_support.setdefault(relation_id, set()).add(episode_id)
        documents = set(
            (
                await session.execute(
                    select(SearchDocument.kind, SearchDocument.ref_id).where(SearchDocument.conversation_id == conversation_id)
                )
            ).all()
        )
        checkpoint = await session.get(Checkpoint, conversation_id)
        context = in_order(await load_context(session, conversation_id))
    return {
        "entities": entities,
        "entity_support": entity_support,
        "relations": [
            {
                "id": r.id,
                "subject": entities[r.subject_id],
                "predicate": r.predicate,
                "object": entities[r.object_id],
                "fact": r.fact,
                "status": r.status,
                "superseded_by": r.superseded_by,
                "support": relation_support.get(r.id, set()),
            }
            for r in relations
        ],
        "documents": documents,
        "checkpoint": checkpoint,
        "context": context,
    }


async def test_offline_consolidation_builds_graph_with_provenance(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    await api.ingest(
        memory,
        conversation_ref,
        messages(
            [
                ("m1", "Ann", "I moved to Boston last month."),
                ("m2", "bot", "Noted: Ann moved to Boston and Bob works at Google."),
                ("m3", "Bob", "I work at Google now."),
                ("m4", "Ann", "I love Boston, honestly."),
            ]
        ),
        principal=OPERATOR,
    )
    ids = await episode_ids(memory, conversation_id)
    report = await api.consolidate(memory, conversation_ref, principal=OPERATOR)
    state = await graph_state(memory, conversation_id)

    assert report.episodes == 4 and report.chunks == 1 and report.llm_calls == 0
    facts = {(r["subject"], r["predicate"], r["object"]): r for r in state["relations"]}
    assert facts[("Ann", "move_to", "Boston")]["support"] == {ids["m1"]}
    assert facts[("Bob", "work_at", "Google")]["support"] == {ids["m3"]}
    assert facts[("Ann", "love", "Boston")]["support"] == {ids["m4"]}
    assert state["entity_support"]["Boston"] == {ids["m1"], ids["m4"]}
    assert state["entity_support"]["Ann"] == {ids["m1"], ids["m4"]}
    # the bot's message is context, never evidence
    assert all(ids["m2"] not in support for support in state["entity_support"].values())
    assert all(ids["m2"] not in r["support"] for r in state["relations"])
    # every entity and relation has its search document
    assert {("entity", i) for i in state["entities"]} | {("relation", r["id"]) for r in state["relations"]} <= state["documents"]
    checkpoint = state["checkpoint"]
    assert checkpoint.last_episode_id == max(ids.values())
    assert checkpoint.entity_count == len(state["entities"])
    assert {item["name"] for item in state["context"]} >= {"Ann", "Boston", "Bob", "Google"}
    assert set(checkpoint.summary_episode_ids) <= set(ids.values()) and "Boston" in checkpoint.summary

    # nothing new: a second run does nothing
    again = await api.consolidate(memory, conversation_ref, principal=OPERATOR)
    assert again.episodes == 0 and (await graph_state(memory, conversation_id))["relations"] == state["relations"]


def _record(message_id: str, *relations: tuple[str, str, str, str, str | None]) -> dict:
    return {
        "message_id": message_id,
        "relations": [
            {"subject": s, "predicate": p, "object": o, "fact": f, **({"decision": d} if d else {})}
            for s, p, o, f, d in relations
        ],
    }


async def test_replayed_duplicates_and_contradictions(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    records = [
        _record("a1", ("Ann", "lives_in", "Boston", "Ann lives in Boston", "new")),
        _record("a2", ("Ann", "lives_in", "Boston", "Ann lives in Boston.", "duplicate")),
        _record("a3", ("Ann", "lives_in", "Denver", "Ann moved to Denver", "contradiction")),
        _record("a4", ("Ann", "lives_in", "Denver", "Ann now lives in Denver", None)),
    ]
    extractor = ReplayExtractor.from_records(records)
    rows = [
        ("a1", "Ann", "I live in Boston"),
        ("a2", "Ann", "Boston is home"),
        ("a3", "Ann", "Moved to Denver!"),
        ("a4", "Ann", "Denver it is"),
    ]
    await api.ingest(memory, conversation_ref, messages(rows[:2]), principal=OPERATOR)
    await api.consolidate(memory, conversation_ref, principal=OPERATOR, extractor=extractor)
    await api.ingest(memory, conversation_ref, messages(rows[2:], start=2), principal=OPERATOR)
    report = await api.consolidate(memory, conversation_ref, principal=OPERATOR, extractor=extractor)
    ids = await episode_ids(memory, conversation_id)
    relations = (await graph_state(memory, conversation_id))["relations"]
    boston, denver = relations
    assert (boston["object"], boston["status"], boston["support"]) == ("Boston", "superseded", {ids["a1"], ids["a2"]})
    assert boston["superseded_by"] == denver["id"]
    assert (denver["status"], denver["support"]) == ("active", {ids["a3"], ids["a4"]})
    assert report.relations_superseded == 1 and report.relations_duplicate == 1


CITIES = ["Paris", "Lima", "Oslo", "Rome", "Cairo", "Quito", "Dakar", "Hanoi"]


class CrashOnSecondChunk:
    """Wraps an extractor; its second chunk raises, like a process killed mid-run."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, 0

    async def extract(self, chunk: Chunk) -> Extraction:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("killed")
        return await self.inner.extract(chunk)


async def test_crash_and_resume_loses_and_duplicates_nothing(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    small = dataclasses.replace(memory, params=MemoryParams(chunk_tokens=40, chunk_overlap=0.25))
    rows = [(f"c{i}", "Ann" if i % 2 else "Bob", f"I visited {city} yesterday.") for i, city in enumerate(CITIES)]
    await api.ingest(memory, conversation_ref, messages(rows), principal=OPERATOR)
    crashing = CrashOnSecondChunk(OfflineExtractor())
    with pytest.raises(RuntimeError):
        await api.consolidate(small, conversation_ref, principal=OPERATOR, extractor=crashing)
    async with memory._sessions() as session:
        after_crash = (await session.get(Checkpoint, conversation_id)).last_episode_id
    first_pass = await graph_state(memory, conversation_id)
    assert 0 < after_crash < max((await episode_ids(memory, conversation_id)).values())
    assert 0 < len(first_pass["relations"]) < 8

    report = await api.consolidate(small, conversation_ref, principal=OPERATOR, extractor=OfflineExtractor())
    state = await graph_state(memory, conversation_id)
    ids = await episode_ids(memory, conversation_id)
    assert report.chunks >= 2
    by_object = {r["object"].lower(): r for r in state["relations"]}
    assert sorted(by_object) == sorted(c.lower() for c in CITIES)  # each fact once
    assert all(by_object[c.lower()]["support"] == {ids[f"c{i}"]} for i, c in enumerate(CITIES))
    assert len(state["relations"]) == 8
    assert state["checkpoint"].last_episode_id == max(ids.values())


class DeleteDuring:
    """Deletes an episode after extraction, before the chunk is written."""

    def __init__(self, memory: Memory, inner, episode_id: int) -> None:
        self.memory, self.inner, self.episode_id = memory, inner, episode_id

    async def extract(self, chunk: Chunk) -> Extraction:
        extraction = await self.inner.extract(chunk)
        async with self.memory._sessions.begin() as session:  # the episode row's part of a deletion
            episode = (await session.execute(select(Episode).where(Episode.id == self.episode_id))).scalar_one()
            await remove_episode(session, episode.conversation_id, episode)
        return extraction


async def test_deletion_during_consolidation_is_not_resurrected(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    await api.ingest(
        memory,
        conversation_ref,
        messages(
            [
                ("d1", "Ann", "I moved to Lisbon."),
                ("d2", "Bob", "I adopted Rex."),
            ]
        ),
        principal=OPERATOR,
    )
    ids = await episode_ids(memory, conversation_id)
    report = await api.consolidate(
        memory, conversation_ref, principal=OPERATOR, extractor=DeleteDuring(memory, OfflineExtractor(), ids["d1"])
    )
    state = await graph_state(memory, conversation_id)
    assert report.skipped_deleted == 1
    assert "Lisbon" not in state["entities"].values()
    assert [r["object"] for r in state["relations"]] == ["Rex"]
    assert ids["d1"] not in state["checkpoint"].summary_episode_ids and "Lisbon" not in state["checkpoint"].summary
    assert all(ids["d1"] not in item["episode_ids"] for item in state["context"])


class RacedByAnotherRun:
    """While this run extracts, another run consolidates the same episodes and saves first."""

    def __init__(self, memory: Memory, ref: ConversationRef) -> None:
        self.memory, self.ref = memory, ref

    async def extract(self, chunk: Chunk) -> Extraction:
        await api.consolidate(self.memory, self.ref, principal=OPERATOR, extractor=OfflineExtractor())
        return await OfflineExtractor().extract(chunk)


async def test_concurrent_runs_never_write_a_chunk_twice(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    await api.ingest(memory, conversation_ref, messages([("r1", "Ann", "I moved to Oslo.")]), principal=OPERATOR)
    report = await api.consolidate(
        memory, conversation_ref, principal=OPERATOR, extractor=RacedByAnotherRun(memory, conversation_ref)
    )
    assert report.stopped and report.chunks == 0
    assert [r["object"] for r in (await graph_state(memory, conversation_id))["relations"]] == ["Oslo"]


async def test_edited_episodes_pending_are_consolidated_again(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    await api.ingest(
        memory, conversation_ref, messages([("e1", "Ann", "I adopted Rex."), ("e2", "Bob", "I play chess.")]), principal=OPERATOR
    )
    await api.consolidate(memory, conversation_ref, principal=OPERATOR)
    ids = await episode_ids(memory, conversation_id)
    async with memory._sessions.begin() as session:  # what an edit leaves for consolidation
        episode = await session.get(Episode, (conversation_id, ids["e1"]))
        episode.text, episode.edited_at = "I adopted Luna.", T0 + timedelta(days=1)
        checkpoint = await session.get(Checkpoint, conversation_id)
        checkpoint.pending_episode_ids = [ids["e1"]]
    report = await api.consolidate(memory, conversation_ref, principal=OPERATOR)
    state = await graph_state(memory, conversation_id)
    assert report.episodes == 1
    assert state["entity_support"]["Luna"] == {ids["e1"]}
    assert state["checkpoint"].pending_episode_ids == []
    assert state["checkpoint"].last_episode_id == max(ids.values())


async def test_a_capped_run_takes_the_oldest_messages_and_leaves_the_rest_for_the_next(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    rows = [("c1", "Ann", "I adopted Rex."), ("c2", "Bob", "I play chess."), ("c3", "Cat", "I moved to Oslo.")]
    await api.ingest(memory, conversation_ref, messages(rows), principal=OPERATOR)
    ids = await episode_ids(memory, conversation_id)
    first = await api.consolidate(memory, conversation_ref, principal=OPERATOR, max_tokens=30)  # two lines of ~13
    assert first.episodes == 2
    assert (await graph_state(memory, conversation_id))["checkpoint"].last_episode_id == ids["c2"]
    assert await api.pending(memory, conversation_ref, principal=OPERATOR) == 1
    rest = await api.consolidate(memory, conversation_ref, principal=OPERATOR, max_tokens=1)  # one, however long
    assert rest.episodes == 1 and await api.pending(memory, conversation_ref, principal=OPERATOR) == 0
    assert "Oslo" in (await graph_state(memory, conversation_id))["entity_support"]
