"""Forgetting a set of messages at once (memory.forgetting.batch): the set rule is the
net effect of deleting the messages one by one, in any order."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

import memory as api
from memory.core import Memory
from memory.episodes.append import validate_message
from memory.forgetting import batch
from memory.forgetting.batch import forget_episodes, merge_retractions
from memory.forgetting.deletion import delete_episode
from memory.forgetting.plan import Retraction
from memory.forgetting.rules import (
    Decision,
    EntityFacts,
    SupplyGraph,
    chain_joins,
    decide_deletion,
    decide_deletions,
)
from memory.principal import Principal
from memory.store.conversations import ConversationRef, find_conversation
from memory.store.schema import (
    EPISODE_SPEAKER,
    AuditEntry,
    Checkpoint,
    Entity,
    Episode,
    Relation,
    RollingContextEntry,
    SearchDocument,
    Speaker,
    Tombstone,
)
from tests.pure.test_forgetting_rules import World, apply, worlds


def _net(world: World, order: list[int]) -> tuple[SupplyGraph, Decision]:
    """Delete ``order`` one by one; the final graph and what happened over all steps
    (removed: ever removed; anchored, kept, restored: as they stand at the end)."""
    start = world.graph
    removed_r: set[int] = set()
    removed_e: set[int] = set()
    restored: set[int] = set()
    dirtied: set[int] = set()
    for episode in order:
        decision = decide_deletion(world.graph, episode)
        apply(world, episode, decision)
        removed_r |= decision.relations_removed
        removed_e |= decision.entities_removed
        restored = (restored | decision.relations_restored) - removed_r
        dirtied |= decision.communities_dirtied
    gone = frozenset(order)
    final = world.graph
    held_e = {e for e, x in start.entities.items() if x.support & gone and e in final.entities}
    held_r = {r for r, rel in start.relations.items() if rel.support & gone and r in final.relations}
    return final, Decision(
        relations_removed=frozenset(removed_r),
        relations_kept=frozenset(held_r),
        relations_restored=frozenset(restored),
        entities_removed=frozenset(removed_e),
        entities_anchored=frozenset(e for e in held_e if not final.entities[e].support),
        entities_kept=frozenset(e for e in held_e if final.entities[e].support),
        communities_dirtied=frozenset(dirtied),
    )


def _cut(graph: SupplyGraph, gone: frozenset[int]) -> SupplyGraph:
    """Supports as the loader gives them: one deleted and one other episode at most."""

    def cut(support: frozenset[int]) -> frozenset[int]:
        return frozenset([*sorted(support & gone)[:1], *sorted(support - gone)[:1]])

    return SupplyGraph(
        {r: replace(rel, support=cut(rel.support)) for r, rel in graph.relations.items()},
        {e: EntityFacts(cut(x.support)) for e, x in graph.entities.items()},
        graph.communities,
    )


@settings(max_examples=400, deadline=None)
@given(worlds(), st.randoms(use_true_random=False))
def test_a_set_decides_what_deleting_its_messages_one_by_one_does(case: tuple[World, list[int]], rng: object) -> None:
    world, order = case
    gone = frozenset(order)
    start = world.graph
    at_once = decide_deletions(start, gone)
    assert decide_deletions(_cut(start, gone), gone) == at_once  # the loader's cut supports decide the same
    final, net = _net(world, order)
    assert at_once == net
    shuffled = list(order)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    again = World(start, {}, {}, set())
    assert _net(again, shuffled)[0] == final  # and the order does not matter


@settings(max_examples=200, deadline=None)
@given(worlds(), st.integers(1, 4))
def test_chunks_of_a_set_add_up_to_the_set(case: tuple[World, list[int]], size: int) -> None:
    """What memory.forgetting.batch does: chunks decided in turn, each on what the
    earlier left, give the whole set's decision."""
    world, order = case
    gone = frozenset(order)
    expected = decide_deletions(world.graph, gone)
    merged = Retraction()
    for start in range(0, len(order), size):
        chunk = frozenset(order[start : start + size])
        decision = decide_deletions(world.graph, chunk)
        for episode in sorted(chunk):
            apply(world, episode, decision if episode == min(chunk) else Decision())
        merged = merge_retractions(merged, _retraction(decision))
    assert merged == _retraction(expected)


