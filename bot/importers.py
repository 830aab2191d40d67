"""File formats the ``ingest`` command reads: JSON Lines of messages, and LoCoMo."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from bot import locomo
from memory import Message, ValidationError, validate_message


@dataclass
class ParsedFile:
    messages: list[Message] = field(default_factory=list)
    rejected: list[dict[str, object]] = field(default_factory=list)  # line, field, reason


def read_jsonl(path: Path) -> ParsedFile:
    """One message object a line; a bad line is rejected with its number and reason and
    never stops the good ones."""
    parsed = ParsedFile()
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                fields = json.loads(line)
                if not isinstance(fields, dict):
                    raise ValidationError("line", "is not a JSON object")
                parsed.messages.append(validate_message(fields))
            except json.JSONDecodeError as error:
                parsed.rejected.append({"line": number, "field": "line", "reason": f"invalid JSON: {error.msg}"})
            except ValidationError as error:
                parsed.rejected.append({"line": number, "field": error.field, "reason": str(error)})
    return parsed


def read_locomo(path: Path) -> ParsedFile:
    conversation = locomo.load(path)
    return ParsedFile(messages=[turn.message for turn in conversation.turns])
