"""File formats the ``ingest`` command reads: JSON Lines of messages, and LoCoMo.

A bad line is rejected with its number and reason and never stops the good ones. The
same id twice in one file is a duplicate when the texts agree; with different texts
the later line is rejected as such (the first is the one stored), not counted as a
duplicate, since one of the two texts is then silently lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bot import locomo
from bot.files import decode_line, open_input, parse_json
from memory import Message, ValidationError, validate_message


@dataclass
class ParsedFile:
    messages: list[Message] = field(default_factory=list)
    lines: list[int | None] = field(default_factory=list)  # each message's line number
    rejected: list[dict[str, object]] = field(default_factory=list)  # line, field, reason


def _message(raw: bytes, number: int, first_lines: dict[str, tuple[int, Message]]) -> Message:
    fields = parse_json(decode_line(raw, first=number == 1))
    if not isinstance(fields, dict):
        raise ValidationError("line", "is not a JSON object")
    message = validate_message(fields)
    earlier = first_lines.setdefault(message.platform_message_id, (number, message))
    if earlier[0] != number and earlier[1].text != message.text:
        raise ValidationError("id", f"{message.platform_message_id!a} was used on line {earlier[0]} with a different text")
    return message


def read_jsonl(path: Path) -> ParsedFile:
    """One message object a line (``-`` reads standard input)."""
    parsed = ParsedFile()
    first_lines: dict[str, tuple[int, Message]] = {}
    with open_input(path) as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                parsed.messages.append(_message(raw, number, first_lines))
                parsed.lines.append(number)
            except ValidationError as error:
                if error.field == "file":
                    raise
                parsed.rejected.append({"line": number, "field": error.field, "reason": str(error)})
    return parsed


def read_locomo(path: Path) -> ParsedFile:
    conversation = locomo.load(path)
    return ParsedFile(
        messages=[turn.message for turn in conversation.turns],
        lines=[None] * len(conversation.turns),
        rejected=list(conversation.rejected),
    )
