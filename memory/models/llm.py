"""The LLM client: chat completions over any OpenAI-compatible endpoint.

Callers get a parsed value and the usage to put in the ledger. Transient failures
(timeouts, connection errors, 429, 5xx) and replies that are not the JSON we asked for
are retried with exponential backoff; after the last try an ``LLMError`` names the
operation and the cause. Other 4xx are not retried: sending the same request again
cannot fix them. The client never touches the database: the caller records
``result.usage`` inside its own transaction, so the ledger and the work commit together.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Generic, TypeVar, cast

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from memory.errors import LLMError
from memory.models.retry import Retryable, RetryPolicy, openai_call
from memory.models.tokens import count_tokens
from memory.store.ledger import Usage
from memory.validation import storable

T = TypeVar("T")

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)

OPERATION_HEADER = "X-Stashbird-Operation"


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


@lru_cache(maxsize=128)
def schema_instruction(schema: type[BaseModel]) -> str:
    """The JSON schema of ``schema``, compact, as text for the system prompt.

    JSON mode alone only promises *some* JSON object; spelling out the schema lets any
    OpenAI-compatible model produce the shape we validate against.
    """
    compact = json.dumps(schema.model_json_schema(), separators=(",", ":"), ensure_ascii=False)
    return f"Reply with one JSON object that matches this JSON schema:\n{compact}"


def parse_reply(content: str | None, schema: type[M]) -> M:
    """Validate a JSON-mode reply; raise ``Retryable`` naming what is wrong."""
    if not content or not content.strip():
        raise Retryable("malformed JSON: empty reply")
    try:
        data = storable(json.loads(content))
    except json.JSONDecodeError as error:
        raise Retryable(f"malformed JSON: {error}") from None
    try:
        return schema.model_validate(data)
    except PydanticValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in issue['loc']) or '<root>'}: {issue['msg']}" for issue in error.errors()[:5]
        )
        raise Retryable(f"schema errors ({schema.__name__}): {problems}") from None


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
        import openai  # imported when an LLM is configured: most commands never call one

        self.model = model
        self.timeout = timeout
        self.retry = RetryPolicy(max_retries, backoff)
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

        return await self._complete(
            messages,
            parse,
            phase=phase,
            operation=operation,
            max_tokens=max_tokens,
            json_mode=True,
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
            messages,
            _text_value,
            phase=phase,
            operation=operation,
            max_tokens=max_tokens,
            json_mode=False,
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
            return Usage(
                phase, operation, self.model, calls=attempts, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
            )

        async def attempt(n: int) -> LLMResult[T]:
            nonlocal prompt_tokens, completion_tokens
            reply = await self._request(messages, operation=operation, max_tokens=max_tokens, json_mode=json_mode)
            prompt_tokens += reply.prompt_tokens
            completion_tokens += reply.completion_tokens
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
            prompt_tokens,
            completion_tokens,
            extra={
                "operation": operation,
                "phase": phase,
                "calls": result.usage.calls,
                "elapsed_ms": round((time.perf_counter() - began) * 1000, 1),
            },
        )
        return result

    async def _request(
        self,
        messages: list[dict[str, str]],
        *,
        operation: str,
        max_tokens: int | None,
        json_mode: bool,
    ) -> _Reply:
        options: dict[str, Any] = {}
        if json_mode:
            options["response_format"] = {"type": "json_object"}
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
