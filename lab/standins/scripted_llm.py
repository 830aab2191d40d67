"""A scripted OpenAI-compatible HTTP server for tests and offline benchmarks.

It listens on 127.0.0.1 (ephemeral port) and speaks ``POST /v1/chat/completions`` and
``POST /v1/embeddings``, so the real ``openai`` client talks real HTTP to it. Replies
come from rules: handlers chosen by the ``X-Stashbird-Operation`` header and/or a
predicate over the request. It can be told to fail (HTTP status), to hang past the
client's timeout or to return malformed JSON, and it records every request it got.

It emulates how real endpoints treat ``response_format`` (a behaviour per server, or per
model name, so one server can stand for several endpoints):

- ``structured``: takes ``json_schema`` (checked as OpenAI checks it: a name, a schema,
  and under ``strict`` every object closed with every property required) and
  ``json_object``, and replies exactly as scripted (OpenAI, recent vLLM and llama.cpp);
- ``json_object``: takes ``json_object`` only; ``json_schema`` gets OpenAI's 400
  (``param: response_format``);
- ``no_format``: refuses any ``response_format`` with a 400 whose message names it (no
  ``param``: the wording of servers that do not follow OpenAI's error shape);
- ``fenced``: ignores ``response_format`` and wraps a JSON reply in a ```json block;
- ``prose``: ignores ``response_format`` and wraps a JSON reply in a sentence.

Text replies (a handler's ``str``) are never wrapped: the wrapping is what local models do
to the JSON they are asked for.

It runs in a daemon thread with its own thread per connection, independent of any
asyncio loop, so a handler (or a simulated timeout) can block without stalling the
client under test.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Mapping

import numpy as np

from lab.probes import OPERATION_HEADER, count_tokens

DEFAULT_TEXT_REPLY = "OK."
MALFORMED_CONTENT = '{"malformed": [1, 2,'
BEHAVIOURS = ("structured", "json_object", "no_format", "fenced", "prose")
_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completion request as the server received it."""

    operation: str | None
    model: str
    messages: list[dict[str, Any]]
    response_format: dict[str, Any] | None
    body: dict[str, Any]
    path: str = "/v1/chat/completions"
    outcome: str = "ok"  # ok | http <status> | timeout | malformed | handler error

    def _text(self, role: str) -> str:
        return "\n".join(_content_text(m.get("content")) for m in self.messages if m.get("role") == role)

    @property
    def system(self) -> str:
        return self._text("system")

    @property
    def user(self) -> str:
        return self._text("user")

    @property
    def json_mode(self) -> bool:
        return self.response_format is not None and self.response_format.get("type") in {"json_object", "json_schema"}

    @property
    def asks_for_json(self) -> bool:
        """JSON asked for by ``response_format`` or, with none, by the system prompt (a
        model read it there)."""
        return self.json_mode or "JSON schema" in self.system


@dataclass(frozen=True)
class EmbeddingRequest:
    """One embeddings request as the server received it."""

    operation: str | None
    model: str
    inputs: list[str]
    body: dict[str, Any]
    path: str = "/v1/embeddings"
    outcome: str = "ok"


Handler = Callable[[ChatRequest], "str | dict[str, Any] | list[Any]"]
Predicate = Callable[[ChatRequest], bool]


@dataclass
class _Rule:
    handler: Handler
    operation: str | None
    when: Predicate | None

    def matches(self, request: ChatRequest) -> bool:
        if self.operation is not None and request.operation != self.operation:
            return False
        return self.when is None or bool(self.when(request))


@dataclass
class _Fault:
    kind: str  # status | timeout | malformed
    remaining: int
    operation: str | None
    status: int = 500
    retry_after: float | None = None
    seconds: float = 0.0


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def default_handler(request: ChatRequest) -> str | dict[str, Any]:
    """Without a matching rule: an empty object when JSON is asked for, a short text otherwise."""
    return {} if request.asks_for_json else DEFAULT_TEXT_REPLY


_WORD = re.compile(r"\w+")


