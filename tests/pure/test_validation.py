"""Value checks before the database: identifiers, text, message times (pure)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memory import ConversationRef, Message, Principal, ValidationError, Workspace, normalize_id, parse_time, validate_message
from memory.limits import MAX_ID_CHARS, MAX_TEXT_CHARS
from memory.validation import check_text

GOOD = {"id": "m1", "author": "ann", "text": "hello", "ts": "2026-01-01T10:00:00Z"}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (1_700_000_000_000, "milliseconds"),  # issue case 2: milliseconds by mistake
        (1e20, "outside the years"),
        (float("inf"), "not a finite number"),
        (float("nan"), "not a finite number"),
        ("inf", "cannot parse"),
        ("Infinity", "cannot parse"),
        ("nan", "cannot parse"),
        ("1e400", "not a finite number"),
        (10**400, "outside the years"),
        ("0001-01-01T00:00:00+01:00", "outside the years 1 to 9999 in UTC"),
        (True, "not a time"),
        ("9" * 65, "characters long"),
    ],
)
def test_times_out_of_range_or_not_finite_are_refused_with_a_reason(value: object, reason: str) -> None:
    with pytest.raises(ValidationError) as error:
        parse_time(value)
    assert error.value.field == "ts" and reason in error.value.message


def test_times_are_given_in_utc() -> None:
    assert parse_time("2026-01-01T12:00:00+02:00") == datetime(2026, 1, 1, 10, tzinfo=timezone.utc)
    assert parse_time("2026-01-01T12:00:00+02:00").tzinfo is timezone.utc
    assert parse_time(1_700_000_000) == parse_time("1700000000") == datetime.fromtimestamp(1_700_000_000, timezone.utc)
    assert parse_time("9999-12-31T23:59:59Z").year == 9999


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("text", "a\x00b", "NUL"),
        ("author", "a\x00b", "NUL"),
        ("id", "m\x00", "NUL"),
        ("text", "a\ud800b", "lone surrogate"),
        ("author", "\udc80", "lone surrogate"),
        ("text", "x" * (MAX_TEXT_CHARS + 1), "the limit is 40,000"),
        ("id", "x" * (MAX_ID_CHARS + 1), "the limit is 200"),
        ("id", True, "got true/false"),
        ("id", 1.5, "got float"),
        ("reply_to", {"id": "m0"}, "got an object"),
        ("thread_id", ["t"], "got a list"),
        ("id", "m\x07", "control character"),
    ],
)
def test_values_the_database_cannot_hold_are_refused_naming_the_field(field: str, value: object, reason: str) -> None:
    with pytest.raises(ValidationError) as error:
        validate_message({**GOOD, field: value})
    assert error.value.field == field and reason in error.value.message


def test_one_identifier_rule_strips_surrounding_blanks_everywhere() -> None:
    message = validate_message({**GOOD, "id": " spaced ", "author": "\tann ", "reply_to": " m0", "thread_id": 42})
    assert (message.platform_message_id, message.speaker_id, message.reply_to, message.thread_id) == ("spaced", "ann", "m0", "42")
    assert normalize_id("  spaced\n") == "spaced"
    assert ConversationRef.parse(" team ") == ConversationRef("local", "", "team")
    assert ConversationRef.parse("slack: T1 :C1 ") == ConversationRef("slack", "T1", "C1")
    assert Principal.operator(" cli ").id == "cli"


def test_a_message_built_directly_is_held_to_the_same_rules() -> None:
    at = datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2)))
    message = Message(" m1 ", "U1", "Ann", "hi", at)
    assert message.platform_message_id == "m1" and message.message_time.tzinfo is timezone.utc
    with pytest.raises(ValidationError, match="NUL"):
        Message("m1", "U1", "Ann", "a\x00", at)
    with pytest.raises(ValidationError, match="conversation"):
        ConversationRef("slack", "T1", "C\x00")


def test_blank_text_is_refused() -> None:
    with pytest.raises(ValidationError, match="missing or empty"):
        check_text(" \n", "question")


def test_model_replies_are_cleaned_and_supplied_extractions_checked(tmp_path: Path) -> None:
    from memory.consolidation.extraction.replay import ReplayExtractor
    from memory.models.json_reply import parse_reply
    from memory.retrieval.llm_steps import SubQueries

    reply = parse_reply('{"queries": ["a\\u0000b", "c\\ud800"]}', SubQueries)
    assert reply.queries == ["ab", "c?"]
    path = tmp_path / "extractions.jsonl"
    nul_name = b'{"message_id": "m1", "entities": [{"name": "A\\u0000"}]}'
    for content, where in ((nul_name, "line 1"), (b"\xff", "extractions.jsonl")):
        path.write_bytes(content)
        with pytest.raises(ValidationError, match=where):
            ReplayExtractor.from_file(path)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("slack:T024BE7LD", Workspace("slack", "T024BE7LD")),
        (" discord: 81384788765712384 ", Workspace("discord", "81384788765712384")),
        ("local:", Workspace("local", "")),
    ],
)
def test_a_workspace_is_platform_and_id(text: str, expected: Workspace) -> None:
    assert Workspace.parse(text) == expected
    assert Workspace.parse(str(expected)) == expected
    assert ConversationRef(expected.platform, expected.workspace_id, "C1").workspace == expected


@pytest.mark.parametrize("text", ["", "slack", "slack:", ":T1", "slack:T1:C1", "slack:T\x001"])
def test_a_workspace_that_is_not_platform_and_id_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Workspace.parse(text)
    assert str(refused.value).startswith("workspace") and "\n" not in str(refused.value)
