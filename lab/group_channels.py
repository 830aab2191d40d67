"""Group channels built from LoCoMo: the conversations of one split merged into one channel
where the same people talk in several threads, as a Slack or Discord bot sees a team's
channel. LoCoMo only has two people talking alone; the channel scores retrieval where the
same names appear in unrelated threads and other threads' turns sit between a thread's.
Pure: no database, no randomness.

The rule (docs/benchmarks.md, "Group channels", says the same):

- Channel: the conversations given, in their order (a split's, as ``SPLITS`` lists it);
  its name is ``group-`` and their names joined by ``-`` (``group-26-30-41-42-43``).
- Cast: person i is named after conversation i's first speaker (the names must differ).
  Conversation i's first speaker is person i, its second speaker person i + 1, the last
  conversation's second speaker person 0: a ring, where with three conversations or more
  each person talks in two threads with two others. Two conversations: the same two people
  talk in both threads. One conversation keeps its two speakers.
- Renaming: in each conversation's turns, questions and answers, every whole-word
  occurrence of a speaker's name whose cast name differs, in any case, becomes the cast
  name, written all in capitals or all in lower case where the original was. Nicknames
  ("Mel" for Melanie) are other words and stay.
- Time: conversation i moves by the whole number of years k = round(days from its first
  session to conversation 0's first session / 365.25): every time by the days between its
  first session date and the same date k years later (28 February for a 29th), and every
  year written in its texts, questions and answers (a whole word, 1900-2099) by k. Whole
  years keep the dates questions name ("on 3 June, 2023", "in July 2023") on their
  sessions, and bring each conversation's start within half a year of the first one's.
- Ids and threads: turn ``D1:3`` of conversation 26 becomes message ``26:D1:3``, and so do
  evidence ids. Each conversation is a thread whose id is its first message's id; every
  other message of it replies to that one, as a Slack thread reply does.
- Order: all messages by (time, the conversation's place in the channel, original order);
  sessions renumbered from 1 in the order of their (moved) start, same key.
- Questions: every question of every conversation, in the channel's conversation order.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from bot import locomo
from memory import ValidationError

_YEAR = re.compile(r"(?<!\w)(?:19|20)\d\d(?!\w)")


@dataclass(frozen=True)
class Thread:
    """Where one LoCoMo conversation went in its channel."""

    source: str  # the LoCoMo conversation's name
    root: str | None  # the thread id: the message id of its first turn (None: it has no turn)
    names: dict[str, str]  # its speakers' original names to their cast names
    years: int  # how far its times and written years moved


@dataclass(frozen=True)
class Channel:
    """A channel as a LoCoMo conversation (the benchmarks ingest and score it unchanged),
    with the threads it was built from; its speakers are the whole cast."""

    conversation: locomo.Conversation
    threads: tuple[Thread, ...]


def cast(conversations: Sequence[locomo.Conversation]) -> list[dict[str, str]]:
    """Per conversation, its two speakers' names to their cast names (the ring of the
    module docstring). Pure."""
    people = [c.speakers[0] for c in conversations]
    if len(set(people)) < len(people):
        raise ValidationError("speakers", f"the first speakers' names must differ to name the cast: {people}")
    if len(conversations) == 1:
        return [{name: name for name in conversations[0].speakers}]
    return [{c.speakers[0]: people[i], c.speakers[1]: people[(i + 1) % len(people)]} for i, c in enumerate(conversations)]


def years_apart(first: datetime, anchor: datetime) -> int:
    """The whole number of years that brings ``first`` closest to ``anchor``. Pure."""
    return round((anchor - first).days / 365.25)


def years_later(moment: datetime, years: int) -> datetime:
    """The same date and time ``years`` later (28 February for a 29th). Pure."""
    try:
        return moment.replace(year=moment.year + years)
    except ValueError:
        return moment.replace(year=moment.year + years, day=28)


def rewrite(text: str, names: Mapping[str, str], years: int) -> str:
    """``text`` with each name of ``names`` replaced by its cast name (whole words, any
    case, the case kept) and each year written in it moved by ``years``. Pure."""
    changed = {old.lower(): new for old, new in names.items() if old != new}
    if changed:
        pattern = "|".join(re.escape(old) for old in sorted(changed, key=len, reverse=True))
        text = re.sub(rf"(?<!\w)(?:{pattern})(?!\w)", lambda m: _cased(m.group(0), changed[m.group(0).lower()]), text, flags=re.I)
    if years:
        text = _YEAR.sub(lambda m: str(int(m.group(0)) + years), text)
    return text


def _cased(written: str, name: str) -> str:
    if written.isupper():
        return name.upper()
    return name.lower() if written.islower() else name


def build_channel(conversations: Sequence[locomo.Conversation]) -> Channel:
    """One channel of ``conversations`` by the rule of the module docstring. Pure."""
    names = cast(conversations)
    anchor = min(conversations[0].session_dates.values())
    placed: list[tuple[datetime, int, int, locomo.Turn]] = []  # time, thread, position, turn
    sessions: list[tuple[datetime, int, int]] = []  # start, thread, original session
    years: list[int] = []
    for index, conversation in enumerate(conversations):
        first = min(conversation.session_dates.values())
        years.append(years_apart(first, anchor))
        shift = years_later(first, years[-1]) - first
        sessions += [(date + shift, index, number) for number, date in conversation.session_dates.items()]
        for position, turn in enumerate(conversation.turns):
            message = turn.message
            moved = dataclasses.replace(
                message,
                platform_message_id=f"{conversation.name}:{turn.dia_id}",
                speaker_id=names[index].get(message.speaker_id, message.speaker_id),
                speaker_name=names[index].get(message.speaker_name, message.speaker_name),
                text=rewrite(message.text, names[index], years[-1]),
                message_time=message.message_time + shift,
                edited_at=message.edited_at + shift if message.edited_at else None,
            )
            placed.append((moved.message_time, index, position, dataclasses.replace(turn, message=moved)))
    placed.sort(key=lambda item: item[:3])
    sessions.sort()
    numbers = {(thread, session): n for n, (_, thread, session) in enumerate(sessions, start=1)}
    roots: dict[int, str] = {}
    turns = []
    for _, index, _, turn in placed:
        root = roots.setdefault(index, turn.message.platform_message_id)
        reply_to = None if root == turn.message.platform_message_id else root
        message = dataclasses.replace(turn.message, thread_id=root, reply_to=reply_to)
        turns.append(locomo.Turn(message.platform_message_id, numbers[index, turn.session], message))
    questions = [
        locomo.Question(
            rewrite(q.question, names[i], years[i]),
            rewrite(q.answer, names[i], years[i]),
            tuple(f"{c.name}:{e}" for e in q.evidence),
            q.category,
        )
        for i, c in enumerate(conversations)
        for q in c.questions
    ]
    people = tuple(dict.fromkeys(name for thread in names for name in thread.values()))
    channel = locomo.Conversation(
        name="group-" + "-".join(c.name for c in conversations),
        speakers=people,
        turns=turns,
        questions=questions,
        session_dates={numbers[thread, session]: start for start, thread, session in sessions},
    )
    threads = tuple(Thread(c.name, roots.get(i), names[i], years[i]) for i, c in enumerate(conversations))
    return Channel(channel, threads)


def split_channels(conversations: Sequence[locomo.Conversation], splits: Mapping[str, Sequence[str]]) -> dict[str, Channel]:
    """One channel per split of ``splits`` with a conversation among ``conversations``: the
    split's conversations that are there, in the split's order. Pure."""
    by_name = {c.name: c for c in conversations}
    chosen = {split: [by_name[n] for n in names if n in by_name] for split, names in splits.items()}
    return {split: build_channel(present) for split, present in chosen.items() if present}
