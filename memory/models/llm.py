"""The LLM client: chat completions over any OpenAI-compatible endpoint.

Callers get a parsed value and the usage to put in the ledger. Transient failures
(timeouts, connection errors, 429, 5xx) and replies that are not the JSON we asked for
are retried with exponential backoff; after the last try an ``LLMError`` names the
operation and the cause. Other 4xx are not retried: sending the same request again
cannot fix them. The client never touches the database: the caller records
``result.usage`` inside its own transaction, so the ledger and the work commit together.

Endpoints differ in the ``response_format`` they take. A JSON step asks first for
structured outputs (``json_schema``, the step's schema, strict); an endpoint that refuses
it with a 400 naming the response format is asked again at once with ``json_object``,
then with none, and the client remembers the mode that works: one refusal costs one extra
call per client (one per process; requests already in flight then pay it once each), not
one per request, and is logged once as a warning.
The schema also travels in the system prompt, so a model held to no format still knows
the shape, and its reply is read out of fences or prose (``memory.models.json_reply``).
``response_format`` other than ``auto`` fixes the mode: nothing is tried, nothing falls back.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Literal, TypeVar, cast, get_args

from pydantic import BaseModel

from memory.errors import LLMError
from memory.models.json_reply import json_schema_format, parse_reply, schema_instruction
from memory.models.retry import Fatal, Retryable, RetryPolicy, openai_call
from memory.models.tokens import count_tokens
from memory.store.ledger import Usage
from memory.validation import storable

T = TypeVar("T")

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)

OPERATION_HEADER = "X-Stashbird-Operation"

ResponseFormat = Literal["auto", "json_schema", "json_object", "none"]
FormatMode = Literal["json_schema", "json_object", "none"]
RESPONSE_FORMATS: tuple[str, ...] = get_args(ResponseFormat)
# What a JSON step falls back to when the endpoint refuses a mode.
FALLBACK: dict[FormatMode, FormatMode] = {"json_schema": "json_object", "json_object": "none"}
# A 400 refuses the response format (not the request) when its ``param`` or its message
# names it: OpenAI sets param "response_format"; servers that do not follow its error
# shape only say so in the message (a schema, JSON mode, guided decoding, a grammar).
_NAMES_FORMAT = re.compile(
    r"response[_ ]?format|json[_ ]?schema|json[_ ]?object|structured[_ ]output|guided[_ ]json|grammar", re.IGNORECASE
)


def refuses_response_format(failure: Fatal) -> bool:
    """Whether a 4xx refused the ``response_format`` we sent, rather than the request."""
    if failure.status not in (400, 422):
        return False
    return (failure.param or "").startswith("response_format") or bool(_NAMES_FORMAT.search(str(failure)))


def format_for(mode: FormatMode, schema: type[BaseModel]) -> dict[str, Any] | None:
    """The ``response_format`` a JSON step sends in ``mode`` (None: the field is left out)."""
    if mode == "json_schema":
        return json_schema_format(schema)
    if mode == "json_object":
        return {"type": "json_object"}
    return None


@dataclass(frozen=True)
class LLMResult(Generic[T]):
    value: T
    usage: Usage


@dataclass
class _Reply:
    content: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int


@dataclass
class _Spent:
    """What one step's calls cost so far: requests refused for their format count as calls."""

    refused: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, reply: _Reply) -> None:
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens


