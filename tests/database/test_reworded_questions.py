"""Integration: a question that names the person and the thing in other words than the
message is answered from it, offline (no model), in a small group conversation with
one fact per message, consolidated by the offline extractor; "not in memory" is kept for
a person the conversation never names and for a fact held only by a deleted message."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import memory as api
from memory import Memory, OfflineExtractor, Principal, validate_message
from memory.retrieval.answering import NOT_IN_MEMORY, Answer
from memory.store.conversations import ConversationRef

OPERATOR = Principal.operator("test")
T0 = datetime(2026, 6, 1, 9, tzinfo=timezone.utc)
# One fact per message, hours apart (no exchange joins two of them).
CHAT = [
    ("car", "Dana", "I finally got a Honda Civic last month."),
    ("city", "Omar", "I moved to Rotterdam in May."),
    ("budget", "Priya", "I'm in charge of the budget this year."),
    ("sister", "Lena", "My sister Mia just started medical school in Leeds."),
    ("cello", "Kofi", "I've been learning to play the cello since January."),
    ("offsite", "Dana", "Our team offsite is booked for the first week of July."),
    ("dog", "Omar", "I adopted a beagle puppy called Biscuit."),
    ("peanuts", "Priya", "I'm allergic to peanuts, so no satay for me."),
    ("marathon", "Lena", "I ran the Berlin marathon in under four hours."),
    ("food", "Kofi", "My favourite food is jollof rice."),
]
# Each shares no content word with its message (the budget one only "budget").
REWORDED = [
    ("What does Dana drive?", "car"),
    ("Where is Omar based now?", "city"),
    ("Who looks after the budget?", "budget"),
    ("What car does Dana own?", "car"),
    ("Which instrument is Kofi studying?", "cello"),
    ("What pet does Omar have?", "dog"),
    ("What does Kofi like to eat most?", "food"),
    ("Which race did Lena finish?", "marathon"),
    ("What can't Priya eat?", "peanuts"),
]


async def _chat(memory: Memory, ref: ConversationRef) -> None:
    messages = [
        validate_message({"id": key, "author": who, "text": body, "ts": T0 + timedelta(hours=3 * i)})
        for i, (key, who, body) in enumerate(CHAT)
    ]
    await api.ingest(memory, ref, messages, principal=OPERATOR)
    await api.consolidate(memory, ref, principal=OPERATOR, extractor=OfflineExtractor())


async def _ask(memory: Memory, ref: ConversationRef, question: str) -> Answer:
    return await api.ask(memory, ref, question, principal=OPERATOR, date=T0 + timedelta(days=3))


@pytest.mark.parametrize(("question", "message"), REWORDED)
async def test_a_reworded_question_cites_the_message(
    memory: Memory, conversation_ref: ConversationRef, question: str, message: str
) -> None:
    await _chat(memory, conversation_ref)
    answer = await _ask(memory, conversation_ref, question)
    why = answer.selection.refusal if answer.selection else None
    assert answer.in_memory, f"{question!r} refused: {why}"
    assert answer.citations[0].platform_message_id == message


async def test_someone_never_mentioned_is_not_in_memory(memory: Memory, conversation_ref: ConversationRef) -> None:
    await _chat(memory, conversation_ref)
    for question in ("What does Zelda drive?", "Where is Bartholomew based now?"):
        answer = await _ask(memory, conversation_ref, question)
        assert not answer.in_memory and answer.answer == NOT_IN_MEMORY, question
        assert answer.selection is not None and answer.selection.unknown


async def test_a_fact_held_only_by_a_deleted_message_is_not_in_memory(memory: Memory, conversation_ref: ConversationRef) -> None:
    await _chat(memory, conversation_ref)
    for key in ("car", "city"):
        await api.forget(memory, conversation_ref, key, principal=OPERATOR)
    for question in ("What does Dana drive?", "What car does Dana own?", "Where is Omar based now?"):
        answer = await _ask(memory, conversation_ref, question)
        assert not answer.in_memory and answer.answer == NOT_IN_MEMORY, question
    # The same people's other facts are still answered.
    for question, message in (("What pet does Omar have?", "dog"), ("When is Dana's team going away?", "offsite")):
        answer = await _ask(memory, conversation_ref, question)
        assert answer.in_memory and answer.citations[0].platform_message_id == message, question
