"""Writing the provenance graph: provenance is a set, supersession keeps history."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import select

from memory.core import Memory
from memory.episodes.append import append_messages, validate_message
from memory.graph.reads import list_facts
from memory.graph.wording import FactWording
from memory.graph.writes import (
    add_relation_support,
    create_entity,
    create_relation,
    supersede_relation,
)
from memory.store.conversations import (
    ConversationRef,
    delete_conversation,
    ensure_conversation,
    find_conversation,
)
from memory.store.schema import (
    Entity,
    Episode,
    Relation,
    RelationProvenance,
    SearchDocument,
)

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


async def test_relation_lifecycle_writes(memory: Memory, conversation_id: int) -> None:
    messages = [
        validate_message({"id": f"m{i}", "author": "ann", "text": f"fact {i}", "ts": T0 + timedelta(minutes=i)}) for i in range(3)
    ]
    vector = [1.0] + [0.0] * 383
    async with memory._sessions.begin() as session:
        e1, e2, e3 = [r.episode_id for r in await append_messages(session, memory.embedder, conversation_id, messages)]
        ann = await create_entity(
            session, conversation_id, name="Ann", type_="person", summary="", embedding=vector, episode_ids=[e1]
        )
        city = await create_entity(
            session, conversation_id, name="Boston", type_="place", summary="a city", embedding=vector, episode_ids=[e1]
        )
        old = await create_relation(
            session,
            conversation_id,
            subject_id=ann,
            object_id=city,
            predicate="lives_in",
            fact="Ann lives in Boston",
            embedding=vector,
            episode_ids=[e1],
        )
        said = FactWording("Ann lives in Boston", None, frozenset({e2}), vector)
        await add_relation_support(session, conversation_id, old, {e1: said, e2: said})
        new = await create_relation(
            session,
            conversation_id,
            subject_id=ann,
            object_id=city,
            predicate="lives_in",
            fact="Ann left Boston",
            embedding=vector,
            episode_ids=[e3],
        )
        await supersede_relation(session, conversation_id, old, new, T0)
    async with memory._sessions() as session:
        support = set(
            (await session.execute(select(RelationProvenance.episode_id).where(RelationProvenance.relation_id == old))).scalars()
        )
        status = (await session.execute(select(Relation.status, Relation.superseded_by).where(Relation.id == old))).one()
        current = dict(
            (
                await session.execute(
                    select(SearchDocument.ref_id, SearchDocument.is_current).where(
                        SearchDocument.kind == "relation", SearchDocument.ref_id.in_([old, new])
                    )
                )
            ).all()
        )
    assert support == {e1, e2}  # adding e1 again kept its first link
    assert tuple(status) == ("superseded", new)
    assert current == {old: False, new: True}


async def test_facts_list_their_supporting_messages_and_conversations_delete_whole(
    memory: Memory, conversation_ref: ConversationRef
) -> None:
    vector = [1.0] + [0.0] * 383
    messages = [
        validate_message({"id": f"m{i}", "author": "ann", "text": f"fact {i}", "ts": T0 + timedelta(minutes=i)}) for i in range(2)
    ]
    async with memory._sessions.begin() as session:
        cid = await ensure_conversation(session, conversation_ref)
        e1, e2 = [r.episode_id for r in await append_messages(session, memory.embedder, cid, messages)]
        ann = await create_entity(session, cid, name="Ann", type_="person", summary="", embedding=vector, episode_ids=[e1])
        city = await create_entity(session, cid, name="Oslo", type_="place", summary="", embedding=vector, episode_ids=[e2])
        await create_relation(
            session,
            cid,
            subject_id=ann,
            object_id=city,
            predicate="visits",
            fact="Ann visits Oslo",
            embedding=vector,
            episode_ids=[e1, e2],
        )
    async with memory._sessions() as session:
        facts = await list_facts(session, cid)
    assert [(f["subject"], f["object"], f["status"], f["messages"]) for f in facts] == [("Ann", "Oslo", "active", ["m0", "m1"])]

    async with memory._sessions.begin() as session:
        assert await delete_conversation(session, conversation_ref)
        assert not await delete_conversation(session, conversation_ref)
    async with memory._sessions() as session:
        assert await find_conversation(session, conversation_ref) is None
        left = [
            (await session.execute(select(table.id).where(table.conversation_id == cid))).all()
            for table in (Episode, Entity, Relation, SearchDocument)
        ]
    assert left == [[], [], [], []]