class LLMClient:
    """Chat completions with JSON validation, bounded retries and token accounting, in
    the ``response_format`` mode the endpoint takes (``format_mode``, learnt once)."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        model: str,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        response_format: ResponseFormat = "auto",
    ) -> None:
        import openai  # imported when an LLM is configured: most commands never call one

        if response_format not in RESPONSE_FORMATS:
            raise ValueError(f"response_format must be one of {', '.join(RESPONSE_FORMATS)}, not {response_format!r}")
        self.model = model
        self.timeout = timeout
        self.retry = RetryPolicy(max_retries, backoff)
        self.fixed_format = response_format != "auto"
        self.format_mode: FormatMode = "json_schema" if response_format == "auto" else response_format
        # The openai package's own retries are off: ours (memory.models.retry) count
        # attempts for the ledger, also retry malformed replies, and end in one clear error.
        self._client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)

    async def complete_json(
        self,
        *,
        system: str,
        user: str,
        schema: type[M],
        phase: str,
        operation: str,
        max_tokens: int | None = None,
    ) -> LLMResult[M]:
        """Ask for a JSON object and return it validated as ``schema``."""
        messages = [
            {"role": "system", "content": f"{system}\n\n{schema_instruction(schema)}"},
            {"role": "user", "content": user},
        ]

        def parse(reply: _Reply) -> M:
            try:
                return parse_reply(reply.content, schema)
            except Retryable as failure:
                if reply.finish_reason == "length":
                    raise Retryable(f"{failure.cause} (reply cut off at max_tokens)") from None
                raise

        return await self._complete(messages, parse, phase=phase, operation=operation, max_tokens=max_tokens, schema=schema)

    async def complete_text(
        self,
        *,
        system: str,
        user: str,
        phase: str,
        operation: str,
        max_tokens: int | None = None,
    ) -> LLMResult[str]:
        """Ask for free text (e.g. an answer or a summary)."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return await self._complete(messages, _text_value, phase=phase, operation=operation, max_tokens=max_tokens, schema=None)

    async def close(self) -> None:
        await self._client.close()

    async def _complete(
        self,
        messages: list[dict[str, str]],
        parse: Callable[[_Reply], T],
        *,
        phase: str,
        operation: str,
        max_tokens: int | None,
        schema: type[BaseModel] | None,
    ) -> LLMResult[T]:
        spent = _Spent()

        def usage(attempts: int) -> Usage:
            calls = attempts + spent.refused
            return Usage(phase, operation, self.model, calls, spent.prompt_tokens, spent.completion_tokens)

        async def attempt(n: int) -> LLMResult[T]:
            reply = await self._send(messages, operation=operation, max_tokens=max_tokens, schema=schema, spent=spent)
            spent.add(reply)
            return LLMResult(parse(reply), usage(n))

        def failed(attempts: int, cause: str, retried: bool) -> LLMError:
            how = f"after {attempts} attempt{'s' if attempts > 1 else ''}" if retried else "(not retried)"
            return LLMError(
                f"LLM {operation} failed {how}: {cause}", operation=operation, attempts=attempts, usage=usage(attempts)
            )

        began = time.perf_counter()
        result = await self.retry.run(attempt, failed, operation=operation)
        log.info(
            "LLM %s: %d call(s), %d prompt + %d completion tokens",
            operation,
            result.usage.calls,
            spent.prompt_tokens,
            spent.completion_tokens,
            extra={
                "operation": operation,
                "phase": phase,
                "calls": result.usage.calls,
                "elapsed_ms": round((time.perf_counter() - began) * 1000, 1),
            },
        )
        return result

    async def _send(
        self,
        messages: list[dict[str, str]],
        *,
        operation: str,
        max_tokens: int | None,
        schema: type[BaseModel] | None,
        spent: _Spent,
    ) -> _Reply:
        """One request in the current format mode; when the endpoint refuses that mode,
        the next one is remembered and the request sent again at once (a refusal is not
        a failed attempt: it costs a call, not a retry)."""
        while True:  # at most three requests: each refusal moves format_mode down, and it never moves up
            mode: FormatMode = self.format_mode if schema is not None else "none"
            sent = None if schema is None else format_for(mode, schema)
            try:
                return await self._request(messages, operation=operation, max_tokens=max_tokens, response_format=sent)
            except Fatal as failure:
                if schema is None or not self._fall_back(mode, failure, operation):
                    raise
                spent.refused += 1

    def _fall_back(self, mode: FormatMode, failure: Fatal, operation: str) -> bool:
        """Whether to send again after ``failure``; moves ``format_mode`` past ``mode``
        unless a concurrent request already did."""
        if self.fixed_format or mode == "none" or not refuses_response_format(failure):
            return False
        if self.format_mode == mode:
            self.format_mode = FALLBACK[mode]
            log.warning(
                "LLM endpoint refused response_format %s (%s); using %s from now on",
                mode,
                failure,
                self.format_mode,
                extra={"operation": operation, "model": self.model},
            )
        return True

    async def _request(
        self,
        messages: list[dict[str, str]],
        *,
        operation: str,
        max_tokens: int | None,
        response_format: dict[str, Any] | None,
    ) -> _Reply:
        options: dict[str, Any] = {}
        if response_format is not None:
            options["response_format"] = response_format
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        response = await openai_call(
            self._client.chat.completions.create(
                model=self.model,
                messages=cast(Any, messages),  # plain role/content dicts; openai's TypedDicts are a union
                extra_headers={OPERATION_HEADER: operation},
                **options,
            ),
            self.timeout,
        )
        if not response.choices:
            raise Retryable("malformed response: no choices")
        choice = response.choices[0]
        content = choice.message.content
        usage = response.usage
        if usage is not None and usage.prompt_tokens is not None:
            prompt, completion = usage.prompt_tokens, usage.completion_tokens or 0
        else:
            prompt = sum(count_tokens(message["content"]) for message in messages)
            completion = count_tokens(content or "")
        return _Reply(content, choice.finish_reason, prompt, completion)


def _text_value(reply: _Reply) -> str:
    if reply.content is None:
        raise Retryable("empty reply")
    return str(storable(reply.content))
