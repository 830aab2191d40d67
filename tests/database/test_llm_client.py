"""The real LLM client against the real scripted server on loopback: parsing, usage,
retries, failures and routing by operation."""

from __future__ import annotations

import json
import time

import pytest
from pydantic import BaseModel

from bot.runtime import build_llm, memory_from_settings
from bot.settings import DatabaseSettings, ModelSettings, Settings
from lab.standins.scripted_llm import ChatRequest, ScriptedLLMServer
from memory.core import Memory
from memory.errors import LLMError
from memory.models.embedder import LocalEmbedder
from memory.models.llm import LLMClient
from memory.models.tokens import count_tokens
from memory.store.ledger import record_usage, usage_totals


class Fact(BaseModel):
    subject: str
    predicate: str
    object: str


class Facts(BaseModel):
    facts: list[Fact]


FACTS = {"facts": [{"subject": "Ana", "predicate": "moved_to", "object": "Boston"}]}


def impatient_client(base_url: str, timeout: float) -> LLMClient:
    """One retry and a short timeout, for the timeout and connection tests."""
    return LLMClient(base_url=base_url, api_key="t", model="scripted", timeout=timeout, max_retries=1, backoff=0.01)


async def extract(client: LLMClient) -> object:
    return await client.complete_json(
        system="Extract facts.", user="Ana: I moved to Boston.", schema=Facts, phase="ingestion", operation="extract"
    )


async def test_json_reply_is_parsed_into_the_schema_with_usage(scripted_llm: ScriptedLLMServer, llm_client: LLMClient) -> None:
    scripted_llm.on("extract", lambda request: FACTS)
    result = await extract(llm_client)
    assert result.value == Facts.model_validate(FACTS)
    (request,) = scripted_llm.chat_requests()
    assert request.operation == "extract"
    assert request.json_mode
    assert '"facts"' in request.system  # the schema travels in the system prompt
    assert request.user == "Ana: I moved to Boston."
    usage = result.usage
    assert (usage.phase, usage.operation, usage.model, usage.calls) == ("ingestion", "extract", "scripted", 1)
    assert usage.prompt_tokens == count_tokens(request.system) + count_tokens(request.user)
    assert usage.completion_tokens == count_tokens(json.dumps(FACTS))


async def test_usage_goes_into_the_ledger(
    scripted_llm: ScriptedLLMServer, llm_client: LLMClient, memory: Memory, conversation_id: int
) -> None:
    scripted_llm.on("extract", lambda request: FACTS)
    result = await extract(llm_client)
    async with memory._sessions.begin() as session:
        await record_usage(session, conversation_id, result.usage)
    async with memory._sessions.begin() as session:
        (row,) = await usage_totals(session, conversation_id)
    assert row == {
        "phase": "ingestion",
        "operation": "extract",
        "model": "scripted",
        "calls": 1,
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
    }
    assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0


@pytest.mark.parametrize("status", [500, 503, 429])
async def test_transient_status_is_retried_then_succeeds(
    scripted_llm: ScriptedLLMServer, llm_client: LLMClient, status: int
) -> None:
    scripted_llm.on("extract", lambda request: FACTS)
    scripted_llm.fail_next(2, status=status)
    result = await extract(llm_client)
    assert result.value.facts[0].object == "Boston"
    assert [r.outcome for r in scripted_llm.requests] == [f"http {status}", f"http {status}", "ok"]
    assert result.usage.calls == 3


async def test_rate_limit_honours_retry_after(scripted_llm: ScriptedLLMServer, llm_client: LLMClient) -> None:
    scripted_llm.on("extract", lambda request: FACTS)
    scripted_llm.fail_next(1, status=429, retry_after=0.4)
    started = time.monotonic()
    result = await extract(llm_client)
    assert time.monotonic() - started >= 0.4  # backoff alone would be ~0.01 s
    assert result.usage.calls == 2


