"""Every LLM step against each way a real OpenAI-compatible endpoint treats
``response_format`` (emulated by the scripted server, spoken to by the real ``openai``
client, over a real database): structured outputs, json_object only, no response format
at all, JSON in fences, JSON in a sentence. Each step's result is what it is against an
exact endpoint, and the usage ledger holds every call the endpoint received, the refused
ones included; a refusal is paid once per client, not once per request."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import uuid
from datetime import timedelta

import pytest
from pydantic import BaseModel
from sqlalchemy import func, select

import memory as api
from bot.runtime import build_llm
from bot.settings import ModelSettings, load_settings
from lab.standins import scripted_memory
from lab.standins.scripted_llm import BEHAVIOURS, ChatRequest, ScriptedLLMServer
from memory.core import Memory
from memory.errors import ConfigurationError, LLMError
from memory.models.llm import LLMClient
from memory.params import MemoryParams
from memory.store.conversations import ConversationRef
from memory.store.schema import Checkpoint, UsageEntry
from tests.database.test_answering import T0, _chat
from tests.database.test_communities import community_documents, two_groups
from tests.database.test_consolidation import episode_ids, graph_state, messages

OPERATOR = api.Principal.operator("test")

# Calls the first JSON step of a fresh client pays before the endpoint takes its request,
# and the mode the client then keeps.
EXTRA_CALLS = {"structured": 0, "json_object": 1, "no_format": 2, "fenced": 0, "prose": 0}
LEARNT = {
    "structured": "json_schema",
    "json_object": "json_object",
    "no_format": "none",
    "fenced": "json_schema",
    "prose": "json_schema",
}


def sent_formats(server: ScriptedLLMServer) -> list[tuple[str | None, str | None, str]]:
    """(operation, response_format type, outcome) of every chat request, in order."""
    return [(r.operation, (r.response_format or {}).get("type"), r.outcome) for r in server.chat_requests()]


def expected_formats(behaviour: str, operations: list[str]) -> list[tuple[str, str | None, str]]:
    """What the client sends to an endpoint of ``behaviour`` for these JSON steps in turn."""
    tried = {"json_object": ["json_schema"], "no_format": ["json_schema", "json_object"]}.get(behaviour, [])
    first, kept = [(operations[0], kind, "http 400") for kind in tried], LEARNT[behaviour]
    kept_type = None if kept == "none" else kept
    return first + [(operation, kept_type, "ok") for operation in operations]


async def ledger_calls(memory: Memory, conversation_id: int) -> dict[str, int]:
    """Calls per operation in the usage ledger (embeddings left out: not chat calls)."""
    async with memory._sessions() as session:
        rows = await session.execute(
            select(UsageEntry.operation, func.sum(UsageEntry.calls))
            .where(UsageEntry.conversation_id == conversation_id, ~UsageEntry.operation.like("embed%"))
            .group_by(UsageEntry.operation)
        )
    return {operation: int(calls) for operation, calls in rows}


def assert_ledger_matches_the_endpoint(ledger: dict[str, int], server: ScriptedLLMServer) -> None:
    """Every request the endpoint received (refused ones included) is in the ledger under its operation."""
    assert ledger == {operation: server.count(operation) for operation in ledger}
    assert sum(ledger.values()) == server.count()


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """One emulated endpoint kind, the real client talking to it, and a Memory using that client."""

    behaviour: str
    memory: Memory
    server: ScriptedLLMServer
    client: LLMClient
    ref: ConversationRef
    conversation_id: int

    def names(self) -> tuple[str, Memory, ScriptedLLMServer, ConversationRef, int]:
        return self.behaviour, self.memory, self.server, self.ref, self.conversation_id


@pytest.fixture(params=BEHAVIOURS)
def endpoint(
    request: pytest.FixtureRequest,
    llm_memory: Memory,
    scripted_llm: ScriptedLLMServer,
    llm_client: LLMClient,
    conversation_ref: ConversationRef,
    conversation_id: int,
) -> Endpoint:
    scripted_llm.behave(request.param)
    return Endpoint(request.param, llm_memory, scripted_llm, llm_client, conversation_ref, conversation_id)


async def test_consolidation_steps_against_each_endpoint(endpoint: Endpoint) -> None:
    """Extraction, entity resolution, context compression, then the running summary
    (free text, never wrapped) rebuilt after a deletion."""
    behaviour, llm_memory, scripted_llm, conversation_ref, conversation_id = endpoint.names()
    for operation, handler in scripted_memory.HANDLERS.items():
        scripted_llm.on(operation, handler)
    tight = dataclasses.replace(llm_memory, params=MemoryParams(context_tokens=16))
    first = [("n1", "Caroline", "I visited Paris with my sister and we loved the food and the museums of the city.")]
    await api.ingest(llm_memory, conversation_ref, messages(first), principal=OPERATOR)
    await api.consolidate(tight, conversation_ref, principal=OPERATOR)
    # "Carolyn" vs "Caroline" is doubtful: the LLM is asked whether they are one entity
    await api.ingest(llm_memory, conversation_ref, messages([("n2", "Carolyn", "I visited Rome.")], start=5), principal=OPERATOR)
    await api.consolidate(tight, conversation_ref, principal=OPERATOR)
    ids = await episode_ids(llm_memory, conversation_id)
    state = await graph_state(llm_memory, conversation_id)

    assert {(r["subject"], r["object"]) for r in state["relations"]} == {("Caroline", "Paris"), ("Caroline", "Rome")}
    assert state["entity_support"]["Caroline"] == {ids["n1"], ids["n2"]}  # resolved as one entity
    assert "Carolyn" not in state["entities"].values()
    assert 0 < len(state["context"]) and scripted_llm.count("compress_context") >= 1
    json_steps = [operation for operation, _, outcome in sent_formats(scripted_llm) if outcome == "ok"]
    assert json_steps[:2] == ["extract", "compress_context"]
    assert sent_formats(scripted_llm) == expected_formats(behaviour, json_steps)
    assert endpoint.client.format_mode == LEARNT[behaviour]

    report = await api.forget(llm_memory, conversation_ref, "n2", principal=OPERATOR)
    assert report.summary_rebuilt
    async with llm_memory._sessions() as session:
        checkpoint = await session.get(Checkpoint, conversation_id)
    assert checkpoint.summary == "A conversation between Caroline."  # the text reply as is
    (summary,) = scripted_llm.chat_requests("summary")
    assert summary.response_format is None and summary.outcome == "ok"

    ledger = await ledger_calls(llm_memory, conversation_id)
    assert set(ledger) == {"extract", "resolve_entity", "compress_context", "summary"}
    assert ledger["extract"] == scripted_llm.count("extract", outcome="ok") + EXTRA_CALLS[behaviour]
    assert ledger["resolve_entity"] == 1 and ledger["summary"] == 1
    assert_ledger_matches_the_endpoint(ledger, scripted_llm)


def rerank_berlin_first(request: ChatRequest) -> dict[str, object]:
    numbered = re.findall(r"^(\d+)\. (.*)$", request.user, re.MULTILINE)
    return {"scores": [{"id": int(n), "score": 10 if "Berlin" in line else 1} for n, line in numbered]}


def answer_from_toms_message(request: ChatRequest) -> dict[str, object]:
    found = re.search(r"\[(E[\d.]+)\] tom: I moved to the Berlin", request.user)
    assert found is not None, "the answer prompt lists Tom's message"
    return {"answer": "Tom moved to Berlin.", "citations": [found.group(1)], "in_memory": True}


async def test_retrieval_steps_against_each_endpoint(endpoint: Endpoint) -> None:
    """Decomposition, rerank and the grounded answer, asked twice: the second question
    pays no refusal."""
    behaviour, llm_memory, scripted_llm, conversation_ref, conversation_id = endpoint.names()
    episodes = await _chat(llm_memory, conversation_ref)
    scripted_llm.on("decompose", lambda request: {"queries": ["Where did Tom move?", "Where is lunch on Wednesday?"]})
    scripted_llm.on("rerank", rerank_berlin_first)
    scripted_llm.on("answer", answer_from_toms_message)
    for _ in range(2):
        result = await api.ask(
            llm_memory,
            conversation_ref,
            "Where did Tom move and where is lunch?",
            principal=OPERATOR,
            date=T0 + timedelta(days=1),
        )
        assert result.mode == "llm" and result.in_memory and result.notes == []
        assert result.answer == "Tom moved to Berlin."
        assert result.sub_queries == ["Where did Tom move?", "Where is lunch on Wednesday?"]
        assert "Berlin" in result.evidence[0].text  # the rerank's order
        assert [c.platform_message_id for c in result.citations] == ["m1"] and result.citations[0].episode_id == episodes["m1"]

    steps = ["decompose", "rerank", "answer"] * 2
    assert sent_formats(scripted_llm) == expected_formats(behaviour, steps)
    ledger = await ledger_calls(llm_memory, conversation_id)
    assert ledger == {"decompose": 2 + EXTRA_CALLS[behaviour], "rerank": 2, "answer": 2}
    assert_ledger_matches_the_endpoint(ledger, scripted_llm)


async def test_community_summaries_against_each_endpoint(endpoint: Endpoint) -> None:
    behaviour, llm_memory, scripted_llm, conversation_ref, conversation_id = endpoint.names()
    scripted_llm.on("summarize_community", lambda request: {"name": "The sailors", "summary": "They sail together."})
    await two_groups(llm_memory, conversation_id, "qz" + uuid.uuid4().hex[:8])
    report = await api.build_communities(llm_memory, conversation_ref, principal=OPERATOR)
    assert report.regenerated == 2 and report.llm_fallbacks == 0
    assert set((await community_documents(llm_memory, conversation_id)).values()) == {"The sailors: They sail together."}
    assert sent_formats(scripted_llm) == expected_formats(behaviour, ["summarize_community"] * 2)
    ledger = await ledger_calls(llm_memory, conversation_id)
    assert ledger == {"summarize_community": 2 + EXTRA_CALLS[behaviour]}
    assert_ledger_matches_the_endpoint(ledger, scripted_llm)


class Queries(BaseModel):
    queries: list[str]


async def ask_json(client: LLMClient, operation: str = "decompose") -> Queries:
    result = await client.complete_json(
        system="Split the question.", user="Where did Tom move?", schema=Queries, phase="retrieval", operation=operation
    )
    return result.value


def client_for(server: ScriptedLLMServer, model: str = "scripted", **options: object) -> LLMClient:
    return LLMClient(base_url=server.base_url, api_key="t", model=model, timeout=2, max_retries=1, backoff=0.01, **options)  # type: ignore[arg-type]


async def test_the_mode_is_learnt_once_per_client_and_logged_once(
    scripted_llm: ScriptedLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    scripted_llm.behave("no_format")
    scripted_llm.on("decompose", lambda request: {"queries": ["Tom"]})
    client = client_for(scripted_llm)
    try:
        with caplog.at_level(logging.WARNING, logger="memory.models.llm"):
            for _ in range(5):
                assert (await ask_json(client)).queries == ["Tom"]
    finally:
        await client.close()
    assert [kind for _, kind, _ in sent_formats(scripted_llm)] == ["json_schema", "json_object"] + [None] * 5
    refusals = [r.getMessage() for r in caplog.records if "refused response_format" in r.getMessage()]
    assert len(refusals) == 2  # json_schema, then json_object: one line each, once
    assert "using json_object from now on" in refusals[0] and "using none from now on" in refusals[1]
    # A new client (another process) learns it again: the mode is per client.
    again = client_for(scripted_llm)
    try:
        await ask_json(again)
        assert again.format_mode == "none"
    finally:
        await again.close()
    assert scripted_llm.count(outcome="http 400") == 4


async def test_concurrent_first_calls_fall_back_once_each_at_most(scripted_llm: ScriptedLLMServer) -> None:
    """Requests in flight when the first refusal arrives each pay it once; none pays twice."""
    scripted_llm.behave("json_object")
    scripted_llm.on("decompose", lambda request: {"queries": [request.user]})
    client = client_for(scripted_llm)
    try:
        replies = await asyncio.gather(*(ask_json(client) for _ in range(8)))
        later = await asyncio.gather(*(ask_json(client) for _ in range(8)))
    finally:
        await client.close()
    assert all(reply.queries == ["Where did Tom move?"] for reply in [*replies, *later])
    refused = scripted_llm.count(outcome="http 400")
    assert 1 <= refused <= 8 and scripted_llm.count(outcome="ok") == 16
    assert [kind for _, kind, _ in sent_formats(scripted_llm)[-8:]] == ["json_object"] * 8


async def test_one_server_emulates_several_endpoints_by_model(scripted_llm: ScriptedLLMServer) -> None:
    scripted_llm.behave("json_object", model="local-json")
    scripted_llm.behave("prose", model="local-chatty")
    scripted_llm.on("decompose", lambda request: {"queries": [request.model]})
    clients = {model: client_for(scripted_llm, model) for model in ("scripted", "local-json", "local-chatty")}
    try:
        for model, client in clients.items():
            assert (await ask_json(client)).queries == [model]
    finally:
        for client in clients.values():
            await client.close()
    modes = {model: client.format_mode for model, client in clients.items()}
    assert modes == {"scripted": "json_schema", "local-json": "json_object", "local-chatty": "json_schema"}
    chatty = scripted_llm.chat_requests()[-1]
    assert chatty.model == "local-chatty" and chatty.outcome == "ok"


@pytest.mark.parametrize(
    ("fixed", "behaviour", "sent"),
    [("json_object", "structured", "json_object"), ("none", "structured", None), ("json_object", "fenced", "json_object")],
)
async def test_a_fixed_mode_is_sent_as_is(scripted_llm: ScriptedLLMServer, fixed: str, behaviour: str, sent: str | None) -> None:
    scripted_llm.behave(behaviour)
    scripted_llm.on("decompose", lambda request: {"queries": ["Tom"]})
    client = client_for(scripted_llm, response_format=fixed)
    try:
        assert (await ask_json(client)).queries == ["Tom"]
    finally:
        await client.close()
    assert sent_formats(scripted_llm) == [("decompose", sent, "ok")]


async def test_a_fixed_mode_the_endpoint_refuses_fails_clearly_and_is_not_retried(scripted_llm: ScriptedLLMServer) -> None:
    scripted_llm.behave("json_object")
    client = client_for(scripted_llm, response_format="json_schema")
    try:
        with pytest.raises(LLMError, match=r"LLM decompose failed \(not retried\): HTTP 400: .*'response_format'") as failed:
            await ask_json(client)
    finally:
        await client.close()
    assert scripted_llm.count() == 1 and client.format_mode == "json_schema"
    assert failed.value.usage is not None and failed.value.usage.calls == 1


async def test_a_bad_request_that_is_not_about_the_format_does_not_change_the_mode(scripted_llm: ScriptedLLMServer) -> None:
    scripted_llm.fail_next(1, status=400)  # "scripted failure": says nothing of response_format
    client = client_for(scripted_llm)
    try:
        with pytest.raises(LLMError, match="HTTP 400"):
            await ask_json(client)
    finally:
        await client.close()
    assert scripted_llm.count() == 1 and client.format_mode == "json_schema"


async def test_a_refused_format_then_a_malformed_reply_is_retried_in_the_learnt_mode(scripted_llm: ScriptedLLMServer) -> None:
    """A refusal is not an attempt: the retry budget is left for the reply's faults."""
    scripted_llm.behave("json_object")
    scripted_llm.on("decompose", lambda request: {"queries": ["Tom"]})
    scripted_llm.malformed_next(1)
    client = client_for(scripted_llm)  # max_retries=1: two attempts
    try:
        result = await client.complete_json(system="s", user="q", schema=Queries, phase="retrieval", operation="decompose")
    finally:
        await client.close()
    assert sent_formats(scripted_llm) == [
        ("decompose", "json_schema", "http 400"),
        ("decompose", "json_object", "malformed"),
        ("decompose", "json_object", "ok"),
    ]
    assert result.value.queries == ["Tom"] and result.usage.calls == 3


