"""Integration: a kept fact speaks in its surviving witnesses' words. Two messages
support one relation with different wording (supplied extractions, replayed); deleting
or editing the first leaves no word that only it said anywhere (the word-level residue
scan), and the answer cites only the second speaker's wording."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import select

import memory as api
from memory.api import Principal
from memory.consolidation.extraction import Chunk, ExtractedEntity, ExtractedRelation, Extraction
from memory.consolidation.extraction.replay import ReplayExtractor
from memory.core import Memory
from memory.episodes.append import validate_message
from memory.store.conversations import ConversationRef, find_conversation
from memory.store.residue import find_words, surviving_texts, unique_words, word_residue
from memory.store.schema import Entity, Relation, SearchDocument

OPERATOR = Principal.operator("test")
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
F1 = "I moved to Brindlemere Quay, right next to the Quenchwick brewery."
F2 = "Yara lives in Brindlemere Quays now."
PLACE = {"name": "Brindlemere Quay", "type": "place"}


def said(message_id: str, place: str, fact: str, decision: str = "new") -> dict:
    return {
        "message_id": message_id,
        "entities": [{"name": "Yara", "type": "person"}, {**PLACE, "name": place}],
        "relations": [{"subject": "Yara", "predicate": "lives_in", "object": place, "fact": fact, "decision": decision}],
    }


YARA = said("f1", "Brindlemere Quay", "Yara moved to Brindlemere Quay, next to the Quenchwick brewery")
ZACK = said("f2", "Brindlemere Quays", "Yara lives in Brindlemere Quays", "duplicate")


async def scenario(memory: Memory, ref: ConversationRef) -> int:
    """f1 (Yara) is consolidated first, then f2 (Zack) joins the relation's provenance
    and, by entity resolution, the place's (its name form differs: "Quays")."""
    extractor = ReplayExtractor.from_records([YARA, ZACK])
    for minute, (message_id, author, text) in enumerate((("f1", "Yara", F1), ("f2", "Zack", F2))):
        message = validate_message({"id": message_id, "author": author, "text": text, "ts": T0 + timedelta(minutes=minute)})
        await api.ingest(memory, ref, [message], principal=OPERATOR)
        await api.consolidate(memory, ref, principal=OPERATOR, extractor=extractor)
    async with memory._sessions() as session:
        cid = await find_conversation(session, ref)
    assert cid is not None
    return cid


async def shown(memory: Memory, cid: int) -> tuple[list[str], list[str], list[str]]:
    """Relation facts, entity names, and search document texts of the graph."""
    async with memory._sessions() as session:
        facts = list((await session.execute(select(Relation.fact).where(Relation.conversation_id == cid))).scalars())
        names = list((await session.execute(select(Entity.name).where(Entity.conversation_id == cid))).scalars())
        documents = list(
            (
                await session.execute(
                    select(SearchDocument.text).where(SearchDocument.conversation_id == cid, SearchDocument.kind != "episode")
                )
            ).scalars()
        )
    return sorted(facts), sorted(names), sorted(documents)


