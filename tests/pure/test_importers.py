"""The files ``stashbird ingest`` reads: JSON Lines and LoCoMo, as bytes a user may hand
us (pure: no database)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from bot import locomo
from bot.importers import read_jsonl, read_locomo
from memory import ValidationError


def line(**fields: object) -> bytes:
    return json.dumps({"id": "m", "author": "ann", "text": "hi", "ts": 1_700_000_000, **fields}).encode()


def test_encoding_bom_invalid_bytes_and_deep_nesting_reject_only_their_lines(tmp_path: Path) -> None:
    """Issue case 3: a BOM before line 1, an invalid UTF-8 byte and deep nesting."""
    path = tmp_path / "messages.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf"
        + line(id="1")
        + b"\n"
        + b'{"id": "2", "author": "ann", "text": "caf\xe9", "ts": 1}\n'
        + b'{"id": '
        + b"[" * 50_000
        + b"]" * 50_000
        + b"}\n"
        + line(id="4")
        + b"\r\n"
    )
    parsed = read_jsonl(path)
    assert [m.platform_message_id for m in parsed.messages] == ["1", "4"] and parsed.lines == [1, 4]
    assert [(r["line"], r["field"]) for r in parsed.rejected] == [(2, "line"), (3, "line")]
    assert "not valid UTF-8 (byte 0xe9" in str(parsed.rejected[0]["reason"])
    assert "nested too deeply" in str(parsed.rejected[1]["reason"])


def test_same_id_with_a_different_text_is_reported_not_counted_as_a_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "messages.jsonl"
    lines = [line(id="1"), line(id=" 1 "), line(id="1", text="changed"), line(id=True), line(reply_to={"id": 1})]
    path.write_bytes(b"\n".join(lines))
    parsed = read_jsonl(path)
    assert [m.platform_message_id for m in parsed.messages] == ["1", "1"]  # the exact repeat stays a duplicate
    assert [(r["line"], r["field"]) for r in parsed.rejected] == [(3, "id"), (4, "id"), (5, "reply_to")]
    assert "used on line 1 with a different text" in str(parsed.rejected[0]["reason"])


def test_dash_reads_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(line(id="s1") + b"\n")))
    assert [m.platform_message_id for m in read_jsonl(Path("-")).messages] == ["s1"]


def test_a_folder_or_a_utf16_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="is a folder"):
        read_jsonl(tmp_path)
    path = tmp_path / "utf16.jsonl"
    path.write_bytes(line().decode().encode("utf-16"))
    with pytest.raises(ValidationError, match="UTF-16"):
        read_jsonl(path)


def test_a_file_that_is_not_locomo_is_one_clear_error(tmp_path: Path) -> None:
    for content in (b"[1, 2]", b'{"conversation": {"speaker_a": "A"}}', b"\xff\xfe", b"not json"):
        path = tmp_path / "x.json"
        path.write_bytes(content)
        with pytest.raises(ValidationError) as error:
            read_locomo(path)
        assert error.value.field == "file"


def test_locomo_bad_turns_and_sessions_are_rejected_and_the_rest_imported(tmp_path: Path) -> None:
    data = {
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "A", "dia_id": "D1:1", "text": "hello"},
                {"speaker": "B", "dia_id": "D1:2", "text": "bad\u0000"},
                "not a turn",
                {"speaker": "B", "dia_id": True, "text": "x"},
                {"speaker": "B", "dia_id": " D1:5 ", "text": "photo", "blip_caption": "a dog"},
            ],
            "session_2_date_time": "someday",
            "session_2": [{"speaker": "A", "dia_id": "D2:1", "text": "lost"}],
        }
    }
    path = tmp_path / "conv.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(data).encode())
    conversation = locomo.load(path)
    assert [t.dia_id for t in conversation.turns] == ["D1:1", "D1:5"]
    assert conversation.turns[1].message.text == "photo [shares a dog]"
    assert [r["field"] for r in conversation.rejected] == ["text", "turn", "id", "session_2_date_time"]
    assert "session_1 turn 2" in str(conversation.rejected[0]["reason"])
