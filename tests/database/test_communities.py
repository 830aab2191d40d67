"""Communities against the real database: builds, incremental membership, regeneration
after deletion (residue markers gone), dissolution, LLM summaries and their usage."""

from __future__ import annotations

import dataclasses
import uuid

from sqlalchemy import select

import memory as api
from lab.standins.scripted_llm import ScriptedLLMServer
from memory.core import Memory
from memory.graph.writes import supersede_relation
from memory.params import MemoryParams
from memory.store.conversations import ConversationRef
from memory.store.residue import find_tokens
from memory.store.schema import Community, CommunityMember, Relation, SearchDocument, UsageEntry
from tests.database.test_forgetting import add_messages, entity, relation

OPERATOR = api.Principal.operator("test")


async def community_documents(memory: Memory, cid: int) -> dict[int, str]:
    async with memory._sessions() as session:
        rows = await session.execute(
            select(SearchDocument.ref_id, SearchDocument.text).where(
                SearchDocument.conversation_id == cid, SearchDocument.kind == "community"
            )
        )
        return dict(rows.all())


async def members(memory: Memory, cid: int) -> dict[int, set[int]]:
    async with memory._sessions() as session:
        rows = await session.execute(
            select(CommunityMember.community_id, CommunityMember.entity_id).where(CommunityMember.conversation_id == cid)
        )
    found: dict[int, set[int]] = {}
    for community_id, entity_id in rows:
        found.setdefault(community_id, set()).add(entity_id)
    return found


async def two_groups(memory: Memory, cid: int, marker: str) -> dict[str, int]:
    """Ann, Bob and a place only m1 names (a unique marker); Cat, Dan and Eve apart;
    Fay alone. m1 also backs one of Ann's relations."""
    m1, m2, m3, m4 = await add_messages(
        memory, cid, [f"Ann and I went to {marker}", "Ann cooks with Bob", "Cat, Dan and Eve sail", "Fay"]
    )
    async with memory._sessions.begin() as session:
        ids = {
            "ann": await entity(session, cid, "Ann", [m1, m2]),
            "bob": await entity(session, cid, "Bob", [m2]),
            "place": await entity(session, cid, marker.capitalize(), [m1]),
            "cat": await entity(session, cid, "Cat", [m3]),
            "dan": await entity(session, cid, "Dan", [m3]),
            "eve": await entity(session, cid, "Eve", [m3]),
            "fay": await entity(session, cid, "Fay", [m4]),
        }
        await relation(session, cid, ids["ann"], ids["bob"], "Ann cooks with Bob", [m2])
        await relation(session, cid, ids["ann"], ids["place"], f"Ann went to {marker}", [m1])
        await relation(session, cid, ids["bob"], ids["place"], f"Bob knows {marker}", [m1])
        await relation(session, cid, ids["cat"], ids["dan"], "Cat sails with Dan", [m3])
        await relation(session, cid, ids["dan"], ids["eve"], "Dan sails with Eve", [m3])
        await relation(session, cid, ids["cat"], ids["eve"], "Cat sails with Eve", [m3])
    return ids


