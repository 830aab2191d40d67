"""Consolidation through the real LLM client and the scripted OpenAI-compatible server:
extraction with cited lines, retries, malformed replies, failure and retry, background
backlog, adjudication and context compression."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import select

import memory as api
from lab.standins import scripted_memory
from lab.standins.scripted_llm import ChatRequest, ScriptedLLMServer
from memory.api import Principal
from memory.consolidation.rolling_context import context_size
from memory.core import Memory
from memory.errors import LLMError
from memory.params import MemoryParams
from memory.store.conversations import ConversationRef
from memory.store.schema import Checkpoint, Relation, UsageEntry
from tests.database.test_consolidation import episode_ids, graph_state, messages

OPERATOR = Principal.operator("test")

ROWS = [
    ("m1", "Ann", "I moved to Boston last month."),
    ("m2", "bot", "Noted: Ann moved to Boston."),
    ("m3", "Bob", "I work at Google now."),
]


def extract_citing_every_line(request: ChatRequest) -> dict:
    """A reply that (wrongly) cites every line, the bot's included, as evidence."""
    reply = scripted_memory.extract(request)
    numbers = sorted({n for r in reply["relations"] for n in r["lines"]} | {2})
    for relation in reply["relations"]:
        relation["lines"] = numbers if relation["subject"] == "Ann" else relation["lines"]
    return reply


async def ledger(memory: Memory, conversation_id: int, operation: str) -> tuple[int, int]:
    async with memory._sessions() as session:
        rows = (
            await session.execute(
                select(UsageEntry.calls, UsageEntry.prompt_tokens).where(
                    UsageEntry.conversation_id == conversation_id,
                    UsageEntry.operation == operation,
                    UsageEntry.phase == "ingestion",
                )
            )
        ).all()
    return sum(r[0] for r in rows), sum(r[1] for r in rows)


async def test_llm_extraction_cites_lines_and_bots_are_never_evidence(
    llm_memory: Memory, scripted_llm: ScriptedLLMServer, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    scripted_llm.on("extract", extract_citing_every_line)
    await api.ingest(llm_memory, conversation_ref, messages(ROWS), principal=OPERATOR)
    report = await api.consolidate(llm_memory, conversation_ref, principal=OPERATOR)
    ids = await episode_ids(llm_memory, conversation_id)
    state = await graph_state(llm_memory, conversation_id)

    facts = {(r["subject"], r["object"]): r["support"] for r in state["relations"]}
    assert facts[("Ann", "Boston")] == {ids["m1"], ids["m3"]}  # as cited, minus the bot's line
    assert facts[("Bob", "Google")] == {ids["m3"]}
    assert all(ids["m2"] not in support for support in state["entity_support"].values())
    prompt = scripted_llm.chat_requests("extract")[0].user
    assert "L2 " in prompt and "Names spotted in the new messages: " in prompt and "Boston (place)" in prompt
    assert report.llm_calls == 1 and report.prompt_tokens > 0
    assert await ledger(llm_memory, conversation_id, "extract") == (1, report.prompt_tokens)
    assert state["checkpoint"].summary.startswith("Discussed: ")  # written by the same call


async def test_retries_and_malformed_replies_are_recovered(
    llm_memory: Memory, scripted_llm: ScriptedLLMServer, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    scripted_llm.on("extract", scripted_memory.extract)
    scripted_llm.fail_next(1, status=503, operation="extract")
    scripted_llm.malformed_next(1, operation="extract")
    await api.ingest(llm_memory, conversation_ref, messages(ROWS), principal=OPERATOR)
    report = await api.consolidate(llm_memory, conversation_ref, principal=OPERATOR)
    assert [r.outcome for r in scripted_llm.chat_requests("extract")] == ["http 503", "malformed", "ok"]
    assert report.llm_calls == 3 and report.relations_created == 2
    assert (await ledger(llm_memory, conversation_id, "extract"))[0] == 3


async def test_llm_failure_keeps_episodes_and_checkpoint_for_the_next_run(
    llm_memory: Memory, scripted_llm: ScriptedLLMServer, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    scripted_llm.on("extract", scripted_memory.extract)
    scripted_llm.fail_next(3, status=500, operation="extract")  # the client tries 3 times
    await api.ingest(llm_memory, conversation_ref, messages(ROWS), principal=OPERATOR)
    with pytest.raises(LLMError):
        await api.consolidate(llm_memory, conversation_ref, principal=OPERATOR)
    async with llm_memory._sessions() as session:
        checkpoint = await session.get(Checkpoint, conversation_id)
        relations = (await session.execute(select(Relation).where(Relation.conversation_id == conversation_id))).all()
    assert checkpoint.last_episode_id == 0 and relations == []
    assert len(await episode_ids(llm_memory, conversation_id)) == 3
    assert (await ledger(llm_memory, conversation_id, "extract"))[0] == 3  # failed attempts are still paid for

    report = await api.consolidate(llm_memory, conversation_ref, principal=OPERATOR)
    assert report.episodes == 3 and report.relations_created == 2


async def test_doubtful_entities_are_adjudicated_in_one_call_and_context_is_compressed(
    llm_memory: Memory, scripted_llm: ScriptedLLMServer, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    for operation, handler in scripted_memory.HANDLERS.items():
        scripted_llm.on(operation, handler)
    tight = dataclasses.replace(llm_memory, params=MemoryParams(context_tokens=16))
    await api.ingest(
        llm_memory,
        conversation_ref,
        messages(
            [
                ("n1", "Caroline", "I visited Paris with my sister and we loved the food and the museums of the city."),
            ]
        ),
        principal=OPERATOR,
    )
    await api.consolidate(tight, conversation_ref, principal=OPERATOR)
    # "Carolyn" vs "Caroline": cosine of the names below 0.75, Levenshtein ratio 0.8: doubtful
    await api.ingest(llm_memory, conversation_ref, messages([("n2", "Carolyn", "I visited Rome.")], start=5), principal=OPERATOR)
    await api.consolidate(tight, conversation_ref, principal=OPERATOR)
    ids = await episode_ids(llm_memory, conversation_id)
    state = await graph_state(llm_memory, conversation_id)

    assert scripted_llm.count("resolve_entity") == 1
    assert "Carolyn" in scripted_llm.chat_requests("resolve_entity")[0].user
    assert "Carolyn" not in state["entities"].values()
    assert state["entity_support"]["Caroline"] == {ids["n1"], ids["n2"]}
    assert {(r["subject"], r["object"]) for r in state["relations"]} == {("Caroline", "Paris"), ("Caroline", "Rome")}
    # the rolling context went over its 16-token budget: compressed by the LLM, then trimmed
    assert scripted_llm.count("compress_context") >= 1
    assert 0 < context_size(state["context"]) <= 16
    assert (await ledger(llm_memory, conversation_id, "resolve_entity"))[0] == 1
