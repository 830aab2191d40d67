"""Reading an object out of a model's reply (pure): whole, fenced, in prose, after a
reasoning block; what counts as a refused response_format; the strict schema sent for
structured outputs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from memory.consolidation.extraction.llm import ExtractionOut
from memory.models.json_reply import (
    MAX_OBJECT_STARTS,
    embedded_objects,
    framed_objects,
    json_schema_format,
    parse_reply,
    strict_schema,
)
from memory.models.llm import format_for, refuses_response_format
from memory.models.retry import Fatal, Retryable
from memory.retrieval.llm_steps import RerankScores, SubQueries
from memory.validation import storable


class Answer(BaseModel):
    answer: str
    citations: list[str] = Field(default_factory=list)


# JSON values as json.loads gives them back (no NaN: it is not equal to itself).
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
values = st.recursive(
    scalars, lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4), max_leaves=12
)
objects = st.dictionaries(st.text(), values, max_size=5)
# Prose a model writes around an object: anything but an opening brace, a backtick or a tag.
prose = st.text(alphabet=st.characters(blacklist_characters="{`<"), max_size=80)


@given(objects, prose, prose)
def test_an_object_in_prose_is_found_first(obj: dict[str, Any], before: str, after: str) -> None:
    text = f"{before}{json.dumps(obj)}{after}"
    found = next(framed_objects(text), None) or next(embedded_objects(text))
    assert found == obj


@given(objects, prose, prose, st.sampled_from(["json", "JSON", "", "javascript"]))
def test_a_fenced_object_is_found(obj: dict[str, Any], before: str, after: str, language: str) -> None:
    text = f"{before}\n```{language}\n{json.dumps(obj, indent=2)}\n```\n{after}"
    assert next(framed_objects(text)) == obj


def test_think_tags_inside_the_object_are_kept() -> None:
    obj = {"<THINK></THINK>": None, "a": "<think>x</think>"}
    assert next(framed_objects(f"```json\n{json.dumps(obj)}\n```")) == obj
    assert next(embedded_objects(f"Here: {json.dumps(obj)}")) == obj


@given(objects)
def test_a_reasoning_block_is_skipped(obj: dict[str, Any]) -> None:
    text = '<think>The user wants {"queries": []}... no, they want the object.</think>\n' + json.dumps(obj)
    assert next(framed_objects(text)) == obj


@given(st.text(max_size=300))
def test_any_text_gives_objects_or_nothing_and_never_raises(text: str) -> None:
    assert all(isinstance(found, dict) for found in [*framed_objects(text), *embedded_objects(text)])
    try:
        parse_reply(text, Answer)
    except Retryable as refused:
        assert refused.cause.startswith(("malformed JSON", "schema errors"))


@given(st.lists(st.text(), max_size=4), st.text(), st.text(alphabet=st.characters(blacklist_characters="{"), max_size=40))
def test_parse_reply_reads_every_wrapping_of_a_valid_reply(queries: list[str], answer: str, noise: str) -> None:
    reply = {"answer": answer, "citations": queries}
    expected = Answer.model_validate(storable(reply))  # NULs dropped, as from any reply
    for text in (
        json.dumps(reply),
        f"```json\n{json.dumps(reply, indent=2)}\n```",
        f"Sure! Here is the JSON you asked for: {json.dumps(reply)} {noise}",
        f"<think>{noise}</think>{json.dumps(reply)}",
    ):
        assert parse_reply(text, Answer) == expected


def test_an_inner_object_of_a_cut_reply_does_not_pass_for_the_reply() -> None:
    # Every field of ExtractionOut has a default: the entity inside must not be read as
    # an (empty) extraction when the reply was cut off.
    cut = 'Here you go: {"summary": "Ann moved", "entities": [{"name": "Ann", "type": "person"}, {"name": "Bo'
    with pytest.raises(Retryable, match="malformed JSON: no JSON object"):
        parse_reply(cut, ExtractionOut)
    # The same object whole is read, with the prose and a second example object around it.
    whole = 'Example: {"x": 1}. Reply: {"summary": "Ann moved", "entities": [{"name": "Ann"}]} Done.'
    assert parse_reply(whole, ExtractionOut).entities[0].name == "Ann"


def test_the_first_object_that_validates_wins_and_errors_name_the_first() -> None:
    two = '```json\n{"answer": 3}\n```\nor rather\n```json\n{"answer": "Berlin"}\n```'
    assert parse_reply(two, Answer).answer == "Berlin"
    with pytest.raises(Retryable, match=r"schema errors \(Answer\): answer: Input should be a valid string"):
        parse_reply('```\n{"answer": 3}\n```', Answer)
    with pytest.raises(Retryable, match="empty reply"):
        parse_reply("  \n", Answer)
    with pytest.raises(Retryable, match="no JSON object in the reply") as refused:
        parse_reply("I moved to the Berlin office last week.", Answer)
    assert "Berlin" not in refused.value.cause  # a reply may hold a message's text: never quoted


def test_a_hostile_reply_is_scanned_a_bounded_number_of_times() -> None:
    hostile = "{" * 100_000 + json.dumps({"answer": "late"})
    assert list(embedded_objects(hostile)) == []  # gives up after MAX_OBJECT_STARTS opening braces
    near = "{ " * (MAX_OBJECT_STARTS - 1) + json.dumps({"answer": "found"})
    assert parse_reply(near, Answer).answer == "found"


def _objects_of(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, list):
        return [found for item in node for found in _objects_of(item)]
    if not isinstance(node, dict):
        return []
    own = [node] if "properties" in node else []
    return own + [found for value in node.values() for found in _objects_of(value)]


@pytest.mark.parametrize("schema", [ExtractionOut, SubQueries, RerankScores, Answer])
def test_the_strict_schema_closes_every_object_and_requires_every_property(schema: type[BaseModel]) -> None:
    strict = strict_schema(schema)
    nested = _objects_of(strict)
    assert nested and all(o["additionalProperties"] is False and o["required"] == list(o["properties"]) for o in nested)
    assert "default" not in json.dumps(strict).replace('"default_', "")  # no default keyword anywhere
    spec = json_schema_format(schema)
    assert spec["type"] == "json_schema" and spec["json_schema"]["strict"] is True
    assert spec["json_schema"]["name"] == schema.__name__ and spec["json_schema"]["schema"] == strict


def test_a_field_named_default_is_kept() -> None:
    class Odd(BaseModel):
        default: str = "x"

    assert strict_schema(Odd)["required"] == ["default"] and "default" not in strict_schema(Odd)["properties"]["default"]


def test_each_mode_sends_its_response_format() -> None:
    assert format_for("json_schema", Answer) == json_schema_format(Answer)
    assert format_for("json_object", Answer) == {"type": "json_object"}
    assert format_for("none", Answer) is None


@pytest.mark.parametrize(
    ("failure", "refused"),
    [
        (
            Fatal(
                "HTTP 400: Invalid parameter: 'response_format' of type 'json_schema' is not supported", 400, "response_format"
            ),
            True,
        ),
        (Fatal("HTTP 400: something the server did not like", 400, "response_format.json_schema.name"), True),
        (Fatal("HTTP 400: response_format type json_object is not supported by this server", 400), True),
        (Fatal("HTTP 422: Structured output is unavailable for this model", 422), True),
        (Fatal("HTTP 400: Failed to parse grammar", 400), True),
        (Fatal("HTTP 400: This model's maximum context length is 8192 tokens", 400, "messages"), False),
        (Fatal("HTTP 401: Incorrect API key provided for response_format requests", 401), False),
        (Fatal("HTTP 404: The model `gpt-5` does not exist", 404, "model"), False),
        (Fatal("HTTP 400", 400), False),
    ],
)
def test_a_refused_response_format_is_told_from_other_bad_requests(failure: Fatal, refused: bool) -> None:
    assert refuses_response_format(failure) is refused