async def test_a_deleted_witness_leaves_no_word_and_the_answer_credits_only_zack(
    memory: Memory, conversation_ref: ConversationRef
) -> None:
    cid = await scenario(memory, conversation_ref)
    facts, names, _ = await shown(memory, cid)
    assert facts == ["Yara moved to Brindlemere Quay, next to the Quenchwick brewery"] and "Brindlemere Quay" in names
    async with memory._sessions() as session:  # the scan sees f1's words while f1 is the record's wording
        only_f1 = unique_words([F1], [F2, "Yara", "Zack"])
        before = await find_words(session, cid, only_f1, [F2, "Yara", "Zack"])
    assert {"quenchwick", "brewery", "quay"} <= set(before) and "relations.fact" in before["quenchwick"], before

    report = await api.forget(memory, conversation_ref, "f1", principal=OPERATOR)

    assert report.retraction.relations_kept and report.retraction.relations_reworded == report.retraction.relations_kept
    assert report.retraction.entities_reworded  # the place is now named as Zack named it
    facts, names, documents = await shown(memory, cid)
    assert facts == ["Yara lives in Brindlemere Quays"]
    assert "Brindlemere Quays" in names and "Brindlemere Quay" not in names
    assert "Yara lives in Brindlemere Quays" in documents
    async with memory._sessions() as session:
        assert (await word_residue(session, cid, [F1])).found == {}
    answer = await api.ask(memory, conversation_ref, "Where does Yara live?", principal=OPERATOR)
    assert "Brindlemere Quays" in answer.answer and "quenchwick" not in answer.answer.lower()
    assert answer.citations and {c.speaker for c in answer.citations} == {"Zack"}
    relation_items = [item for item in answer.evidence if item.kind == "relation"]
    assert relation_items and all(s.speaker == "Zack" for item in relation_items for s in item.supporting)
    async with memory._sessions() as session:  # the answer's own trace holds no word of f1 either
        assert (await word_residue(session, cid, [F1])).found == {}


async def test_an_edit_leaves_no_word_of_the_replaced_text(memory: Memory, conversation_ref: ConversationRef) -> None:
    cid = await scenario(memory, conversation_ref)
    corrected = "I moved to Brindlemere Quays."
    report = await api.edit(memory, conversation_ref, "f1", corrected, principal=OPERATOR)
    assert report.status == "edited"
    async with memory._sessions() as session:
        assert (await word_residue(session, cid, [F1])).found == {}
    facts, names, _ = await shown(memory, cid)
    assert facts == ["Yara lives in Brindlemere Quays"] and "Brindlemere Quay" not in names

    again = ReplayExtractor.from_records([said("f1", "Brindlemere Quays", "Yara moved to Brindlemere Quays", "duplicate")])
    await api.consolidate(memory, conversation_ref, principal=OPERATOR, extractor=again)
    async with memory._sessions() as session:
        assert (await word_residue(session, cid, [F1])).found == {}
        assert corrected in await surviving_texts(session, cid)
    facts, _, _ = await shown(memory, cid)
    assert facts == ["Yara lives in Brindlemere Quays"]  # the earliest worded witness is still Zack's


class CitingBoth:
    """An extractor whose one relation cites every new line of the chunk (as an LLM may)."""

    async def extract(self, chunk: Chunk) -> Extraction:
        both = frozenset(line.episode_id for line in chunk.new_lines)
        return Extraction(
            [ExtractedEntity("Yara", "person", "", both), ExtractedEntity("Brindlemere Quay", "place", "", both)],
            [ExtractedRelation("Yara", "lives_in", "Brindlemere Quay", YARA["relations"][0]["fact"], both)],
        )


async def test_a_sentence_drawn_from_two_messages_goes_with_either(memory: Memory, conversation_ref: ConversationRef) -> None:
    """Its sentence is both messages', so deleting either leaves the relation rendered
    from its structure, in no one's words."""
    messages = [
        validate_message({"id": "g1", "author": "Yara", "text": F1, "ts": T0}),
        validate_message(
            {"id": "g2", "author": "Zack", "text": "Yara lives in Brindlemere Quay now.", "ts": T0 + timedelta(minutes=1)}
        ),
    ]
    await api.ingest(memory, conversation_ref, messages, principal=OPERATOR)
    await api.consolidate(memory, conversation_ref, principal=OPERATOR, extractor=CitingBoth())
    async with memory._sessions() as session:
        cid = await find_conversation(session, conversation_ref)
    assert cid is not None
    await api.forget(memory, conversation_ref, "g1", principal=OPERATOR)
    facts, _, _ = await shown(memory, cid)
    assert facts == ["Yara lives in Brindlemere Quay"]  # subject, predicate, object
    async with memory._sessions() as session:
        assert (await word_residue(session, cid, [F1])).found == {}