def _retraction(decision: Decision) -> Retraction:
    return Retraction(
        relations_removed=sorted(decision.relations_removed),
        relations_kept=sorted(decision.relations_kept),
        relations_restored=sorted(decision.relations_restored),
        entities_removed=sorted(decision.entities_removed),
        entities_anchored=sorted(decision.entities_anchored),
        entities_kept=sorted(decision.entities_kept),
        communities_dirtied=sorted(decision.communities_dirtied),
    )


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 30), st.data())
def test_chain_joins_mend_the_chain_around_deleted_runs(length: int, data: st.DataObject) -> None:
    chain = list(range(1, length + 1))
    deleted = data.draw(st.frozensets(st.sampled_from(chain))) if chain else frozenset()
    links = {
        e: (chain[i - 1] if i else None, chain[i + 1] if i + 1 < len(chain) else None)
        for i, e in enumerate(chain)
        if e in deleted
    }
    prev = {e: (chain[i - 1] if i else None) for i, e in enumerate(chain)}
    nxt = {e: (chain[i + 1] if i + 1 < len(chain) else None) for i, e in enumerate(chain)}
    for before, after in chain_joins(links):
        if before is not None:
            nxt[before] = after
        if after is not None:
            prev[after] = before
    survivors = [e for e in chain if e not in deleted]
    walked, at = [], next((e for e in survivors if prev[e] is None), None)
    while at is not None:
        walked.append(at)
        at = nxt[at]
    assert walked == survivors


# --- against the real database ----------------------------------------------------------

OPERATOR = Principal.operator("test")
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
THREE = [  # (author, text): shared facts, one person's own words, replies about them
    ("ann", "I moved to Lisbon with Bob last spring."),
    ("bob", "Lisbon is great, I work at Feedzai there."),
    ("cy", "Bob told me he adopted a dog named Pixel."),
    ("bob", "Pixel loves the beach at Cascais."),
    ("ann", "Bob and I go hiking in Sintra."),
    ("bob", "Sintra hiking with Ann, and my sister Quinta joins."),
    ("cy", "I visited Lisbon in May."),
    ("bob", "Feedzai moved me to the Porto office."),
    ("ann", "Porto is far from Lisbon."),
    ("bob", "I sold my Vespa in Porto."),
]


async def _ingest(memory: Memory, ref: ConversationRef) -> int:
    messages = [
        validate_message({"id": f"m{i}", "author": author, "text": text, "ts": T0 + timedelta(minutes=i)})
        for i, (author, text) in enumerate(THREE, start=1)
    ]
    await api.ingest(memory, ref, messages, principal=OPERATOR)
    await api.consolidate(memory, ref, principal=OPERATOR)
    async with memory._sessions() as session:
        cid = await find_conversation(session, ref)
    assert cid is not None
    return cid