async def test_timeout_is_retried_then_succeeds(scripted_llm: ScriptedLLMServer) -> None:
    scripted_llm.on("extract", lambda request: FACTS)
    scripted_llm.timeout_next(1, seconds=3)
    client = impatient_client(scripted_llm.base_url, 0.3)
    try:
        result = await extract(client)
    finally:
        await client.close()
    assert [r.outcome for r in scripted_llm.requests] == ["timeout", "ok"]
    assert result.usage.calls == 2
    assert result.value.facts[0].subject == "Ana"


async def test_malformed_json_is_retried_and_counted(scripted_llm: ScriptedLLMServer, llm_client: LLMClient) -> None:
    scripted_llm.on("extract", lambda request: FACTS)
    scripted_llm.malformed_next(1)
    result = await extract(llm_client)
    assert [r.outcome for r in scripted_llm.requests] == ["malformed", "ok"]
    assert result.usage.calls == 2
    # the malformed attempt's tokens are spent too, so they are counted
    good_prompt = count_tokens(scripted_llm.requests[1].system) + count_tokens(scripted_llm.requests[1].user)
    assert result.usage.prompt_tokens == 2 * good_prompt


async def test_schema_invalid_reply_fails_with_the_field_named(scripted_llm: ScriptedLLMServer, llm_client: LLMClient) -> None:
    scripted_llm.on("extract", lambda request: {"facts": [{"subject": "Ana", "predicate": "moved_to"}]})
    with pytest.raises(LLMError) as caught:
        await extract(llm_client)
    message = str(caught.value)
    assert "extract" in message and "schema errors" in message and "facts.0.object" in message
    assert "3 attempts" in message
    assert scripted_llm.count("extract") == 3
    assert caught.value.usage is not None and caught.value.usage.calls == 3


async def test_schema_invalid_then_valid_succeeds(scripted_llm: ScriptedLLMServer, llm_client: LLMClient) -> None:
    replies = iter([{"facts": "not a list"}, FACTS])
    scripted_llm.on("extract", lambda request: next(replies))
    result = await extract(llm_client)
    assert result.usage.calls == 2 and result.value.facts[0].predicate == "moved_to"


async def test_bad_request_is_not_retried(scripted_llm: ScriptedLLMServer, llm_client: LLMClient) -> None:
    scripted_llm.fail_next(1, status=400)
    with pytest.raises(LLMError) as caught:
        await extract(llm_client)
    assert scripted_llm.count() == 1
    assert "HTTP 400" in str(caught.value) and "extract" in str(caught.value)
    assert caught.value.attempts == 1


async def test_error_after_the_last_try_names_operation_and_cause(scripted_llm: ScriptedLLMServer, llm_client: LLMClient) -> None:
    scripted_llm.fail_next(5, status=502)
    with pytest.raises(LLMError, match=r"LLM summary failed after 3 attempts: HTTP 502"):
        await llm_client.complete_text(system="s", user="u", phase="ingestion", operation="summary")
    assert scripted_llm.count("summary") == 3


async def test_timeout_after_the_last_try(scripted_llm: ScriptedLLMServer) -> None:
    scripted_llm.timeout_next(2, seconds=3)
    client = impatient_client(scripted_llm.base_url, 0.2)
    try:
        with pytest.raises(LLMError, match=r"LLM rerank failed after 2 attempts: timeout after 0.2s"):
            await client.complete_text(system="s", user="u", phase="retrieval", operation="rerank")
    finally:
        await client.close()


async def test_connection_refused_is_retried_then_fails() -> None:
    server = ScriptedLLMServer().start()
    base_url = server.base_url
    server.stop()
    client = impatient_client(base_url, 1)
    try:
        with pytest.raises(LLMError, match=r"answer failed after 2 attempts: connection error"):
            await client.complete_text(system="s", user="u", phase="retrieval", operation="answer")
    finally:
        await client.close()


