"""Deleting and editing episodes against the real database: every branch of Algorithm 1,
tombstones, checkpoints, answer traces, the audit log and edits."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select, text

from memory.core import Memory
from memory.episodes.append import append_messages, validate_message
from memory.forgetting.apply import ANSWER_WITHDRAWN, Removed, apply_decision, remove_episodes
from memory.forgetting.deletion import delete_episode, edit_episode
from memory.forgetting.plan import plan_retraction
from memory.forgetting.policies import delete_by_policy
from memory.forgetting.rules import Decision
from memory.graph.wording import EntityWitness
from memory.graph.writes import create_entity, create_relation, supersede_relation
from memory.store.documents import Document, upsert_documents
from memory.store.rolling_context import in_order, load_context, save_context
from memory.store.schema import (
    AnswerEvidence,
    AnswerTrace,
    AuditEntry,
    Checkpoint,
    Community,
    CommunityMember,
    Entity,
    EntityProvenance,
    Episode,
    Relation,
    RelationProvenance,
    SearchDocument,
)

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
VECTOR = [1.0] + [0.0] * 383


async def add_messages(memory: Memory, conversation_id: int, texts: list[str], prefix: str = "m") -> list[int]:
    messages = [
        validate_message({"id": f"{prefix}{i}", "author": "ann", "text": t, "ts": T0 + timedelta(minutes=i)})
        for i, t in enumerate(texts, start=1)
    ]
    async with memory._sessions.begin() as session:
        results = await append_messages(session, memory.embedder, conversation_id, messages, [VECTOR] * len(messages))
    return [r.episode_id for r in results]


async def entity(session, cid: int, name: str, support: list[int], summary: str = "") -> int:
    return await create_entity(session, cid, name=name, type_="thing", summary=summary, embedding=VECTOR, episode_ids=support)


async def relation(session, cid: int, subject: int, obj: int, fact: str, support: list[int]) -> int:
    return await create_relation(
        session, cid, subject_id=subject, object_id=obj, predicate="rel", fact=fact, embedding=VECTOR, episode_ids=support
    )


async def community(session, cid: int, members: list[int], summary: str) -> int:
    row = Community(conversation_id=cid, label="group", summary=summary, dirty=False)
    session.add(row)
    await session.flush()
    session.add_all([CommunityMember(community_id=row.id, entity_id=e, conversation_id=cid) for e in members])
    await upsert_documents(session, cid, [Document("community", row.id, summary, VECTOR)])
    return row.id


async def documents(memory: Memory, kind: str, ids: list[int]) -> set[int]:
    async with memory._sessions() as session:
        rows = await session.execute(
            select(SearchDocument.ref_id).where(SearchDocument.kind == kind, SearchDocument.ref_id.in_(ids))
        )
        return set(rows.scalars())


async def test_every_branch_of_one_deletion(memory: Memory, conversation_id: int) -> None:
    cid = conversation_id
    e1, e2, e3 = await add_messages(
        memory, cid, ["Ann moved to Boston, loves Paris", "Ann was in Paris with her cat", "Ann again"]
    )
    async with memory._sessions.begin() as session:
        ann = await entity(session, cid, "Ann", [e1, e2, e3], summary="Ann moved to Boston")
        boston = await entity(session, cid, "Boston", [e1])
        paris = await entity(session, cid, "Paris", [e1])
        cat = await entity(session, cid, "Cat", [e2])
        bob = await create_entity(
            session,
            cid,
            name="Bob",
            type_="person",
            summary="Bob is kind",
            embedding=VECTOR,
            episode_ids=[e1, e2],
            attributes={"summary_episode_ids": [e2]},
            witnesses=[EntityWitness(e1, "Bob", "person"), EntityWitness(e2, "Bob", "person", "Bob is kind", frozenset({e2}))],
        )
        lives = await relation(session, cid, ann, boston, "Ann lives in Boston", [e1])
        visited = await relation(session, cid, ann, paris, "Ann visited Paris", [e1, e2])
        owns = await relation(session, cid, ann, cat, "Ann owns a cat", [e2])
        with_ann = await community(session, cid, [ann, cat], "Ann and her cat, of Boston")
        cats_only = await community(session, cid, [cat], "the cat")

    report = await delete_episode(memory, cid, "m1", principal="test")

    r = report.retraction
    assert report.status == "deleted" and report.episode_id == e1
    assert r.relations_removed == [lives] and r.relations_kept == [visited]
    assert r.entities_removed == [boston] and r.entities_anchored == [paris] and r.entities_kept == [ann, bob]
    assert r.communities_dirtied == [with_ann]
    async with memory._sessions() as session:
        relations = dict(
            (await session.execute(select(Relation.id, Relation.status).where(Relation.conversation_id == cid))).all()
        )
        support = set(
            (
                await session.execute(select(RelationProvenance.episode_id).where(RelationProvenance.relation_id == visited))
            ).scalars()
        )
        entities = {e.id: e for e in (await session.execute(select(Entity).where(Entity.conversation_id == cid))).scalars()}
        dirty = dict((await session.execute(select(Community.id, Community.dirty).where(Community.conversation_id == cid))).all())
        episode_left = (await session.execute(select(Episode.id).where(Episode.id == e1))).scalar()
        provenance_left = (
            await session.execute(select(EntityProvenance.entity_id).where(EntityProvenance.episode_id == e1))
        ).all()
    assert relations == {visited: "active", owns: "active"}
    assert support == {e2}
    assert set(entities) == {ann, paris, cat, bob}
    anchor = entities[paris]
    assert anchor.is_anchor and anchor.name == f"anchor:{paris}" and anchor.embedding is None and anchor.summary == ""
    assert entities[ann].summary == "" and entities[ann].name == "Ann"  # summary may have quoted m1
    assert entities[bob].summary == "Bob is kind"  # written from m2 only
    assert await documents(memory, "relation", [lives, visited, owns]) == {visited, owns}
    assert await documents(memory, "entity", [ann, boston, paris, cat, bob]) == {ann, cat, bob}
    assert await documents(memory, "community", [with_ann, cats_only]) == {cats_only}
    assert await documents(memory, "episode", [e1, e2]) == {e2}
    assert dirty == {with_ann: True, cats_only: False}
    assert episode_left is None and provenance_left == []


async def test_anchor_is_deleted_when_its_last_relation_goes(memory: Memory, conversation_id: int) -> None:
    cid = conversation_id
    e1, e2 = await add_messages(memory, cid, ["Ann visited Paris", "Paris trip again"])
    async with memory._sessions.begin() as session:
        ann = await entity(session, cid, "Ann", [e2])
        paris = await entity(session, cid, "Paris", [e1])
        visited = await relation(session, cid, ann, paris, "Ann visited Paris", [e1, e2])
    first = await delete_episode(memory, cid, "m1", principal="test")
    assert first.retraction.entities_anchored == [paris]
    second = await delete_episode(memory, cid, "m2", principal="test")
    assert second.retraction.relations_removed == [visited]
    assert set(second.retraction.entities_removed) == {ann, paris}
    async with memory._sessions() as session:
        assert (await session.execute(select(Entity.id).where(Entity.conversation_id == cid))).all() == []


async def test_chain_is_reconnected_at_middle_head_and_tail(memory: Memory, conversation_id: int) -> None:
    cid = conversation_id
    ids = await add_messages(memory, cid, ["one", "two", "three", "four", "five"])

    async def links() -> dict[int, tuple[int | None, int | None]]:
        async with memory._sessions() as session:
            rows = await session.execute(
                select(Episode.id, Episode.prev_id, Episode.next_id).where(Episode.conversation_id == cid)
            )
            return {i: (p, n) for i, p, n in rows}

    assert (await delete_episode(memory, cid, "m3", principal="test")).chain == {"prev": ids[1], "next": ids[3]}
    assert (await links())[ids[1]] == (ids[0], ids[3]) and (await links())[ids[3]] == (ids[1], ids[4])
    await delete_episode(memory, cid, "m1", principal="test")  # head
    assert (await links())[ids[1]] == (None, ids[3])
    await delete_episode(memory, cid, "m5", principal="test")  # tail
    assert await links() == {ids[1]: (None, ids[3]), ids[3]: (ids[1], None)}


@pytest.mark.parametrize("gone", [{4}, {2, 4}, {2, 3}, {1, 2}, {6, 7}, {1, 3, 5, 7}, {2, 3, 5, 6}, {1, 2, 3, 4, 5, 6, 7}])
async def test_removing_runs_of_episodes_mends_the_chain(memory: Memory, conversation_id: int, gone: set[int]) -> None:
    """Runs next to each other share a survivor, which gets a new neighbour on each side."""
    cid = conversation_id
    ids = await add_messages(memory, cid, [f"message {i}" for i in range(1, 8)])
    deleted = {ids[i - 1] for i in gone}
    async with memory._sessions.begin() as session:
        rows = (await session.execute(select(Episode).where(Episode.id.in_(deleted)))).scalars().all()
        removed = Removed({e.id: (e.prev_id, e.next_id) for e in rows}, {e.id: e.platform_message_id for e in rows})
        await remove_episodes(session, cid, removed)
    async with memory._sessions() as session:
        links = {
            i: (p, n)
            for i, p, n in await session.execute(
                select(Episode.id, Episode.prev_id, Episode.next_id).where(Episode.conversation_id == cid)
            )
        }
    survivors = [e for e in ids if e not in deleted]
    assert {e: links[e] for e in survivors} == {
        e: (survivors[k - 1] if k else None, survivors[k + 1] if k + 1 < len(survivors) else None)
        for k, e in enumerate(survivors)
    }
    assert deleted.isdisjoint(links)


async def test_tombstones_and_no_ops(memory: Memory, conversation_id: int) -> None:
    cid = conversation_id
    early = await delete_episode(memory, cid, "late", principal="test")
    assert early.status == "tombstoned" and early.episode_id is None
    again = await delete_episode(memory, cid, "late", principal="test")
    assert again.status == "already_deleted"
    late = validate_message({"id": "late", "author": "bob", "text": "I arrive late", "ts": T0})
    async with memory._sessions.begin() as session:
        [result] = await append_messages(session, memory.embedder, cid, [late], [VECTOR])
    assert result.status == "tombstoned"

    await add_messages(memory, cid, ["kept for a moment"])
    assert (await delete_episode(memory, cid, "m1", principal="test")).status == "deleted"
    assert (await delete_episode(memory, cid, "m1", principal="test")).status == "already_deleted"
    redelivered = validate_message({"id": "m1", "author": "ann", "text": "kept for a moment", "ts": T0})
    async with memory._sessions.begin() as session:
        [result] = await append_messages(session, memory.embedder, cid, [redelivered], [VECTOR])
    assert result.status == "tombstoned"  # a redelivered event cannot resurrect it


async def test_a_retraction_plans_its_transaction_with_its_values(memory: Memory, conversation_id: int) -> None:
    # A generic plan, costed for an average conversation, is wrong for the largest: the
    # plan's statements and the writes after it are planned with their values, in that
    # transaction only.
    [episode_id] = await add_messages(memory, conversation_id, ["planned"])
    show = text("SELECT current_setting('plan_cache_mode')")
    async with memory._sessions.begin() as session:
        assert await session.scalar(show) == "auto"
        plan = await plan_retraction(session, conversation_id, episode_id, for_update=True)
        assert plan.episode_ids == {episode_id}
        assert await session.scalar(show) == "force_custom_plan"
    async with memory._sessions.begin() as session:  # SET LOCAL: gone with the transaction
        assert await session.scalar(show) == "auto"


async def test_deleting_a_correction_restores_the_corrected_fact(memory: Memory, conversation_id: int) -> None:
    cid = conversation_id
    e1, e2 = await add_messages(memory, cid, ["Ann lives in Boston", "Actually Ann moved to Denver"])
    async with memory._sessions.begin() as session:
        ann = await entity(session, cid, "Ann", [e1, e2])
        boston = await entity(session, cid, "Boston", [e1])
        denver = await entity(session, cid, "Denver", [e2])
        old = await relation(session, cid, ann, boston, "Ann lives in Boston", [e1])
        new = await relation(session, cid, ann, denver, "Ann lives in Denver", [e2])
        await supersede_relation(session, cid, old, new, T0)
    report = await delete_episode(memory, cid, "m2", principal="test")
    assert report.retraction.relations_restored == [old] and report.retraction.relations_removed == [new]
    async with memory._sessions() as session:
        row = (await session.execute(select(Relation).where(Relation.id == old))).scalar_one()
        current = (
            await session.execute(
                select(SearchDocument.is_current).where(SearchDocument.kind == "relation", SearchDocument.ref_id == old)
            )
        ).scalar_one()
    assert (row.status, row.superseded_by, row.invalid_at, current) == ("active", None, None, True)


async def _superseded_pair(memory: Memory, cid: int, prefix: str) -> tuple[int, int, int]:
    """Ann lives in Boston (m1), superseded by Ann lives in Denver (m2); returns old, new, Denver."""
    e1, e2 = await add_messages(memory, cid, ["Ann lives in Boston", "Actually Ann moved to Denver"], prefix)
    async with memory._sessions.begin() as session:
        ann = await entity(session, cid, "Ann", [e1])
        boston = await entity(session, cid, "Boston", [e1])
        denver = await entity(session, cid, "Denver", [e2])
        old = await relation(session, cid, ann, boston, "Ann lives in Boston", [e1])
        new = await relation(session, cid, ann, denver, "Ann lives in Denver", [e2])
        await supersede_relation(session, cid, old, new, T0)
    return old, new, denver


async def _link(memory: Memory, relation_id: int) -> tuple[str, int | None]:
    async with memory._sessions() as session:
        row = await session.execute(select(Relation.status, Relation.superseded_by).where(Relation.id == relation_id))
        status, superseded_by = row.one()
        return status, superseded_by


async def test_a_superseder_that_goes_unrestored_leaves_no_link(memory: Memory, conversation_id: int) -> None:
    """The key has no ON DELETE action (Citus refuses SET NULL): the link is cleared in
    the same transaction, whether the decision lists the superseder or deleting an
    entity takes it along (ON DELETE CASCADE)."""
    old, new, _ = await _superseded_pair(memory, conversation_id, "p")
    await delete_by_policy(memory, conversation_id, "p2", "cascade")  # the cascade policy restores nothing
    assert await _link(memory, old) == ("superseded", None)
    old, new, denver = await _superseded_pair(memory, conversation_id, "q")
    async with memory._sessions.begin() as session:
        await apply_decision(session, conversation_id, Decision(entities_removed=frozenset({denver})))
    assert await _link(memory, old) == ("superseded", None)
    async with memory._sessions() as session:
        assert (await session.execute(select(Relation.id).where(Relation.id == new))).first() is None


async def test_checkpoint_answers_and_audit_lose_the_episode(memory: Memory, conversation_id: int) -> None:
    cid = conversation_id
    e1, e2 = await add_messages(memory, cid, ["Ann adopted a parrot named Kiwi", "Ann likes tea"])
    async with memory._sessions.begin() as session:
        ann = await entity(session, cid, "Ann", [e1, e2])
        kiwi = await entity(session, cid, "Kiwi", [e1])
        session.add(
            Checkpoint(
                conversation_id=cid,
                summary="Ann adopted a parrot named Kiwi; she likes tea.",
                summary_episode_ids=[e1, e2],
                last_episode_id=e2,
                pending_episode_ids=[e1],
            )
        )
        context = [
            {"entity_id": ann, "name": "Ann", "text": "Ann: parrot Kiwi, tea", "episode_ids": [e1, e2]},
            {"entity_id": kiwi, "name": "Kiwi", "text": "Kiwi: Ann's parrot", "episode_ids": [e1]},
        ]
        await save_context(session, cid, {}, context)
        trace = AnswerTrace(conversation_id=cid, principal="u1", question="What pet does Ann have?", answer="A parrot named Kiwi")
        untouched = AnswerTrace(conversation_id=cid, principal="u1", question="What does Ann drink?", answer="Tea")
        session.add_all([trace, untouched])
        await session.flush()
        session.add_all(
            [
                AnswerEvidence(trace_id=trace.id, episode_id=e1, conversation_id=cid),
                AnswerEvidence(trace_id=trace.id, episode_id=e2, conversation_id=cid),
                AnswerEvidence(trace_id=untouched.id, episode_id=e2, conversation_id=cid),
            ]
        )

    report = await delete_episode(memory, cid, "m1", principal="admin-7")

    r = report.retraction
    assert (r.context_entries_dropped, r.context_entries_pruned, r.summary_cleared) == (1, 1, True)
    assert r.answers_withdrawn == [trace.id]
    async with memory._sessions() as session:
        checkpoint = (await session.execute(select(Checkpoint).where(Checkpoint.conversation_id == cid))).scalar_one()
        answers = dict(
            (await session.execute(select(AnswerTrace.id, AnswerTrace.answer).where(AnswerTrace.conversation_id == cid))).all()
        )
        evidence = set(
            (
                await session.execute(
                    select(AnswerEvidence.trace_id, AnswerEvidence.episode_id).where(AnswerEvidence.conversation_id == cid)
                )
            ).all()
        )
        audit = (await session.execute(select(AuditEntry).where(AuditEntry.conversation_id == cid))).scalar_one()
        context = in_order(await load_context(session, cid))
    assert context == [{"entity_id": ann, "name": "Ann", "text": "Ann (thing)", "episode_ids": [e2]}]
    assert report.summary_rebuilt and checkpoint.summary == "ann: Ann likes tea" and not checkpoint.summary_dirty
    assert checkpoint.summary_episode_ids == [e2] and checkpoint.pending_episode_ids == []
    assert answers == {trace.id: ANSWER_WITHDRAWN, untouched.id: "Tea"}
    assert evidence == {(trace.id, e2), (untouched.id, e2)}
    assert (audit.principal, audit.action) == ("admin-7", "delete_episode")
    assert audit.details["episode_id"] == e1 and audit.details["counts"]["entities_removed"] == 1
    assert "Kiwi" not in str(audit.details) and "parrot" not in str(audit.details)


async def test_edit_retracts_the_old_version_and_queues_the_new(memory: Memory, conversation_id: int) -> None:
    cid = conversation_id
    e1, e2, e3 = await add_messages(memory, cid, ["Ann lives in Boston", "Ann likes tea", "bye"])
    async with memory._sessions.begin() as session:
        ann = await entity(session, cid, "Ann", [e1, e2])
        boston = await entity(session, cid, "Boston", [e1])
        lives = await relation(session, cid, ann, boston, "Ann lives in Boston", [e1])
        session.add(Checkpoint(conversation_id=cid, last_episode_id=e3))
    async with memory._sessions() as session:
        before = (await session.execute(select(Episode).where(Episode.id == e1))).scalar_one()
    edited_at = T0 + timedelta(days=1)

    report = await edit_episode(memory, cid, "m1", "Ann lives in Denver", edited_at=edited_at, principal="test")

    assert report.status == "edited" and report.retraction.relations_removed == [lives]
    assert report.retraction.entities_removed == [boston] and report.retraction.entities_kept == [ann]
    async with memory._sessions() as session:
        after = (await session.execute(select(Episode).where(Episode.id == e1))).scalar_one()
        document = (
            await session.execute(
                select(SearchDocument.text).where(SearchDocument.kind == "episode", SearchDocument.ref_id == e1)
            )
        ).scalar_one()
        pending = (
            await session.execute(select(Checkpoint.pending_episode_ids).where(Checkpoint.conversation_id == cid))
        ).scalar_one()
    assert (after.text, after.edited_at, after.message_time) == ("Ann lives in Denver", edited_at, before.message_time)
    assert (after.prev_id, after.next_id, after.platform_message_id) == (before.prev_id, before.next_id, "m1")
    assert document == "Ann lives in Denver" and pending == [e1]
    assert (await edit_episode(memory, cid, "m1", "Ann lives in Denver", principal="test")).status == "unchanged"
    assert (await edit_episode(memory, cid, "nope", "x", principal="test")).status == "unknown"
    await delete_episode(memory, cid, "m2", principal="test")
    assert (await edit_episode(memory, cid, "m2", "x", principal="test")).status == "deleted"