async def test_build_stores_groups_of_two_or_more_with_summaries_and_documents(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    ids = await two_groups(memory, conversation_id, "qz" + uuid.uuid4().hex[:8])
    report = await api.build_communities(memory, conversation_ref, principal=OPERATOR)
    assert (report.created, report.regenerated, report.rebuilt) == (2, 2, True)
    groups = sorted(members_ for members_ in (await members(memory, conversation_id)).values())
    assert groups == sorted([{ids["ann"], ids["bob"], ids["place"]}, {ids["cat"], ids["dan"], ids["eve"]}])
    listed = await api.list_communities(memory, conversation_ref, principal=OPERATOR)
    sailing = next(c for c in listed if "Cat" in c["members"])
    assert not sailing["dirty"] and sailing["summary"].startswith("Cat, Dan, Eve.")
    assert "Cat sails with Dan" in sailing["summary"]
    documents = await community_documents(memory, conversation_id)
    assert documents[sailing["id"]] == f"{sailing['label']}: {sailing['summary']}"

    again = await api.build_communities(memory, conversation_ref, principal=OPERATOR)
    assert (again.kept, again.created, again.regenerated) == (2, 0, 0)  # same graph, same communities, untouched


async def test_new_entities_join_incrementally_and_a_large_change_rebuilds(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    cid = conversation_id
    ids = await two_groups(memory, cid, "qz" + uuid.uuid4().hex[:8])
    await api.build_communities(memory, conversation_ref, principal=OPERATOR)
    sailing = next(c for c, m in (await members(memory, cid)).items() if ids["cat"] in m)
    (m5,) = await add_messages(memory, cid, ["Gil sails with Cat and Dan"], prefix="n")
    async with memory._sessions.begin() as session:
        gil = await entity(session, cid, "Gil", [m5])
        await relation(session, cid, gil, ids["cat"], "Gil sails with Cat", [m5])
        await relation(session, cid, gil, ids["fay"], "Gil knows Fay", [m5])

    report = await api.update_communities(memory, conversation_ref, principal=OPERATOR, rebuild_share=0.5)
    assert (report.rebuilt, report.joined) == (False, 1)
    assert gil in (await members(memory, cid))[sailing]
    assert ids["fay"] not in {e for m in (await members(memory, cid)).values() for e in m}  # not new: rebuilds place it
    assert sailing not in await community_documents(memory, cid)  # dirty until regenerated
    regenerated = await api.regenerate_communities(memory, conversation_ref, principal=OPERATOR)
    assert regenerated.regenerated == 1
    assert "Gil" in (await community_documents(memory, cid))[sailing]
    assert (await api.update_communities(memory, conversation_ref, principal=OPERATOR, rebuild_share=0.5)).joined == 0

    (m6,) = await add_messages(memory, cid, ["Hal and Ivy"], prefix="o")
    async with memory._sessions.begin() as session:
        hal, ivy = await entity(session, cid, "Hal", [m6]), await entity(session, cid, "Ivy", [m6])
        await relation(session, cid, hal, ivy, "Hal knows Ivy", [m6])
    report = await api.update_communities(memory, conversation_ref, principal=OPERATOR, rebuild_share=0.2)
    assert report.rebuilt and report.created >= 1  # 4 of 10 entities new or touched since the build: over 0.2
    assert {hal, ivy} in (await members(memory, cid)).values()


async def test_removed_and_superseded_relations_count_in_the_rebuild_share(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    """A deletion that removes relations leaves no row to find: their surviving ends are
    recorded and counted, and a rebuild accounts for them; a superseded relation's
    ends count too (its old object lost an edge)."""
    cid = conversation_id
    ids = await two_groups(memory, cid, "qz" + uuid.uuid4().hex[:8])
    await api.build_communities(memory, conversation_ref, principal=OPERATOR)

    async def update(share: float) -> bool:
        report = await api.update_communities(memory, conversation_ref, principal=OPERATOR, rebuild_share=share)
        return report.rebuilt

    await api.forget(memory, conversation_ref, "m1", principal=OPERATOR)  # Ann's and Bob's relations to the place go
    assert not await update(0.4)  # Ann and Bob of 6 entities: 0.33
    assert await update(0.3)
    assert not await update(0.0)  # the rebuild accounted for them
    (m5,) = await add_messages(memory, cid, ["Cat sails with Fay now"], prefix="n")
    async with memory._sessions.begin() as session:
        newer = await relation(session, cid, ids["cat"], ids["fay"], "Cat sails with Fay", [m5])
        dan = select(Relation.id).where(Relation.conversation_id == cid, Relation.fact == "Cat sails with Dan")
        old = (await session.execute(dan)).scalar_one()
        await supersede_relation(session, cid, old, newer, None)
    assert await update(0.4)  # Cat, Fay (the new relation) and Dan (its superseded one's object): 0.5


async def test_deleting_a_supporting_message_dirties_then_regeneration_drops_what_rested_on_it(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    cid = conversation_id
    marker = "qz" + uuid.uuid4().hex[:10]
    ids = await two_groups(memory, cid, marker)
    await api.build_communities(memory, conversation_ref, principal=OPERATOR)
    annbob = next(c for c, m in (await members(memory, cid)).items() if ids["ann"] in m)
    assert marker in (await community_documents(memory, cid))[annbob].lower()

    await api.forget(memory, conversation_ref, "m1", principal=OPERATOR)
    assert annbob not in await community_documents(memory, cid)  # no search document while dirty
    report = await api.regenerate_communities(memory, conversation_ref, principal=OPERATOR)
    assert report.regenerated == 1
    text = (await community_documents(memory, cid))[annbob]
    assert "Ann cooks with Bob" in text and marker not in text.lower()
    async with memory._sessions() as session:
        assert await find_tokens(session, marker) == {}


async def test_a_community_left_with_one_member_is_dissolved(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    cid = conversation_id
    m1, m2 = await add_messages(memory, cid, ["Jo got a cat named Kit", "Jo here"])
    async with memory._sessions.begin() as session:
        jo, kit = await entity(session, cid, "Jo", [m1, m2]), await entity(session, cid, "Kit", [m1])
        await relation(session, cid, jo, kit, "Jo owns Kit", [m1])
    assert (await api.build_communities(memory, conversation_ref, principal=OPERATOR)).regenerated == 1
    await api.forget(memory, conversation_ref, "m1", principal=OPERATOR)
    report = await api.regenerate_communities(memory, conversation_ref, principal=OPERATOR)
    assert report.dissolved == 1
    async with memory._sessions() as session:
        assert (await session.execute(select(Community.id).where(Community.conversation_id == cid))).all() == []
    assert await community_documents(memory, cid) == {}


async def test_llm_summaries_are_one_call_per_community_and_recorded_as_community_usage(
    llm_memory: Memory, scripted_llm: ScriptedLLMServer, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    scripted_llm.on("summarize_community", lambda request: {"name": "The sailors", "summary": "They sail together."})
    await two_groups(llm_memory, conversation_id, "qz" + uuid.uuid4().hex[:8])
    report = await api.build_communities(llm_memory, conversation_ref, principal=OPERATOR)
    assert report.regenerated == 2 and report.llm_fallbacks == 0
    assert scripted_llm.count("summarize_community") == 2
    prompt = scripted_llm.chat_requests("summarize_community")[0].user
    assert "Members:" in prompt and "Facts:" in prompt
    assert set((await community_documents(llm_memory, conversation_id)).values()) == {"The sailors: They sail together."}
    async with llm_memory._sessions() as session:
        rows = (
            await session.execute(
                select(UsageEntry.operation, UsageEntry.calls).where(
                    UsageEntry.conversation_id == conversation_id, UsageEntry.phase == "community"
                )
            )
        ).all()
    assert sum(calls for operation, calls in rows if operation == "summarize_community") == 2


async def test_a_failed_llm_call_falls_back_to_the_offline_summary(
    llm_memory: Memory, scripted_llm: ScriptedLLMServer, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    scripted_llm.fail_next(100, status=500, operation="summarize_community")
    await two_groups(llm_memory, conversation_id, "qz" + uuid.uuid4().hex[:8])
    tight = dataclasses.replace(llm_memory, params=MemoryParams(community_facts=1))
    report = await api.build_communities(tight, conversation_ref, principal=OPERATOR)
    assert report.regenerated == 2 and report.llm_fallbacks == 2
    texts = sorted((await community_documents(llm_memory, conversation_id)).values())
    assert texts[1].startswith("Cat, Dan, Eve: Cat, Dan, Eve.")


async def test_a_community_item_cites_the_messages_behind_its_members_relations(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    from memory.retrieval.evidence import assemble
    from memory.retrieval.search import Candidate

    ids = await two_groups(memory, conversation_id, "qz" + uuid.uuid4().hex[:8])
    await api.build_communities(memory, conversation_ref, principal=OPERATOR)
    sailing = next(c for c, m in (await members(memory, conversation_id)).items() if ids["cat"] in m)
    candidate = Candidate("community", sailing, "sailors", None, True, 1.0, 1.0, 0.0)
    async with memory._sessions() as session:
        (item,) = await assemble(session, conversation_id, [candidate], 5)
    assert [e.text for e in item.supporting] == ["Cat, Dan and Eve sail"]