async def test_operation_header_routes_to_its_handler(scripted_llm: ScriptedLLMServer, llm_client: LLMClient) -> None:
    scripted_llm.on("summary", lambda request: "summary of: " + request.user)
    scripted_llm.on("answer", lambda request: "the answer")
    scripted_llm.when(lambda request: "Boston" in request.user, lambda request: "about Boston")
    summary = await llm_client.complete_text(system="s", user="chat", phase="ingestion", operation="summary")
    answer = await llm_client.complete_text(system="s", user="q", phase="retrieval", operation="answer")
    boston = await llm_client.complete_text(system="s", user="Boston?", phase="retrieval", operation="answer")
    other = await llm_client.complete_text(system="s", user="q", phase="retrieval", operation="judge")
    assert (summary.value, answer.value, boston.value, other.value) == ("summary of: chat", "the answer", "about Boston", "OK.")
    assert scripted_llm.counts == {"summary": 1, "answer": 2, "judge": 1}


async def test_newest_rule_wins(scripted_llm: ScriptedLLMServer, llm_client: LLMClient) -> None:
    scripted_llm.on("answer", lambda request: "first")
    scripted_llm.on("answer", lambda request: "second")
    result = await llm_client.complete_text(system="s", user="q", phase="retrieval", operation="answer")
    assert result.value == "second"


async def test_fault_scoped_to_an_operation(scripted_llm: ScriptedLLMServer, llm_client: LLMClient) -> None:
    scripted_llm.fail_next(1, status=500, operation="rerank")
    await llm_client.complete_text(system="s", user="q", phase="retrieval", operation="answer")
    rerank = await llm_client.complete_text(system="s", user="q", phase="retrieval", operation="rerank")
    assert rerank.usage.calls == 2
    assert [(r.operation, r.outcome) for r in scripted_llm.requests] == [
        ("answer", "ok"),
        ("rerank", "http 500"),
        ("rerank", "ok"),
    ]


async def test_max_tokens_is_sent(scripted_llm: ScriptedLLMServer, llm_client: LLMClient) -> None:
    def reply(request: ChatRequest) -> str:
        return str(request.body.get("max_tokens"))

    result = await llm_client.complete_text(system="s", user="q", phase="retrieval", operation="answer", max_tokens=77)
    assert scripted_llm.chat_requests()[0].body["max_tokens"] == 77
    scripted_llm.on("answer", reply)
    assert (await llm_client.complete_text(system="s", user="q", phase="retrieval", operation="answer")).value == "None"
    assert result.value == "OK."


def test_llm_error_is_one_of_the_core_errors() -> None:
    import memory
    from memory import errors

    assert memory.LLMError is errors.LLMError
    assert issubclass(errors.LLMError, errors.StashbirdError)


def test_build_llm_from_settings(scripted_llm: ScriptedLLMServer) -> None:
    assert build_llm(ModelSettings(llm_base_url=None, llm_api_key=None)) is None
    client = build_llm(
        ModelSettings(llm_base_url=scripted_llm.base_url, llm_model="local-model", llm_timeout=5, llm_max_retries=1)
    )
    assert isinstance(client, LLMClient)
    assert (client.model, client.timeout, client.retry.max_retries) == ("local-model", 5, 1)


async def test_memory_from_settings_carries_the_llm_and_closes_it(
    scripted_llm: ScriptedLLMServer, database_url: str, embedder: LocalEmbedder
) -> None:
    settings = Settings(
        database=DatabaseSettings(url=database_url),
        models=ModelSettings(llm_base_url=scripted_llm.base_url, llm_model="local-model"),
    )
    async with memory_from_settings(settings, embedder) as memory:
        assert memory.llm is not None
        result = await memory.llm.complete_text(system="s", user="q", phase="retrieval", operation="answer")
        assert result.value == "OK." and result.usage.model == "local-model"
    assert memory.llm._client.is_closed()
    async with memory_from_settings(Settings(database=DatabaseSettings(url=database_url)), embedder) as offline:
        assert offline.llm is None
