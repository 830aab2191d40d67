"""The scripted server itself: embeddings through the real OpenAIEmbedder, raw HTTP
behaviour, recording under concurrency, and a clean stop."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time

import httpx
import numpy as np
import pytest

from lab.standins.scripted_llm import (
    EmbeddingRequest,
    ScriptedLLMServer,
    hashed_embedding,
)
from memory.errors import ConfigurationError, LLMError
from memory.models.embedder import ModelUnavailable, OpenAIEmbedder
from memory.models.llm import LLMClient
from memory.models.retry import RetryPolicy
from memory.models.tokens import count_tokens


async def test_embeddings_work_with_the_openai_embedder(scripted_llm: ScriptedLLMServer) -> None:
    embedder = OpenAIEmbedder(base_url=scripted_llm.base_url, api_key="test", model="scripted-embed", dim=384, batch_size=2)
    texts = ["Ana moved to Boston", "Ana moved to Boston last year", "the weather is cold", "Ana moved to Boston"]
    batch = await embedder.embed(texts)
    vectors = np.array(batch.vectors)
    assert vectors.shape == (4, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[0], vectors[3], atol=1e-6)  # deterministic
    # texts sharing words are closer than unrelated ones
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert batch.prompt_tokens == sum(count_tokens(text) for text in texts)
    embedding_requests = [r for r in scripted_llm.requests if isinstance(r, EmbeddingRequest)]
    assert [r.inputs for r in embedding_requests] == [texts[:2], texts[2:]]  # batches of 2
    assert scripted_llm.counts == {"embeddings": 2}


async def test_the_openai_embedder_retries_like_the_llm_client(scripted_llm: ScriptedLLMServer) -> None:
    fast = RetryPolicy(max_retries=2, backoff=0.01)
    embedder = OpenAIEmbedder(base_url=scripted_llm.base_url, api_key="test", model="m", dim=384, retry=fast)
    scripted_llm.fail_next(2, status=503, operation="embeddings")
    assert len((await embedder.embed(["hello"])).vectors) == 1  # the third attempt is answered
    scripted_llm.fail_next(3, status=500, operation="embeddings")
    with pytest.raises(ModelUnavailable, match="failed after 3 attempts: HTTP 500"):
        await embedder.embed(["hello"])
    scripted_llm.fail_next(1, status=400, operation="embeddings")
    with pytest.raises(ModelUnavailable, match=r"\(not retried\): HTTP 400"):
        await embedder.embed(["hello"])
    assert scripted_llm.counts == {"embeddings": 7}
    await embedder.close()
    assert embedder._client.is_closed()


async def test_embedding_dimension_mismatch_is_a_clear_error() -> None:
    with ScriptedLLMServer(embedding_dim=16) as server:
        embedder = OpenAIEmbedder(base_url=server.base_url, api_key="test", model="m", dim=384)
        with pytest.raises(ConfigurationError, match="returned 16 dimensions, STASHBIRD_EMBEDDING_DIM is 384"):
            await embedder.embed(["hello"])


def test_embeddings_in_base64_and_float_agree(scripted_llm: ScriptedLLMServer) -> None:
    url = f"{scripted_llm.base_url}/embeddings"
    as_float = httpx.post(url, json={"model": "m", "input": "hello world", "encoding_format": "float"}).json()
    as_base64 = httpx.post(url, json={"model": "m", "input": ["hello world"], "encoding_format": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(as_base64["data"][0]["embedding"]), dtype="<f4")
    assert np.allclose(decoded, as_float["data"][0]["embedding"], atol=1e-7)
    assert as_float["data"][0]["embedding"] == pytest.approx(hashed_embedding("hello world", 384))


def test_raw_http_errors_are_clear(scripted_llm: ScriptedLLMServer) -> None:
    base = scripted_llm.base_url
    not_json = httpx.post(f"{base}/chat/completions", content=b"{oops", headers={"Content-Type": "application/json"})
    assert not_json.status_code == 400 and "invalid JSON body" in not_json.json()["error"]["message"]
    no_messages = httpx.post(f"{base}/chat/completions", json={"model": "m", "messages": []})
    assert no_messages.status_code == 400 and "messages" in no_messages.json()["error"]["message"]
    unknown = httpx.post(f"{base}/completions", json={})
    assert unknown.status_code == 404
    bad_input = httpx.post(f"{base}/embeddings", json={"model": "m", "input": [1, 2, 3]})
    assert bad_input.status_code == 400
    scripted_llm.fail_next(1, status=429, retry_after=2)
    limited = httpx.post(f"{base}/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert limited.status_code == 429 and limited.headers["Retry-After"] == "2"


def test_chat_completion_is_a_proper_object(scripted_llm: ScriptedLLMServer) -> None:
    body = {
        "model": "scripted",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}],
        "response_format": {"type": "json_object"},
    }
    scripted_llm.on("greet", lambda request: {"greeting": request.user})
    reply = httpx.post(f"{scripted_llm.base_url}/chat/completions", json=body, headers={"X-Stashbird-Operation": "greet"}).json()
    assert reply["object"] == "chat.completion"
    content = reply["choices"][0]["message"]["content"]
    assert json.loads(content) == {"greeting": "Hello there"}
    assert reply["usage"] == {
        "prompt_tokens": count_tokens("Be brief.") + count_tokens("Hello there"),
        "completion_tokens": count_tokens(content),
        "total_tokens": count_tokens("Be brief.") + count_tokens("Hello there") + count_tokens(content),
    }


def _chat(server: ScriptedLLMServer, response_format: dict | None = None, model: str = "scripted") -> httpx.Response:
    body: dict = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    if response_format is not None:
        body["response_format"] = response_format
    return httpx.post(f"{server.base_url}/chat/completions", json=body, headers={"X-Stashbird-Operation": "greet"})


STRICT = {
    "type": "json_schema",
    "json_schema": {
        "name": "Greeting",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"greeting": {"type": "string"}},
            "required": ["greeting"],
            "additionalProperties": False,
        },
    },
}


def test_each_behaviour_treats_response_format_as_its_endpoint_does(scripted_llm: ScriptedLLMServer) -> None:
    scripted_llm.on("greet", lambda request: {"greeting": "hello"})
    as_object = {"type": "json_object"}

    scripted_llm.behave("structured")
    assert [_chat(scripted_llm, f).status_code for f in (STRICT, as_object, None)] == [200, 200, 200]
    open_schema = json.loads(json.dumps(STRICT))
    del open_schema["json_schema"]["schema"]["additionalProperties"]
    refused = _chat(scripted_llm, open_schema)
    assert refused.status_code == 400 and "'additionalProperties' is required" in refused.json()["error"]["message"]
    loose = json.loads(json.dumps(open_schema))
    loose["json_schema"]["strict"] = False  # not strict: any object schema is taken
    assert _chat(scripted_llm, loose).status_code == 200
    unnamed = {"type": "json_schema", "json_schema": {"name": "a greeting", "schema": {"type": "object"}}}
    assert "json_schema.name" in _chat(scripted_llm, unnamed).json()["error"]["message"]
    assert _chat(scripted_llm, {"type": "yaml"}).json()["error"]["param"] == "response_format.type"

    scripted_llm.behave("json_object")
    refused = _chat(scripted_llm, STRICT)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "response_format"
    assert "'json_schema' is not supported" in refused.json()["error"]["message"]
    assert [_chat(scripted_llm, f).status_code for f in (as_object, None)] == [200, 200]

    scripted_llm.behave("no_format")
    for kind in (STRICT, as_object):
        error = _chat(scripted_llm, kind).json()["error"]
        assert "param" not in error and error["message"].startswith(f"response_format {kind['type']} is not supported")
    assert _chat(scripted_llm, None).json()["choices"][0]["message"]["content"] == '{"greeting": "hello"}'
    assert [r.outcome for r in scripted_llm.chat_requests()].count("http 400") == 6


def test_fenced_and_prose_endpoints_wrap_json_but_not_text(scripted_llm: ScriptedLLMServer) -> None:
    def content(response: httpx.Response) -> str:
        return response.json()["choices"][0]["message"]["content"]

    scripted_llm.on("greet", lambda request: {"greeting": "hello"})
    scripted_llm.behave("fenced")
    assert content(_chat(scripted_llm, STRICT)) == '```json\n{\n  "greeting": "hello"\n}\n```'  # format ignored
    scripted_llm.behave("prose", model="chatty")
    wrapped = content(_chat(scripted_llm, {"type": "json_object"}, model="chatty"))
    assert wrapped.startswith("Sure! Here is the JSON") and '{"greeting": "hello"}' in wrapped
    scripted_llm.on("greet", lambda request: "Hello to you too.")
    assert content(_chat(scripted_llm, None)) == content(_chat(scripted_llm, None, model="chatty")) == "Hello to you too."
    with pytest.raises(ValueError, match="behaviour must be one of"):
        scripted_llm.behave("xml")


def test_without_a_rule_json_is_what_the_prompt_asks_for(scripted_llm: ScriptedLLMServer) -> None:
    """An endpoint held to no format still answers a JSON step with an object (the
    schema is in the system prompt), and a text step with text."""
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": "Reply with one JSON object that matches this JSON schema: {}"}],
    }
    reply = httpx.post(f"{scripted_llm.base_url}/chat/completions", json=body).json()
    assert reply["choices"][0]["message"]["content"] == "{}"
    assert _chat(scripted_llm, None).json()["choices"][0]["message"]["content"] == "OK."


async def test_a_broken_handler_answers_500_and_is_recorded(scripted_llm: ScriptedLLMServer, llm_client: LLMClient) -> None:
    scripted_llm.on("answer", lambda request: 1 / 0)
    with pytest.raises(LLMError, match="ZeroDivisionError"):
        await llm_client.complete_text(system="s", user="q", phase="retrieval", operation="answer")
    assert {r.outcome for r in scripted_llm.requests} == {"handler error"}


async def test_concurrent_requests_are_all_recorded(scripted_llm: ScriptedLLMServer, llm_client: LLMClient) -> None:
    scripted_llm.on("answer", lambda request: request.user.upper())
    results = await asyncio.gather(
        *(llm_client.complete_text(system="s", user=f"q{i}", phase="retrieval", operation="answer") for i in range(20))
    )
    assert [r.value for r in results] == [f"Q{i}" for i in range(20)]
    assert sorted(r.user for r in scripted_llm.chat_requests("answer")) == sorted(f"q{i}" for i in range(20))
    scripted_llm.clear()
    assert scripted_llm.requests == []


def test_stop_releases_a_held_request_and_closes_the_port() -> None:
    server = ScriptedLLMServer().start()
    base = server.base_url
    server.timeout_next(1, seconds=30)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            httpx.post(
                f"{base}/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "x"}]}, timeout=10
            )
        except httpx.HTTPError as error:
            errors.append(error)

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 5
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    server.stop()
    caller.join(timeout=5)
    assert not caller.is_alive() and time.monotonic() - started < 5
    assert len(errors) == 1  # the held request got no reply, not a 30 s wait
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{base}/chat/completions", json={}, timeout=2)
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