@lru_cache(maxsize=65536)
def _word_vector(word: str, dim: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(word.encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32)


def hashed_embedding(text: str, dim: int) -> list[float]:
    """A deterministic unit vector: the normalised sum of per-word hash vectors.

    Summing word vectors (rather than hashing the whole text) keeps texts that share
    words close, so offline retrieval over these vectors still behaves sensibly.
    """
    words = _WORD.findall(text.lower()) or [""]
    vector = np.sum([_word_vector(word, dim) for word in words], axis=0)
    norm = float(np.linalg.norm(vector))
    return [float(x) for x in (vector / norm if norm else _word_vector("", dim))]


class ScriptedLLMServer:
    """An OpenAI-compatible server on loopback whose replies and failures are scripted.

    Rules are tried newest first, so a test can override a fixture's rule; the first
    rule whose operation and predicate match answers. A handler returns a ``str``
    (the message content as is) or a ``dict``/``list`` (JSON-encoded).
    """

    def __init__(
        self,
        handlers: Mapping[str, Handler] | None = None,
        *,
        default: Handler = default_handler,
        embedding_dim: int = 384,
        model: str = "scripted",
        behaviour: str = "structured",
        behaviours: Mapping[str, str] | None = None,
    ) -> None:
        self.default = default
        self.embedding_dim = embedding_dim
        self.model = model
        self.behaviour = _checked_behaviour(behaviour)
        self.behaviours = {name: _checked_behaviour(kind) for name, kind in (behaviours or {}).items()}
        self._rules: list[_Rule] = []
        self._faults: list[_Fault] = []
        self._requests: list[ChatRequest | EmbeddingRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        for operation, handler in (handlers or {}).items():
            self.on(operation, handler)

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> "ScriptedLLMServer":
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()  # wakes handlers sleeping in a simulated timeout
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> "ScriptedLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("scripted LLM server is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # --- script ----------------------------------------------------------------------

    def on(self, operation: str, handler: Handler) -> None:
        """Answer requests carrying this operation header with ``handler``."""
        self.route(handler, operation=operation)

    def when(self, predicate: Predicate, handler: Handler) -> None:
        """Answer requests for which ``predicate`` holds with ``handler``."""
        self.route(handler, when=predicate)

    def route(self, handler: Handler, *, operation: str | None = None, when: Predicate | None = None) -> None:
        with self._lock:
            self._rules.insert(0, _Rule(handler, operation, when))

    def fail_next(self, n: int = 1, status: int = 500, retry_after: float | None = None, *, operation: str | None = None) -> None:
        """Answer the next ``n`` chat requests (of ``operation``, if given; embeddings
        requests only with ``operation="embeddings"``) with HTTP ``status``."""
        self._add_fault(_Fault("status", n, operation, status=status, retry_after=retry_after))

    def timeout_next(self, n: int = 1, seconds: float = 5.0, *, operation: str | None = None) -> None:
        """Hold the next ``n`` chat requests for ``seconds`` before replying (past the client's timeout)."""
        self._add_fault(_Fault("timeout", n, operation, seconds=seconds))

    def malformed_next(self, n: int = 1, *, operation: str | None = None) -> None:
        """Reply to the next ``n`` chat requests with content that is not valid JSON."""
        self._add_fault(_Fault("malformed", n, operation))

    def _add_fault(self, fault: _Fault) -> None:
        if fault.remaining < 1:
            raise ValueError("n must be at least 1")
        with self._lock:
            self._faults.append(fault)

    def _take_fault(self, operation: str | None, *, exact: bool = False) -> _Fault | None:
        """The next fault for a request of ``operation`` (with ``exact``, only one scripted
        for that operation by name: embeddings fail only when asked to by name)."""
        with self._lock:
            for fault in self._faults:
                if fault.remaining > 0 and (fault.operation == operation or (not exact and fault.operation is None)):
                    fault.remaining -= 1
                    return fault
            return None

    # --- records ---------------------------------------------------------------------

    @property
    def requests(self) -> list[ChatRequest | EmbeddingRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def chat_requests(self, operation: str | None = None, *, outcome: str | None = None) -> list[ChatRequest]:
        """Chat requests received, all or of one operation (and of one outcome, e.g. ``"http 400"``)."""
        return [
            r
            for r in self.requests
            if isinstance(r, ChatRequest)
            and (operation is None or r.operation == operation)
            and (outcome is None or r.outcome == outcome)
        ]

    def count(self, operation: str | None = None, *, outcome: str | None = None) -> int:
        """Chat requests received, all or of one operation (and outcome)."""
        return len(self.chat_requests(operation, outcome=outcome))

    @property
    def counts(self) -> Counter[str | None]:
        """Requests received per operation (embeddings requests under their header, or ``"embeddings"``)."""
        return Counter(r.operation for r in self.requests)

    def clear(self) -> None:
        """Forget recorded requests and pending faults (rules stay)."""
        with self._lock:
            self._requests.clear()
            self._faults.clear()

    def _record(self, request: ChatRequest | EmbeddingRequest) -> None:
        with self._lock:
            self._requests.append(request)

    # --- endpoint behaviour ------------------------------------------------------------

    def behave(self, behaviour: str, *, model: str | None = None) -> None:
        """Emulate ``behaviour`` from now on: for every model, or for ``model`` only."""
        if model is None:
            self.behaviour = _checked_behaviour(behaviour)
        else:
            self.behaviours[model] = _checked_behaviour(behaviour)

    def behaviour_for(self, model: str) -> str:
        """How the endpoint serving ``model`` treats ``response_format`` (see the module)."""
        return self.behaviours.get(model, self.behaviour)

    def _refusal(self, request: ChatRequest) -> dict[str, Any] | None:
        """The 400 body with which this endpoint refuses the request's ``response_format``."""
        kind = (request.response_format or {}).get("type")
        if kind is None:
            return None
        behaviour = self.behaviour_for(request.model)
        if behaviour == "no_format":
            return _error_body(400, f"response_format {kind} is not supported by this server")
        if kind not in {"text", "json_object", "json_schema"}:
            return _error_body(
                400,
                f"Invalid value: {kind!r}. Supported values are: 'text', 'json_object' and 'json_schema'.",
                "response_format.type",
            )
        if kind == "json_schema" and behaviour == "json_object":
            return _error_body(
                400,
                f"Invalid parameter: 'response_format' of type 'json_schema' is not supported with model {request.model}.",
                "response_format",
            )
        if kind == "json_schema" and behaviour == "structured":
            problem = json_schema_problem((request.response_format or {}).get("json_schema"))
            return None if problem is None else _error_body(400, problem, "response_format")
        return None

    def _wrapped(self, request: ChatRequest, reply: str | dict[str, Any] | list[Any]) -> str:
        """The reply as this endpoint's model would write it."""
        if isinstance(reply, str):
            return reply
        behaviour = self.behaviour_for(request.model)
        if behaviour == "fenced":
            return f"```json\n{json.dumps(reply, indent=2)}\n```"
        if behaviour == "prose":
            return f"Sure! Here is the JSON you asked for: {json.dumps(reply)} Let me know if you need anything else."
        return json.dumps(reply)

    # --- replies ---------------------------------------------------------------------

    def _handler_for(self, request: ChatRequest) -> Handler:
        with self._lock:
            rules = list(self._rules)
        for rule in rules:
            if rule.matches(request):
                return rule.handler
        return self.default

    def chat_completion(self, request: ChatRequest) -> tuple[int, dict[str, Any], dict[str, str], float]:
        """Status, body, extra headers and delay for one chat request; records it. A
        refused ``response_format`` is answered before any scripted fault is taken: the
        endpoint refuses it before it would generate anything."""
        refusal = self._refusal(request)
        if refusal is not None:
            self._record(replace(request, outcome="http 400"))
            return 400, refusal, {}, 0.0
        fault = self._take_fault(request.operation)
        delay = 0.0
        outcome = "ok"
        if fault is not None and fault.kind == "status":
            self._record(replace(request, outcome=f"http {fault.status}"))
            headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
            return fault.status, _error_body(fault.status, "scripted failure"), headers, 0.0
        if fault is not None and fault.kind == "timeout":
            delay, outcome = fault.seconds, "timeout"
        if fault is not None and fault.kind == "malformed":
            content, outcome = MALFORMED_CONTENT, "malformed"
        else:
            try:
                reply = self._handler_for(request)(request)
            except Exception as error:  # a broken handler is a test bug: make it loud
                traceback.print_exc()
                self._record(replace(request, outcome="handler error"))
                return 500, _error_body(500, f"scripted handler raised {error!r}"), {}, 0.0
            content = self._wrapped(request, reply)
        self._record(replace(request, outcome=outcome))
        prompt_tokens = sum(count_tokens(_content_text(m.get("content"))) for m in request.messages)
        completion_tokens = count_tokens(content)
        body = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        return 200, body, {}, delay

    def embedding_fault(self, request: EmbeddingRequest) -> tuple[int, dict[str, Any]] | None:
        """A scripted HTTP failure for this embeddings request (``fail_next(...,
        operation="embeddings")``), recorded; None when it is to be answered."""
        fault = self._take_fault(request.operation, exact=True)
        if fault is None or fault.kind != "status":
            return None
        self._record(request)
        return fault.status, _error_body(fault.status, "scripted failure")

    def embeddings(self, request: EmbeddingRequest, encoding_format: str | None) -> dict[str, Any]:
        self._record(request)
        data = []
        for index, text in enumerate(request.inputs):
            vector = hashed_embedding(text, self.embedding_dim)
            embedding: Any = vector
            if encoding_format == "base64":
                embedding = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(count_tokens(text) for text in request.inputs)
        return {
            "object": "list",
            "data": data,
            "model": request.model or self.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    kind = "rate_limit_error" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
    error: dict[str, Any] = {"message": message, "type": kind, "code": status}
    if param is not None:
        error["param"] = param
    return {"error": error}


def _checked_behaviour(behaviour: str) -> str:
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"behaviour must be one of {', '.join(BEHAVIOURS)}, not {behaviour!r}")
    return behaviour


def _strict_problem(node: Any, where: str) -> str | None:
    """The first rule of strict structured outputs that ``node`` (a JSON schema) breaks:
    an object must list every property as required and forbid additional ones."""
    if isinstance(node, list):
        return next((p for i, item in enumerate(node) if (p := _strict_problem(item, f"{where}[{i}]"))), None)
    if not isinstance(node, dict):
        return None
    properties = node.get("properties")
    if isinstance(properties, dict):
        if node.get("additionalProperties") is not False:
            return f"In context={where}, 'additionalProperties' is required to be supplied and to be false."
        missing = sorted(set(properties) - set(node.get("required") or []))
        if missing:
            return f"In context={where}, 'required' is required to include every property. Missing {missing[0]!r}."
    children = [
        (f"{where}.{key}.{name}", child) for key in ("properties", "$defs") for name, child in (node.get(key) or {}).items()
    ]
    children += [(f"{where}.{key}", node[key]) for key in ("items", "anyOf", "allOf", "oneOf") if key in node]
    return next((p for path, child in children if (p := _strict_problem(child, path))), None)


def json_schema_problem(spec: Any) -> str | None:
    """What OpenAI would refuse in a ``response_format.json_schema`` (None: it is valid)."""
    if not isinstance(spec, dict):
        return "Missing required parameter: 'response_format.json_schema'."
    name = spec.get("name")
    if not isinstance(name, str) or not _SCHEMA_NAME.match(name):
        return "Invalid 'response_format.json_schema.name': must match ^[a-zA-Z0-9_-]{1,64}$."
    schema = spec.get("schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return f"Invalid schema for response_format '{name}': the root must be an object."
    problem = _strict_problem(schema, "()") if spec.get("strict") else None
    return None if problem is None else f"Invalid schema for response_format '{name}': {problem}"


def _embedding_inputs(raw: Any) -> list[str]:
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
        return list(raw)
    raise ValueError("input must be a string or a list of strings")


def _make_handler(server: ScriptedLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so nothing is served after stop().
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read records instead
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("body must be a JSON object")
            except ValueError as error:
                self._send(400, _error_body(400, f"invalid JSON body: {error}"))
                return
            operation = self.headers.get(OPERATION_HEADER)
            path = self.path.split("?", 1)[0].rstrip("/")
            if path.endswith("/chat/completions"):
                self._chat(body, operation)
            elif path.endswith("/embeddings"):
                self._embeddings(body, operation)
            else:
                self._send(404, _error_body(404, f"unknown path {self.path}"))

        def _chat(self, body: dict[str, Any], operation: str | None) -> None:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                self._send(400, _error_body(400, "messages must be a non-empty list"))
                return
            request = ChatRequest(
                operation=operation,
                model=str(body.get("model", "")),
                messages=messages,
                response_format=body.get("response_format"),
                body=body,
            )
            status, payload, headers, delay = server.chat_completion(request)
            if delay and server._stopping.wait(delay):
                return  # server stopping: drop the held request
            self._send(status, payload, headers)

        def _embeddings(self, body: dict[str, Any], operation: str | None) -> None:
            try:
                inputs = _embedding_inputs(body.get("input"))
            except ValueError as error:
                self._send(400, _error_body(400, str(error)))
                return
            request = EmbeddingRequest(operation or "embeddings", str(body.get("model", "")), inputs, body)
            failure = server.embedding_fault(request)
            if failure is not None:
                self._send(*failure)
                return
            self._send(200, server.embeddings(request, body.get("encoding_format")))

        def _send(self, status: int, payload: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
            data = json.dumps(payload).encode("utf-8")
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout): nothing to answer

    return Handler