async def test_prose_that_holds_no_object_degrades_as_a_malformed_reply(
    llm_memory: Memory, scripted_llm: ScriptedLLMServer, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    """An endpoint whose model answers in prose only: the answer step fails after its
    retries and the question is answered offline, with a note; nothing is lost."""
    scripted_llm.behave("prose")
    await _chat(llm_memory, conversation_ref)
    scripted_llm.on("answer", lambda request: "Tom moved to Berlin, I think.")
    result = await api.ask(llm_memory, conversation_ref, "Where did Tom move?", principal=OPERATOR, date=T0 + timedelta(days=1))
    assert result.mode == "extractive" and result.in_memory and result.notes
    assert result.answer.startswith('tom said on 06 May 2024: "I moved to the Berlin office')
    ledger = await ledger_calls(llm_memory, conversation_id)
    assert ledger["answer"] == scripted_llm.count("answer") == 3  # the failed attempts are paid for


def test_the_response_format_setting(scripted_llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    auto = build_llm(ModelSettings(llm_base_url=scripted_llm.base_url))
    fixed = build_llm(ModelSettings(llm_base_url=scripted_llm.base_url, llm_response_format="none"))
    assert auto is not None and fixed is not None
    assert (auto.format_mode, auto.fixed_format, fixed.format_mode, fixed.fixed_format) == ("json_schema", False, "none", True)
    monkeypatch.setenv("STASHBIRD_LLM_RESPONSE_FORMAT", "json_object")
    assert load_settings().models.llm_response_format == "json_object"
    monkeypatch.setenv("STASHBIRD_LLM_RESPONSE_FORMAT", "xml")
    with pytest.raises(ConfigurationError, match=r"^STASHBIRD_LLM_RESPONSE_FORMAT='xml': Input should be 'auto', "):
        load_settings()
    with pytest.raises(ValueError, match="response_format must be one of auto, json_schema, json_object, none"):
        client_for(scripted_llm, response_format="xml")
