"""Answers: extractive offline (quote or not in memory), the LLM path through the
scripted server (decompose, rerank, answer, usage), and the stored trace."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select

import memory as api
from memory.api import Principal
from memory.consolidation.extraction import ReplayExtractor
from memory.core import Memory
from memory.episodes.append import validate_message
from memory.errors import UnknownConversation, ValidationError
from memory.models.llm import LLMClient
from memory.retrieval.answering import NOT_IN_MEMORY, NOTES, Answer
from memory.store.conversations import ConversationRef
from memory.store.schema import (
    AnswerEvidence,
    AnswerTrace,
    AuditEntry,
    Episode,
    UsageEntry,
)

OPERATOR = Principal.operator("test")

T0 = datetime(2024, 5, 6, 9, tzinfo=timezone.utc)
CHAT = [
    ("priya", "user", "The Atlas launch review is on Thursday at 3pm in Room 4."),
    ("tom", "user", "I moved to the Berlin office last week."),
    ("marco", "user", "Lunch on Wednesday at the Thai place?"),
    ("stashbird", "bot", "Noted: the Atlas launch review is on Thursday."),
    ("alice", "user", "My cat Pixel knocked the monitor off my desk."),
]


async def _chat(memory: Memory, ref: ConversationRef) -> dict[str, int]:
    messages = [
        validate_message({"id": f"m{i}", "author": who, "role": role, "text": body, "ts": T0 + timedelta(minutes=i)})
        for i, (who, role, body) in enumerate(CHAT)
    ]
    await api.ingest(memory, ref, messages, principal=OPERATOR)
    async with memory._sessions() as session:
        rows = await session.execute(
            select(Episode.platform_message_id, Episode.id).where(
                Episode.platform_message_id.in_([m.platform_message_id for m in messages]),
                Episode.conversation_id == (await _id(session, ref)),
            )
        )
        return dict(rows.all())


async def _ask(memory: Memory, ref: ConversationRef, question: str, k: int | None = None) -> Answer:
    """Asked by the operator the day after the chat."""
    return await api.ask(memory, ref, question, principal=OPERATOR, date=T0 + timedelta(days=1), k=k)


async def _id(session, ref: ConversationRef) -> int:
    from memory.store.conversations import find_conversation

    return await find_conversation(session, ref)


async def test_extractive_answer_quotes_speaker_and_date(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    episodes = await _chat(memory, conversation_ref)
    result = await _ask(memory, conversation_ref, "Where did Tom move?")
    assert result.mode == "extractive" and result.in_memory
    assert result.answer.startswith('tom said on 06 May 2024: "I moved to the Berlin office last week."')
    assert [(c.episode_id, c.platform_message_id, c.speaker) for c in result.citations] == [(episodes["m1"], "m1", "tom")]
    assert result.citations[0].message_time == T0 + timedelta(minutes=1)


async def test_not_in_memory_when_nothing_relevant(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    await _chat(memory, conversation_ref)
    result = await _ask(memory, conversation_ref, "What is the capital of Peru?")
    assert result.answer == NOT_IN_MEMORY
    assert not result.in_memory and result.citations == []
    assert result.evidence, "evidence is still shown and traced, it just does not answer"


async def test_a_question_about_the_asker_is_answered_from_their_own_messages(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    """ "Where did I move?" is about whoever asks it: each person gets their own message,
    found by their name (messages say "Priya", never "I" for her); the answer and its
    trace keep the question as typed."""
    said = [
        ("U1", "Priya Raman", "I moved to the Lisbon office in March, the view is great."),
        ("U2", "Tom Berg", "I moved to the Berlin office last week, still unpacking."),
        ("U3", "Marco Rossi", "Lunch on Wednesday at the Thai place?"),
    ]
    messages = [
        validate_message({"id": f"m{i}", "author_id": uid, "author_name": name, "text": body, "ts": T0 + timedelta(minutes=i)})
        for i, (uid, name, body) in enumerate(said)
    ]
    await api.ingest(memory, conversation_ref, messages, principal=OPERATOR)
    asked = "where did i move?"
    by = {}
    for uid in ("U1", "U2"):
        by[uid] = await api.ask(memory, conversation_ref, asked, principal=Principal.user(uid), date=T0 + timedelta(days=1))
        assert by[uid].in_memory and by[uid].question == asked
    assert by["U1"].citations[0].platform_message_id == "m0"
    assert by["U2"].citations[0].platform_message_id == "m1"
    # Someone who has written nothing here is asked as they typed; so is the operator.
    stranger = await api.ask(memory, conversation_ref, asked, principal=Principal.user("U9"), date=T0 + timedelta(days=1))
    assert stranger.question == asked
    async with memory._sessions() as session:
        stored = await session.execute(select(AnswerTrace.question).where(AnswerTrace.id == by["U1"].trace_id))
        assert stored.scalar_one() == asked


async def test_bot_messages_are_context_not_evidence(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    await _chat(memory, conversation_ref)
    result = await _ask(memory, conversation_ref, "When is the Atlas launch review?")
    assert any(item.is_bot for item in result.evidence)
    assert result.citations and all(c.speaker != "stashbird" for c in result.citations)
    assert result.citations[0].platform_message_id == "m0"


async def test_trace_usage_and_audit_are_stored(memory: Memory, conversation_ref: ConversationRef, conversation_id: int) -> None:
    await _chat(memory, conversation_ref)
    result = await api.ask(
        memory, conversation_ref, "Who has a cat?", principal=Principal.user("U123"), date=T0 + timedelta(days=1), k=3
    )
    assert len(result.evidence) == 3
    async with memory._sessions() as session:
        trace = (await session.execute(select(AnswerTrace).where(AnswerTrace.id == result.trace_id))).scalar_one()
        linked = set(
            (await session.execute(select(AnswerEvidence.episode_id).where(AnswerEvidence.trace_id == trace.id))).scalars()
        )
        audit = (
            await session.execute(
                select(AuditEntry).where(AuditEntry.conversation_id == conversation_id, AuditEntry.action == "answer")
            )
        ).scalar_one()
        ledger = (
            await session.execute(
                select(UsageEntry.operation, UsageEntry.phase, UsageEntry.prompt_tokens).where(
                    UsageEntry.conversation_id == conversation_id, UsageEntry.phase == "retrieval"
                )
            )
        ).all()
    assert (trace.conversation_id, trace.principal, trace.question, trace.answer) == (
        conversation_id,
        "user:U123",
        "Who has a cat?",
        result.answer,
    )
    assert linked == {e.episode_id for item in result.evidence for e in item.episodes}
    assert audit.details == {"trace_id": trace.id, "evidence_items": 3, "evidence_episodes": len(linked)}
    assert [(op, phase) for op, phase, _ in ledger] == [("embed_query", "retrieval")] and ledger[0][2] > 0
    assert trace.usage["embed_query"]["calls"] == 1


async def test_unknown_conversation_empty_question_and_bad_thread_are_refused(
    memory: Memory, conversation_ref: ConversationRef
) -> None:
    with pytest.raises(UnknownConversation):
        await api.ask(memory, ConversationRef.parse("no-such-conversation-anywhere"), "hello?", principal=OPERATOR)
    with pytest.raises(ValidationError, match="question"):
        await api.ask(memory, conversation_ref, "  ", principal=OPERATOR)
    with pytest.raises(ValidationError, match="thread"):
        await api.ask(memory, conversation_ref, "hello?", principal=OPERATOR, thread=["t1"])  # type: ignore[arg-type]


async def test_llm_path_decomposes_reranks_answers_and_records_usage(
    llm_memory: Memory, scripted_llm, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    episodes = await _chat(llm_memory, conversation_ref)

    def rerank(request) -> dict:
        numbers = re.findall(r"^(\d+)\. .*$", request.user, re.MULTILINE)
        berlin = [
            int(n)
            for n, line in zip(numbers, re.findall(r"^\d+\. (.*)$", request.user, re.MULTILINE), strict=True)
            if "Berlin" in line
        ]
        return {"scores": [{"id": int(n), "score": 10 if int(n) in berlin else 1} for n in numbers]}

    def respond(request) -> dict:
        label = re.search(r"\[(E[\d.]+)\] tom: I moved to the Berlin", request.user).group(1)
        return {
            "answer": "Tom moved to Berlin, and lunch is at the Thai place.",
            "citations": [label, "E99"],
            "in_memory": True,
        }

    scripted_llm.on("decompose", lambda request: {"queries": ["Where did Tom move?", "Where is lunch on Wednesday?"]})
    scripted_llm.on("rerank", rerank)
    scripted_llm.on("answer", respond)
    result = await _ask(llm_memory, conversation_ref, "Where did Tom move and where is lunch?", k=2)
    assert result.mode == "llm" and result.in_memory
    assert result.sub_queries == ["Where did Tom move?", "Where is lunch on Wednesday?"]
    assert scripted_llm.count("decompose") == scripted_llm.count("rerank") == scripted_llm.count("answer") == 1
    assert len(result.evidence) == 2 and "Berlin" in result.evidence[0].text
    assert [(c.episode_id, c.platform_message_id) for c in result.citations] == [(episodes["m1"], "m1")]
    rerank_prompt = scripted_llm.chat_requests("rerank")[0].user
    assert "Where did Tom move and where is lunch?" in rerank_prompt
    async with llm_memory._sessions() as session:
        ledger = {
            op: (calls, prompt, completion)
            for op, calls, prompt, completion in await session.execute(
                select(UsageEntry.operation, UsageEntry.calls, UsageEntry.prompt_tokens, UsageEntry.completion_tokens).where(
                    UsageEntry.conversation_id == conversation_id, UsageEntry.phase == "retrieval"
                )
            )
        }
        trace = (await session.execute(select(AnswerTrace).where(AnswerTrace.id == result.trace_id))).scalar_one()
    assert set(ledger) == {"decompose", "rerank", "answer", "embed_query"}
    assert all(calls == 1 and prompt > 0 for calls, prompt, _ in ledger.values())
    assert ledger["answer"][2] > 0
    assert trace.sub_queries == result.sub_queries
    assert json.loads(json.dumps(trace.usage))["rerank"]["calls"] == 1


async def test_llm_says_plainly_when_memory_lacks_the_answer(
    llm_memory: Memory, scripted_llm, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    await _chat(llm_memory, conversation_ref)
    scripted_llm.on("answer", lambda request: {"answer": "", "citations": ["E1"], "in_memory": False})
    result = await _ask(llm_memory, conversation_ref, "What is Tom's salary?")
    assert result.answer == NOT_IN_MEMORY and not result.in_memory and result.citations == []
    assert scripted_llm.count("decompose") == 0  # a focused question is not decomposed
    assert scripted_llm.count("rerank") == 1


async def test_failed_rerank_falls_back_to_fused_order(
    llm_memory: Memory, scripted_llm, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    await _chat(llm_memory, conversation_ref)
    scripted_llm.fail_next(5, status=500, operation="rerank")
    scripted_llm.on("answer", lambda request: {"answer": "Room 4.", "citations": ["E1", "E2"], "in_memory": True})
    result = await _ask(llm_memory, conversation_ref, "Where is the Atlas launch review?")
    assert result.answer == "Room 4." and result.notes == [NOTES["rerank"]]
    # Fused order: the review message and the bot's echo of it lead; the bot is never cited.
    assert {item.episode.platform_message_id for item in result.evidence[:2]} == {"m0", "m3"}
    assert [c.platform_message_id for c in result.citations] == ["m0"]


@pytest.mark.parametrize(
    ("step", "fault"), [("decompose", "timeout"), ("rerank", "status"), ("answer", "malformed"), ("answer", "status")]
)
async def test_each_failing_llm_step_falls_back_offline_with_a_note(
    llm_memory: Memory, scripted_llm, conversation_ref: ConversationRef, conversation_id: int, step: str, fault: str
) -> None:
    await _chat(llm_memory, conversation_ref)
    scripted_llm.on("decompose", lambda request: {"queries": ["Where did Tom move?", "Where is lunch?"]})
    scripted_llm.on("rerank", lambda request: {"scores": []})
    scripted_llm.on("answer", lambda request: {"answer": "Berlin.", "citations": ["E1"], "in_memory": True})
    impatient = LLMClient(
        base_url=scripted_llm.base_url, api_key="test", model="scripted", timeout=2, max_retries=2, backoff=0.01
    )
    if fault == "status":
        scripted_llm.fail_next(10, status=503, operation=step)
    elif fault == "timeout":
        scripted_llm.timeout_next(10, seconds=3, operation=step)
        llm_memory = dataclasses.replace(llm_memory, llm=impatient)
    else:
        scripted_llm.malformed_next(10, operation=step)
    try:
        result = await _ask(llm_memory, conversation_ref, "Where did Tom move and where is lunch?")
    finally:
        await impatient.close()
    assert result.notes == [NOTES[step]] and result.reply.notes == (NOTES[step],)
    assert result.in_memory and result.citations
    if step == "answer":
        # The offline answer: the message that says where Tom moved, quoted.
        assert result.mode == "extractive"
        assert result.answer.startswith('tom said on 06 May 2024: "I moved to the Berlin office')
    else:
        assert result.mode == "llm" and result.answer == "Berlin."
    assert scripted_llm.count(step) >= 2  # retried before giving up


MULTI_PARTY = [
    ("tom", "Morning all, the coffee machine is fixed."),
    ("tom", "Ha, that is a good one."),
    ("priya", "Tom moved to Kettleburg last month, so he is remote now."),
    ("tom", "Anyone up for lunch today?"),
    ("alice", "When is the launch?"),
    ("priya", "The launch is on Monday."),
    ("priya", "Correction: the launch is on Friday."),
    ("marco", "Who has the keys to the lab?"),
]


async def _multi_party(memory: Memory, ref: ConversationRef) -> None:
    messages = [
        validate_message({"id": f"p{i}", "author": who, "text": body, "ts": T0 + timedelta(minutes=i)})
        for i, (who, body) in enumerate(MULTI_PARTY)
    ]
    await api.ingest(memory, ref, messages, principal=OPERATOR)
    launch = ("launch", "is_on")
    records = [
        {
            "message_id": "p5",
            "relations": [
                {
                    "subject": launch[0],
                    "predicate": launch[1],
                    "object": "Monday",
                    "fact": "The launch is on Monday",
                    "decision": "new",
                }
            ],
        },
        {
            "message_id": "p6",
            "relations": [
                {
                    "subject": launch[0],
                    "predicate": launch[1],
                    "object": "Friday",
                    "fact": "The launch is on Friday",
                    "decision": "contradiction",
                }
            ],
        },
    ]
    await api.consolidate(memory, ref, principal=OPERATOR, extractor=ReplayExtractor.from_records(records))


async def test_a_question_about_a_person_finds_what_others_said_of_them(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    await _multi_party(memory, conversation_ref)
    result = await _ask(memory, conversation_ref, "Where did Tom move to?")
    assert result.in_memory and result.citations[0].platform_message_id == "p2"
    assert result.reply.line.startswith("priya said on")
    assert "Also:" not in result.answer


async def test_the_correction_leads_and_the_superseded_message_is_marked(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    await _multi_party(memory, conversation_ref)
    result = await _ask(memory, conversation_ref, "When is the launch?")
    assert result.in_memory and result.citations[0].platform_message_id == "p6"
    assert "Friday" in result.reply.line and "Monday" not in result.reply.line
    outdated = [m for m in result.reply.messages if m.outdated]
    assert all(m.platform_message_id == "p5" and m.correction.platform_message_id == "p6" for m in outdated)
    assert all(c.platform_message_id != "p4" for c in result.citations)  # the question itself is no answer


async def test_a_question_nobody_answered_is_not_in_memory(
    memory: Memory, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    await _multi_party(memory, conversation_ref)
    result = await _ask(memory, conversation_ref, "Who has the keys to the lab?")
    assert all(c.platform_message_id != "p7" for c in result.citations)
    assert not result.in_memory and result.answer == NOT_IN_MEMORY
    named = await _ask(memory, conversation_ref, "Where did Gregor move to?")
    assert not named.in_memory and "Gregor" in named.refusal
    # A name is one run of capitalised words, known when any word of it is.
    both = await _ask(memory, conversation_ref, "Did Gregor Smith move to Kettleburg Heights?")
    assert not both.in_memory and "Gregor Smith never appears" in both.refusal and "Kettleburg" not in both.refusal
