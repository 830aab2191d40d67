"""One retry policy for every call to a model endpoint (chat completions, embeddings).

An attempt that fails in a way another may fix (a timeout, a dropped connection, HTTP
429 or 5xx, a malformed reply) is retried after an exponential backoff with jitter, or
after the server's ``Retry-After`` when that is sooner than ``MAX_RETRY_AFTER``; a 4xx
other than 429 is not retried. The openai package's own retries are off wherever this
policy is used: ours count attempts for the ledger and end in one clear error.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

# A Retry-After longer than this is not worth blocking a worker on: back off normally instead.
MAX_RETRY_AFTER = 30.0
MAX_BACKOFF = 30.0


class Retryable(Exception):
    """One attempt failed in a way another attempt may fix."""

    def __init__(self, cause: str, retry_after: float | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.retry_after = retry_after


class Fatal(Exception):
    """One attempt failed in a way retrying cannot fix (a 4xx other than 429); ``status``
    and the error's ``param`` let a caller tell what was refused."""

    def __init__(self, cause: str, status: int | None = None, param: str | None = None) -> None:
        super().__init__(cause)
        self.status = status
        self.param = param


def retry_after(response: Any) -> float | None:
    """The server's ``Retry-After`` (or ``retry-after-ms``) in seconds, if it sent one."""
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


def _error_param(error: Any) -> str | None:
    """The ``param`` an OpenAI-style error body names (e.g. ``response_format``), if any."""
    body = error.body
    detail = body.get("error", body) if isinstance(body, dict) else None
    param = detail.get("param") if isinstance(detail, dict) else None
    return param if isinstance(param, str) else None


def _status_message(error: Any) -> str:
    body = error.body
    if isinstance(body, dict):
        detail = body.get("error", body)
        message = detail.get("message") if isinstance(detail, dict) else detail
        if message:
            return f"HTTP {error.status_code}: {message}"
    return f"HTTP {error.status_code}"


async def openai_call(call: Awaitable[T], timeout: float) -> T:
    """Await one openai request, its failures told apart as ``Retryable`` or ``Fatal``."""
    import openai  # imported when a model endpoint is called: most commands never call one

    try:
        return await call
    except openai.APITimeoutError:
        raise Retryable(f"timeout after {timeout:g}s") from None
    except openai.APIConnectionError as error:
        raise Retryable(f"connection error: {error.__cause__ or error}") from None
    except openai.APIStatusError as error:
        message = _status_message(error)
        if error.status_code == 429 or error.status_code >= 500:
            raise Retryable(message, retry_after(error.response)) from None
        raise Fatal(message, error.status_code, _error_param(error)) from None
    except openai.APIResponseValidationError as error:
        raise Retryable(f"malformed response: {error}") from None


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff: float = 0.5

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")

    def delay(self, attempt: int, retry_after: float | None) -> float:
        delay = min(self.backoff * 2.0 ** (attempt - 1), MAX_BACKOFF)
        delay *= 1 + random.uniform(0, 0.25)  # jitter: workers that failed together do not retry together
        if retry_after is not None and 0 < retry_after <= MAX_RETRY_AFTER:
            delay = max(delay, retry_after)
        return delay

    async def run(
        self,
        attempt: Callable[[int], Awaitable[T]],
        failed: Callable[[int, str, bool], Exception],
        *,
        operation: str,
    ) -> T:
        """``attempt(n)`` until it returns, at most ``max_retries + 1`` times; when it
        fails for good, raise ``failed(attempts, cause, retried)``."""
        attempts = self.max_retries + 1
        for n in range(1, attempts + 1):
            began = time.perf_counter()
            try:
                return await attempt(n)
            except Fatal as failure:
                log.warning("%s failed, not retried", operation, extra={"operation": operation, "attempt": n})
                raise failed(n, str(failure), False) from None
            except Retryable as failure:
                elapsed_ms = round((time.perf_counter() - began) * 1000, 1)
                if n == attempts:
                    log.warning(
                        "%s failed after %d attempts: %s",
                        operation,
                        n,
                        failure.cause,
                        extra={"operation": operation, "attempt": n, "elapsed_ms": elapsed_ms},
                    )
                    raise failed(n, failure.cause, True) from None
                pause = self.delay(n, failure.retry_after)
                log.info(
                    "%s attempt %d failed (%s); retrying in %.1f s",
                    operation,
                    n,
                    failure.cause,
                    pause,
                    extra={"operation": operation, "attempt": n, "elapsed_ms": elapsed_ms, "retry_in_s": round(pause, 2)},
                )
                await asyncio.sleep(pause)
        raise AssertionError("unreachable: the last attempt returns or raises")
