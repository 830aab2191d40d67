"""Reading a JSON object out of a model's reply, and the schema asked for (pure).

Endpoints differ in how they hold a model to JSON. Structured outputs constrain the reply
to the schema, JSON mode to some object; without either, many local models wrap the
object in a fenced block (```json ... ```), a sentence ("Here is the JSON: {...}"), or a
reasoning preamble (``<think>...</think>``). So a reply is read in that order of
likelihood: the whole reply, each fenced block, then each object embedded in the text
whose keys are all the schema's; the first that validates against the step's schema
wins, and only a reply none of these readings can satisfy is malformed (and retried, as
any malformed reply is).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from memory.models.retry import Retryable
from memory.validation import storable

M = TypeVar("M", bound=BaseModel)

# Only as the reply's preamble: the same tags inside the object are its content.
_THINK = re.compile(r"\A\s*<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
# An embedded object is looked for from at most this many "{" of a reply: enough for any
# prose a model wraps an object in, and a bound on the work a hostile reply can cause.
MAX_OBJECT_STARTS = 64
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:  # JSONDecodeError, and the recursion limit of a pathological nesting
        return None
    return value if isinstance(value, dict) else None


def framed_objects(text: str) -> Iterator[dict[str, Any]]:
    """The objects a reply holds as a whole: the reply itself (once a reasoning block is
    dropped), else each fenced block that is one object."""
    text = _THINK.sub("", text).strip()
    whole = _object(text)
    if whole is not None:
        yield whole
        return
    for fence in _FENCE.finditer(text):
        block = _object(fence.group(1).strip())
        if block is not None:
            yield block


def embedded_objects(text: str) -> Iterator[dict[str, Any]]:
    """Each object embedded in surrounding text, outermost first: an object that parses
    is skipped whole, so its members are never offered as objects of their own."""
    text = _THINK.sub("", text)
    decoder = json.JSONDecoder()
    start = text.find("{")
    for _ in range(MAX_OBJECT_STARTS):
        if start < 0:
            return
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        yield value  # decoding from a "{" gives an object or fails
        start = text.find("{", end)


@lru_cache(maxsize=128)
def _fields(schema: type[BaseModel]) -> frozenset[str]:
    return frozenset(schema.model_json_schema().get("properties", {}))


def _fits(candidate: dict[str, Any], schema: type[BaseModel]) -> bool:
    """An embedded object is taken only if every key is one of the schema's fields: a
    reply cut short leaves its inner objects whole (an entity inside an extraction), and
    one of them must not pass for the reply because the schema's fields have defaults."""
    return bool(candidate) and set(candidate) <= _fields(schema)


def _schema_errors(error: PydanticValidationError, schema: type[BaseModel]) -> str:
    problems = "; ".join(
        f"{'.'.join(str(part) for part in issue['loc']) or '<root>'}: {issue['msg']}" for issue in error.errors()[:5]
    )
    return f"schema errors ({schema.__name__}): {problems}"


def parse_reply(content: str | None, schema: type[M]) -> M:
    """The first object of the reply that validates as ``schema``; raise ``Retryable``
    naming what is wrong (never quoting the reply: it may hold a message's text)."""
    if not content or not content.strip():
        raise Retryable("malformed JSON: empty reply")
    first_error: str | None = None
    embedded = (found for found in embedded_objects(content) if _fits(found, schema))
    for candidate in itertools.chain(framed_objects(content), embedded):
        try:
            return schema.model_validate(storable(candidate))
        except PydanticValidationError as error:
            first_error = first_error or _schema_errors(error, schema)
    raise Retryable(first_error or "malformed JSON: no JSON object in the reply")


@lru_cache(maxsize=128)
def schema_instruction(schema: type[BaseModel]) -> str:
    """The JSON schema of ``schema``, compact, as text for the system prompt.

    JSON mode alone only promises *some* JSON object, and an endpoint without either mode
    nothing at all; spelling out the schema lets any OpenAI-compatible model produce the
    shape we validate against (and a constrained one read what each field means).
    """
    compact = json.dumps(schema.model_json_schema(), separators=(",", ":"), ensure_ascii=False)
    return f"Reply with one JSON object that matches this JSON schema:\n{compact}"


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    strict = {key: value for key, value in node.items() if key != "default"}
    for key in ("properties", "$defs"):
        if key in strict:
            strict[key] = {name: _strict(child) for name, child in strict[key].items()}
    for key in ("items", "anyOf", "allOf", "oneOf", "prefixItems"):
        if key in strict:
            strict[key] = _strict(strict[key])
    if "properties" in strict:
        strict["required"] = list(strict["properties"])
        strict["additionalProperties"] = False
    return strict


@lru_cache(maxsize=128)
def strict_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """``schema``'s JSON schema as strict structured outputs require it: every object
    closed (``additionalProperties: false``) and every property required (an optional
    field stays nullable, so the model writes ``null`` where it has nothing), defaults
    dropped (the model writes every field, so there is nothing to default)."""
    return dict(_strict(schema.model_json_schema()))


def json_schema_format(schema: type[BaseModel]) -> dict[str, Any]:
    """The ``response_format`` that asks for ``schema`` through structured outputs."""
    name = _SCHEMA_NAME.sub("_", schema.__name__)[:64] or "reply"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": strict_schema(schema), "strict": True}}