async def _snapshot(memory: Memory, cid: int) -> dict[str, object]:
    """The conversation's derived state by content (ids differ between conversations;
    an anchor's name holds its id)."""

    def anchor(name: str) -> str:
        return "anchor" if name.startswith("anchor:") else name

    async with memory._sessions() as session:

        async def rows(*columns: Any) -> list[tuple[Any, ...]]:
            table = columns[0].class_
            query = select(*columns).where(table.conversation_id == cid)
            return sorted(tuple(r) for r in (await session.execute(query)).all())

        pmid = dict(await rows(Episode.id, Episode.platform_message_id))
        names = {e: anchor(n) for e, n in await rows(Entity.id, Entity.name)}
        checkpoint = (await session.execute(select(Checkpoint).where(Checkpoint.conversation_id == cid))).scalar_one()
        return {
            "episodes": sorted(pmid.values()),
            "entities": sorted(
                (anchor(n), *rest) for n, *rest in await rows(Entity.name, Entity.type, Entity.summary, Entity.is_anchor)
            ),
            "relations": sorted(
                (f, status, names[s], names[o])
                for f, status, s, o in await rows(Relation.fact, Relation.status, Relation.subject_id, Relation.object_id)
            ),
            "documents": sorted((kind, anchor(text)) for kind, text in await rows(SearchDocument.kind, SearchDocument.text)),
            "context": sorted(
                (names.get(e, e), t, tuple(sorted(pmid[x] for x in ids)))
                for e, t, ids in await rows(
                    RollingContextEntry.entity_id, RollingContextEntry.text, RollingContextEntry.episode_ids
                )
            ),
            "summary": (
                checkpoint.summary,
                checkpoint.summary_dirty,
                sorted(pmid[e] for e in checkpoint.pending_episode_ids or []),
            ),
            "tombstones": await rows(Tombstone.platform_message_id),
        }


async def _episodes_of(memory: Memory, cid: int, author: str) -> list[int]:
    async with memory._sessions() as session:
        query = (
            select(Episode.id)
            .join(Speaker, EPISODE_SPEAKER)
            .where(Episode.conversation_id == cid, Speaker.platform_user_id == author)
            .order_by(Episode.id)
        )
        return list((await session.execute(query)).scalars())


async def test_a_batch_leaves_what_deleting_one_by_one_leaves(memory: Memory) -> None:
    one_by_one, batched = (ConversationRef("test", "", f"c-{uuid.uuid4().hex[:12]}") for _ in range(2))
    a, b = await _ingest(memory, one_by_one), await _ingest(memory, batched)
    assert await _snapshot(memory, a) == await _snapshot(memory, b)
    gone = await _episodes_of(memory, a, "bob")
    assert len(gone) == 5
    async with memory._sessions() as session:
        messages = {
            e: m
            for e, m in (await session.execute(select(Episode.id, Episode.platform_message_id).where(Episode.id.in_(gone)))).all()
        }
    for episode in reversed(gone):  # newest first: the order must not matter
        assert (await delete_episode(memory, a, messages[episode], principal="operator:test")).status == "deleted"
    report = await forget_episodes(
        memory, b, await _episodes_of(memory, b, "bob"), principal="operator:test", action="forget_author"
    )
    assert len(report.deleted) == 5 and report.not_stored == 0 and report.chunks == 1
    after = await _snapshot(memory, a)
    assert after == await _snapshot(memory, b)
    assert after["episodes"] == ["m1", "m3", "m5", "m7", "m9"]
    assert report.retraction.relations_removed and report.retraction.entities_kept  # both branches ran

    again = await forget_episodes(memory, b, gone + [10**12], principal="operator:test", action="forget_author")
    assert again.deleted == [] and again.not_stored == 6  # nothing left: a rerun is a no-op
    async with memory._sessions() as session:
        audit = (
            await session.execute(select(AuditEntry.action, AuditEntry.details).where(AuditEntry.conversation_id == b))
        ).all()
    rows = [d for action, d in audit if action == "forget_author"]
    assert len(rows) == 1 and rows[0]["deleted"] == report.deleted


async def test_chunks_inside_one_batch_agree_with_one_plan(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    whole, chunked = (ConversationRef("test", "", f"c-{uuid.uuid4().hex[:12]}") for _ in range(2))
    a, b = await _ingest(memory, whole), await _ingest(memory, chunked)
    await forget_episodes(memory, a, await _episodes_of(memory, a, "bob"), principal="operator:test", action="t")
    monkeypatch.setattr(batch, "CHUNK", 2)
    report = await forget_episodes(memory, b, await _episodes_of(memory, b, "bob"), principal="operator:test", action="t")
    assert report.chunks == 3
    assert await _snapshot(memory, a) == await _snapshot(memory, b)
