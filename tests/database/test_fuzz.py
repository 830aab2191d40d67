"""Fuzzing what users hand us (hypothesis): the JSON Lines and LoCoMo readers,
identifier normalisation, time parsing and the command line's arguments, with random and
adversarial values (the hostile lines of the hardening issue, huge values, control
characters, invalid UTF-8, deep nesting, unknown fields).

Properties: nothing escapes as anything but a ``ValidationError`` (or, from the command
line, one line and exit code 2); a rejected line stores nothing; every good line is
stored exactly once.
"""

from __future__ import annotations

import json
import math
import tempfile
import uuid
from datetime import UTC, datetime, timezone
from pathlib import Path
from typing import Any

from clirun import stashbird
from hostile import HOSTILE
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot import locomo
from bot.importers import read_jsonl
from memory import ConversationRef, Memory, Principal, ValidationError, ingest, messages, normalize_id, parse_time
from memory.limits import MAX_ID_CHARS
from memory.retrieval.timeparse import TimeRange, resolve_times

SLOW = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))  # each runs on the database
FILES = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FAST = settings(max_examples=300, deadline=None)

# Text as it arrives from files and argv: any code point, lone surrogates and controls too.
any_text = st.text(st.characters(codec=None, categories=None), max_size=40)
ADVERSARIAL = ["", " ", "\x00", "a\x00b", "\ud800", "\udcff", "\t x \n", "x" * (MAX_ID_CHARS + 1), "-", "--json", "0", "-1"]
nasty_text = st.one_of(any_text, st.sampled_from(ADVERSARIAL))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), nasty_text)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(nasty_text, inner, max_size=3), max_leaves=8
)
# The hostile lines, the megabyte-sized ones scaled down (the same checks refuse them).
HOSTILE_LINES = [raw for _, raw in HOSTILE if len(raw) < 20_000 and b"g0" not in raw] + [
    b'{"id": "h", "x": ' + b"[" * 3_000 + b"]" * 3_000 + b"}",
    json.dumps({"id": "h", "author": "bob", "text": "word " * 10_000, "ts": 1}).encode(),
]
HOSTILE_LINE = st.sampled_from(HOSTILE_LINES)
RANDOM_BYTES = st.binary(max_size=40)
BOM = st.sampled_from([b"", b"\xef\xbb\xbf"])
FIELDS = ("id", "author", "author_id", "author_name", "role", "text", "ts", "reply_to", "thread_id")


ID_TEXT = st.text("abcXYZ0189:.-", min_size=1, max_size=12)
MESSAGE_TEXT = st.text(st.characters(exclude_categories=("Cc", "Cs")), max_size=30)
LINE_KINDS = st.sampled_from(["good", "good", "hostile", "fields", "bytes"])
UNKNOWN_FIELD = st.sampled_from(["x", "meta"])
FIELD_LINES = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6)


@st.composite
def jsonl_file(draw: st.DrawFn) -> tuple[bytes, dict[int, str]]:
    """Lines mixing good messages (their line -> id) with hostile, random-field and random
    byte lines."""
    lines: list[bytes] = []
    good: dict[int, str] = {}
    for number in range(1, draw(st.integers(1, 20)) + 1):
        kind = draw(LINE_KINDS)
        if kind == "good":
            message_id = f"{draw(ID_TEXT)}-{number}"
            fields: dict[str, Any] = {
                "id": f" {message_id} ",
                "author": "ann",
                "text": draw(MESSAGE_TEXT) + ".",
                "ts": draw(st.integers(0, 4_000_000_000)),
                draw(UNKNOWN_FIELD): draw(json_values),  # unknown fields are ignored
            }
            lines.append(json.dumps(fields).encode())
            good[number] = message_id
        elif kind == "hostile":
            lines.append(draw(HOSTILE_LINE))
        elif kind == "fields":
            lines.append(json.dumps(draw(FIELD_LINES)).encode())
        else:
            lines.append(draw(RANDOM_BYTES).replace(b"\n", b" ") or b"x")
    prefix = draw(BOM)
    return prefix + b"\n".join(lines) + b"\n", good


def read_bytes(data: bytes) -> Any:
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as handle:
        handle.write(data)
        handle.flush()
        return read_jsonl(Path(handle.name))


@FILES
@given(jsonl_file())
def test_jsonl_reader_accounts_for_every_line_once(case: tuple[bytes, dict[int, str]]) -> None:
    data, good = case
    try:
        parsed = read_bytes(data)
    except ValidationError as error:  # the whole file: only a UTF-16 byte-order mark
        assert error.field == "file" and data.startswith((b"\xff\xfe", b"\xfe\xff"))
        return
    numbers = [n for n, raw in enumerate(data.split(b"\n"), start=1) if raw.strip()]
    rejected = [r["line"] for r in parsed.rejected]
    assert sorted(parsed.lines + rejected) == numbers, "every non-blank line is a message or rejected, once"
    by_line = dict(zip(parsed.lines, parsed.messages, strict=True))
    assert {n: by_line[n].platform_message_id for n in good} == good, "every good line is read, its id stripped"
    for message in parsed.messages:
        message.text.encode("utf-8")
        assert "\x00" not in message.text + message.speaker_name + message.platform_message_id


