"""The LLM client: chat completions over any OpenAI-compatible endpoint.

Callers get a parsed value and the usage to put in the ledger. Transient failures
(timeouts, connection errors, 429, 5xx) and replies that are not the JSON we asked for
are retried with exponential backoff; after the last try an ``LLMError`` names the
operation and the cause. Other 4xx are not retried: sending the same request again
cannot fix them. The client never touches the database: the caller records
``result.usage`` inside its own transaction, so the ledger and the work commit together.
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Generic, TypeVar

import openai
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from memory.errors import StashbirdError
from memory.models.tokens import count_tokens
from memory.store.ledger import Usage
from memory.validation import storable

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

OPERATION_HEADER = "X-Stashbird-Operation"
# A Retry-After longer than this is not worth blocking a worker on: back off normally instead.
MAX_RETRY_AFTER = 30.0
MAX_BACKOFF = 30.0


class LLMError(StashbirdError):
    """The LLM call failed after its last try (or on a reply that retrying cannot fix).

    ``usage`` holds what the failed attempts cost, so a caller may still record it.
    """

    def __init__(
        self, message: str, *, operation: str | None = None, attempts: int = 0, usage: Usage | None = None
    ) -> None:
        super().__init__(message)
        self.operation = operation
        self.attempts = attempts
        self.usage = usage


@dataclass(frozen=True)
class LLMResult(Generic[T]):
    value: T
    usage: Usage


class _Retryable(Exception):
    """One attempt failed in a way another attempt may fix."""

    def __init__(self, cause: str, retry_after: float | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.retry_after = retry_after


class _Fatal(Exception):
    """One attempt failed in a way retrying cannot fix (a 4xx other than 429)."""


@dataclass
class _Reply:
    content: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int


@lru_cache(maxsize=128)
def schema_instruction(schema: type[BaseModel]) -> str:
    """The JSON schema of ``schema``, compact, as text for the system prompt.

    JSON mode alone only promises *some* JSON object; spelling out the schema lets any
    OpenAI-compatible model produce the shape we validate against.
    """
    compact = json.dumps(schema.model_json_schema(), separators=(",", ":"), ensure_ascii=False)
    return f"Reply with one JSON object that matches this JSON schema:\n{compact}"


def parse_reply(content: str | None, schema: type[M]) -> M:
    """Validate a JSON-mode reply; raise ``_Retryable`` naming what is wrong."""
    if not content or not content.strip():
        raise _Retryable("malformed JSON: empty reply")
    try:
        data = storable(json.loads(content))
    except json.JSONDecodeError as error:
        raise _Retryable(f"malformed JSON: {error}") from None
    try:
        return schema.model_validate(data)
    except PydanticValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in issue['loc']) or '<root>'}: {issue['msg']}"
            for issue in error.errors()[:5]
        )
        raise _Retryable(f"schema errors ({schema.__name__}): {problems}") from None


def _retry_after(response: Any) -> float | None:
    headers = getattr(response, "headers", None) or {}
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            return None
    return None


def _status_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        detail = body.get("error", body)
        message = detail.get("message") if isinstance(detail, dict) else detail
        if message:
            return f"HTTP {error.status_code}: {message}"
    return f"HTTP {error.status_code}"


class LLMClient:
    """Chat completions with JSON-mode validation, bounded retries and token accounting."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        model: str,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        # The openai package's own retries are off: ours count attempts for the ledger,
        # also retry malformed replies, and end in one clear error.
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
            except _Retryable as failure:
                if reply.finish_reason == "length":
                    raise _Retryable(f"{failure.cause} (reply cut off at max_tokens)") from None
                raise

        return await self._complete(
            messages, parse,
            phase=phase, operation=operation, max_tokens=max_tokens, json_mode=True,
        )

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
        return await self._complete(
            messages, _text_value, phase=phase, operation=operation, max_tokens=max_tokens, json_mode=False,
        )

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
        json_mode: bool,
    ) -> LLMResult[T]:
        prompt_tokens = completion_tokens = 0

        def usage(attempts: int) -> Usage:
            return Usage(phase, operation, self.model, attempts, prompt_tokens, completion_tokens)

        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                reply = await self._request(messages, operation=operation, max_tokens=max_tokens, json_mode=json_mode)
                prompt_tokens += reply.prompt_tokens
                completion_tokens += reply.completion_tokens
                return LLMResult(parse(reply), usage(attempt))
            except _Fatal as failure:
                raise LLMError(
                    f"LLM {operation} failed (not retried): {failure}",
                    operation=operation, attempts=attempt, usage=usage(attempt),
                ) from None
            except _Retryable as failure:
                if attempt == attempts:
                    raise LLMError(
                        f"LLM {operation} failed after {attempt} attempt{'s' if attempt > 1 else ''}: {failure.cause}",
                        operation=operation, attempts=attempt, usage=usage(attempt),
                    ) from None
                await asyncio.sleep(self._delay(attempt, failure.retry_after))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        delay = min(self.backoff * 2 ** (attempt - 1), MAX_BACKOFF)
        delay *= 1 + random.uniform(0, 0.25)  # jitter: workers that failed together do not retry together
        if retry_after is not None and 0 < retry_after <= MAX_RETRY_AFTER:
            delay = max(delay, retry_after)
        return delay

    async def _request(
        self, messages: list[dict[str, str]], *, operation: str, max_tokens: int | None, json_mode: bool,
    ) -> _Reply:
        options: dict[str, Any] = {}
        if json_mode:
            options["response_format"] = {"type": "json_object"}
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        try:
            response = await self._client.chat.completions.create(
                model=self.model,
                messages=messages,
                extra_headers={OPERATION_HEADER: operation},
                **options,
            )
        except openai.APITimeoutError:
            raise _Retryable(f"timeout after {self.timeout:g}s") from None
        except openai.APIConnectionError as error:
            raise _Retryable(f"connection error: {error.__cause__ or error}") from None
        except openai.APIStatusError as error:
            message = _status_message(error)
            if error.status_code == 429 or error.status_code >= 500:
                raise _Retryable(message, _retry_after(error.response)) from None
            raise _Fatal(message) from None
        except openai.APIResponseValidationError as error:
            raise _Retryable(f"malformed response: {error}") from None
        if not response.choices:
            raise _Retryable("malformed response: no choices")
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
        raise _Retryable("empty reply")
    return str(storable(reply.content))
