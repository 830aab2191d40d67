"""The LoCoMo benchmark format: sessions of turns with dates, and annotated questions.

Turns carry no time of their own, so turn i of a session is placed i seconds after the
session's start to keep their order. A shared photo's caption is appended to the turn,
as evaluations of LoCoMo usually do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.files import read_json
from memory import Message, ValidationError, parse_time, validate_message

_SESSION = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    message: Message


@dataclass(frozen=True)
class Question:
    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    name: str
    speakers: tuple[str, ...]  # two in a LoCoMo file; a group channel's whole cast (lab/group_channels.py)
    turns: list[Turn]
    questions: list[Question]
    session_dates: dict[int, datetime]
    rejected: list[dict[str, object]] = field(default_factory=list)  # line (None), field, reason


def parse_session_date(value: str) -> datetime:
    """``1:56 pm on 8 May, 2023`` as UTC."""
    return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_text(turn: dict[str, Any]) -> Any:
    """The turn's text with a shared photo's caption; a text that is not text is left
    as it is, for validation to refuse."""
    text = turn.get("text", "")
    caption = turn.get("blip_caption")
    return f"{text} [shares {caption}]" if caption and isinstance(text, str) and isinstance(caption, str) else text


def evidence_ids(raw: list[Any]) -> tuple[str, ...]:
    """The evidence turn ids of one question, as the turns spell them. A few annotations
    hold several ids in one string ("D8:6; D9:17", "D9:1 D4:4"), a stray colon
    ("D:11:26") or a leading zero ("D30:05"); an id that still names no turn is kept as
    written and counts as a miss. Pure."""
    ids: list[str] = []
    for entry in raw:
        if not isinstance(entry, str):
            continue
        for part in re.split(r"[;,\s]+", entry.strip()):
            match = re.fullmatch(r"D:?(\d+):0*(\d+)", part)
            if match:
                ids.append(f"D{match[1]}:{match[2]}")
            elif part:
                ids.append(part)
    return tuple(dict.fromkeys(ids))


def load(path: Path) -> Conversation:
    """A LoCoMo file (``-`` reads standard input). A file that is not LoCoMo is one
    ``ValidationError``; a turn that fails validation, or a session without a readable
    date, is listed in ``rejected`` and the rest is imported."""
    data = read_json(Path(path))
    conversation = data.get("conversation", data) if isinstance(data, dict) else None
    sessions = sorted(int(m.group(1)) for key in conversation or {} if (m := _SESSION.match(key)))
    if not isinstance(conversation, dict) or not sessions:
        raise ValidationError("file", f"{path} is not a LoCoMo conversation (no session_N lists)")
    turns: list[Turn] = []
    dates: dict[int, datetime] = {}
    rejected: list[dict[str, object]] = []
    for number in sessions:
        try:
            dates[number] = _session_date(conversation, number)
            session = conversation[f"session_{number}"]
            if not isinstance(session, list):
                raise ValidationError(f"session_{number}", "is not a list of turns")
        except ValidationError as error:
            rejected.append({"line": None, "field": error.field, "reason": f"{error}; the session was skipped"})
            continue
        for index, turn in enumerate(session):
            try:
                turns.append(_turn(turn, number, dates[number] + timedelta(seconds=index)))
            except ValidationError as error:
                rejected.append({"line": None, "field": error.field, "reason": f"session_{number} turn {index + 1}: {error}"})
    return Conversation(
        name=Path(path).stem,
        speakers=(str(conversation.get("speaker_a", "")), str(conversation.get("speaker_b", ""))),
        turns=turns,
        questions=_questions(data.get("qa")),
        session_dates=dates,
        rejected=rejected,
    )


def _session_date(conversation: dict[str, Any], number: int) -> datetime:
    key = f"session_{number}_date_time"
    value = conversation.get(key)
    try:
        return parse_session_date(value) if isinstance(value, str) else parse_time(value, key)
    except ValueError:
        raise ValidationError(key, f"cannot parse session date {value!a}") from None


def _turn(turn: Any, session: int, at: datetime) -> Turn:
    if not isinstance(turn, dict):
        raise ValidationError("turn", "is not a JSON object")
    message = validate_message({"id": turn.get("dia_id"), "author": turn.get("speaker"), "text": turn_text(turn), "ts": at})
    return Turn(message.platform_message_id, session, message)


def _questions(items: Any) -> list[Question]:
    """The annotated questions (benchmarks read them; ``ingest`` does not): malformed
    ones are left out."""
    questions: list[Question] = []
    for item in items if isinstance(items, list) else []:
        try:
            questions.append(
                Question(
                    question=item["question"],
                    answer=str(item.get("answer", item.get("adversarial_answer", ""))),
                    evidence=evidence_ids(item.get("evidence", [])),
                    category=int(item["category"]),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return questions