@SLOW
@given(jsonl_file())
async def test_ingest_stores_every_good_line_once_and_no_rejected_line(
    memory: Memory, case: tuple[bytes, dict[int, str]]
) -> None:
    data, good = case
    try:
        parsed = read_bytes(data)
    except ValidationError:
        return
    ref = ConversationRef("fuzz", "", uuid.uuid4().hex[:12])
    principal = Principal.operator("fuzz")
    report = await ingest(memory, ref, parsed.messages, principal=principal)
    stored = [m["message_id"] for m in await messages(memory, ref, principal=principal)]
    assert report.rejected == () and report.stored == len(stored)
    assert sorted(stored) == sorted({m.platform_message_id for m in parsed.messages})
    assert set(good.values()) <= set(stored) and len(stored) == len(set(stored))


session_keys = st.sampled_from(["session_1", "session_2", "session_10", "session_x"])
turn = st.fixed_dictionaries({"speaker": nasty_text, "dia_id": json_scalars, "text": json_scalars})
turns = st.lists(st.one_of(json_values, turn), max_size=5)


@FAST
@given(
    st.dictionaries(session_keys, turns, max_size=3),
    st.dictionaries(
        st.sampled_from(["session_1_date_time", "session_2_date_time"]),
        st.one_of(json_scalars, st.just("1:56 pm on 8 May, 2023")),
        max_size=2,
    ),
    st.sampled_from(["conversation", None]),
)
def test_locomo_reader_imports_or_rejects_every_turn(sessions: dict[str, Any], dates: dict[str, Any], wrap: str | None) -> None:
    body = {"speaker_a": "A", "speaker_b": "B", **sessions, **dates}
    with tempfile.NamedTemporaryFile(suffix=".json") as handle:
        handle.write(json.dumps({wrap: body} if wrap else body).encode())
        handle.flush()
        try:
            conversation = locomo.load(Path(handle.name))
        except ValidationError as error:
            assert error.field == "file"
            return
    dated = [k for k, v in sessions.items() if k != "session_x" and isinstance(v, list) and f"{k}_date_time" in dates]
    turn_rejections = [r for r in conversation.rejected if " turn " in str(r["reason"])]
    assert len(conversation.turns) + len(turn_rejections) <= sum(len(sessions[k]) for k in dated)
    assert all(r["reason"] for r in conversation.rejected)


@FAST
@given(st.one_of(nasty_text, json_values, st.integers(), st.floats()))
def test_identifier_normalisation_is_one_idempotent_form(value: object) -> None:
    try:
        normalized = normalize_id(value)
    except ValidationError as error:
        assert error.field == "id"
        return
    assert normalize_id(normalized) == normalized == normalized.strip()
    assert 0 < len(normalized) <= MAX_ID_CHARS and not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in normalized)
    normalized.encode("utf-8")
    if isinstance(value, str):
        assert normalize_id(f"\t {value} \n") == normalized


@FAST
@given(st.one_of(json_values, st.integers(), st.floats(), st.datetimes(timezones=st.timezones()), any_text.map(str.upper)))
def test_time_parsing_gives_utc_within_the_calendar_or_refuses(value: object) -> None:
    try:
        parsed = parse_time(value)
    except ValidationError as error:
        assert error.field == "ts"
        return
    assert parsed.tzinfo is UTC and parsed.utcoffset() is not None
    if isinstance(value, int) and not isinstance(value, bool):
        assert parse_time(str(value)) == parsed
    if isinstance(value, float):
        assert math.isfinite(value)


@FAST
@given(any_text, st.datetimes(timezones=st.just(timezone.utc)))
def test_times_in_questions_resolve_on_any_question_date(question: str, date: datetime) -> None:
    for found in resolve_times(f"what happened {question} last year, yesterday, in May, 3 weeks ago", date):
        if isinstance(found, TimeRange):
            assert found.start <= found.end


argument = st.one_of(st.text(max_size=20), nasty_text)
command_lines = st.one_of(
    st.tuples(st.just("ask"), st.just("--conversation"), argument, argument, st.sampled_from(["--k", "--date"]), argument),
    st.tuples(
        st.sampled_from(["forget", "edit"]),
        st.just("--conversation"),
        argument,
        st.just("--message"),
        argument,
        st.just("--text"),
        argument,
    ).map(lambda argv: argv if argv[0] == "edit" else argv[:5]),
    st.tuples(st.sampled_from(["usage", "consolidate"]), st.just("--conversation"), argument),
    # "-" reads standard input, which pytest does not let a test read
    st.tuples(
        st.just("ingest"),
        st.sampled_from(["/", "/nonexistent", "--locomo"]),
        argument.filter(lambda a: a != "-"),
        st.just("--conversation"),
        argument,
    ),
)


@settings(SLOW, max_examples=30)
@given(argv=command_lines)
@example(argv=("ingest", "--locomo", "\ud800x", "--conversation", "c"))  # once a traceback: no file has such a name
@example(argv=("ingest", "--locomo", "a\x00b", "--conversation", "c"))
async def test_command_line_arguments_end_in_one_line_and_exit_code_2(argv: tuple[str, ...], cli_env: None) -> None:
    code, _, err = stashbird(None, *argv)
    if err.startswith("usage:"):  # argparse: its usage, then one error line
        assert code == 2 and len(err.strip().splitlines()[-1:]) == 1, err
        return
    assert code in (0, 2) and "Traceback" not in err, err
    assert code == 0 or len(err.strip().splitlines()) == 1, err
