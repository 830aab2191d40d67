"""The LoCoMo benchmark format: sessions of turns with dates, and annotated questions.

Turns carry no time of their own, so turn i of a session is placed i seconds after the
session's start to keep their order. A shared photo's caption is appended to the turn,
as evaluations of LoCoMo usually do.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memory import Message

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
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]
    session_dates: dict[int, datetime]


def parse_session_date(value: str) -> datetime:
    """``1:56 pm on 8 May, 2023`` as UTC."""
    return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_text(turn: dict) -> str:
    text = turn.get("text", "")
    caption = turn.get("blip_caption")
    return f"{text} [shares {caption}]" if caption else text


def evidence_ids(raw: list) -> tuple[str, ...]:
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
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    conversation = data.get("conversation", data)
    sessions = sorted(int(m.group(1)) for key in conversation if (m := _SESSION.match(key)))
    turns: list[Turn] = []
    dates: dict[int, datetime] = {}
    for number in sessions:
        start = parse_session_date(conversation[f"session_{number}_date_time"])
        dates[number] = start
        for index, turn in enumerate(conversation[f"session_{number}"]):
            message = Message(
                platform_message_id=turn["dia_id"].strip(),
                speaker_id=turn["speaker"],
                speaker_name=turn["speaker"],
                text=turn_text(turn),
                message_time=start + timedelta(seconds=index),
            )
            turns.append(Turn(turn["dia_id"].strip(), number, message))
    questions = [
        Question(
            question=item["question"],
            answer=str(item.get("answer", item.get("adversarial_answer", ""))),
            evidence=evidence_ids(item.get("evidence", [])),
            category=int(item["category"]),
        )
        for item in data.get("qa", [])
    ]
    return Conversation(
        name=Path(path).stem,
        speakers=(conversation["speaker_a"], conversation["speaker_b"]),
        turns=turns,
        questions=questions,
        session_dates=dates,
    )
