"""Group channels built from LoCoMo: the conversations of one split merged into one channel
where the same people talk with several others, as a Slack or Discord bot sees a team's
channel. LoCoMo only has two people talking alone; the channel scores retrieval where the
same names appear in unrelated conversations and other conversations' turns sit between
one's. Pure: no database, no randomness.

The rule (docs/benchmarks.md, "Group channels", says the same). Both layouts and casts:

- Channel: the conversations given, in their order (a split's, as ``SPLITS`` lists it);
  its name is ``group-`` and their names joined by ``-`` (``group-26-30-41-42-43``).
- Cast ``ring`` (the default): person i is named after conversation i's first speaker
  (the names must differ). Conversation i's first speaker is person i, its second speaker
  person i + 1, the last conversation's second speaker person 0: a ring, where with three
  conversations or more each person talks in two conversations with two others, so each
  cast name carries two LoCoMo people's lives. Two conversations: the same two people talk
  in both. One conversation keeps its two speakers.
- Cast ``pairs``: every speaker keeps their name, so each person talks in one conversation
  with one other and the channel only interleaves the conversations (what the ring costs
  beyond it is one name carrying two lives). A speaker whose name a speaker of an earlier
  conversation (in channel order) has is renamed to the first of ``FALLBACK_NAMES`` (Avery,
  Blake, Casey, Devon, Emery, Finley, Harper, Jordan) that no speaker of the channel's
  conversations has and no earlier speaker was given; none left is an error.
- Renaming: in each conversation's turns, questions and answers, every whole-word
  occurrence of a speaker's name whose cast name differs, in any case, becomes the cast
  name, written all in capitals or all in lower case where the original was. Nicknames
  ("Mel" for Melanie) are other words and stay.
- Ids: turn ``D1:3`` of conversation 26 becomes message ``26:D1:3``, and so do evidence ids.
- Order: all messages by (time, the conversation's place in the channel, original order);
  the channel's sessions numbered from 1 in the order of their start (ties: see each layout).
- Questions: every question of every conversation, in the channel's conversation order.

Layout ``interleaved`` (the default), a busy channel where conversations alternate message
by message, with no threads:

- Days: each conversation's sessions in date order (ties: session number) are its sessions
  0, 1, 2, ...; the channel's day k is the date of conversation 0's session k, and past its
  last session L, L's date plus 14 (k - L) days.
- Moves: session k of every conversation moves to day k by whole days (its time of day
  stays): its offset is day k's date minus its date. Conversation 0 does not move.
- Times: day k starts at the earliest moved start of its sessions, or, if later, at day
  k - 1's start plus one minute per turn of day k - 1's longest session (so that days never
  overlap; LoCoMo's never come near). The turn j (from 0) of conversation i's session on
  day k is at that start + j minutes + i seconds (at most 60 conversations), so
  conversations alternate turn by turn, in the order (j, i). An edit time moves as its
  message does.
- Sessions: one per day, starting at its start (ties: the earlier day); a turn's session is its day's.
- No threads: every message is top-level (no thread id, no reply).
- Written dates: in each conversation's turns, questions and answers (after the renaming),
  a date written "7 May 2023", "7 May, 2023", "7th of May 2023", "May 7, 2023", "May 7th
  2023", "May 2023", "May, 2023", "7 May", "May 7", or a month alone after in, during,
  since, from, until, of, between, and, early, mid, late ("in May", "mid-August"), moves
  by the offset of the conversation's session whose original date is nearest to it (ties:
  the earlier session). A month stands for its 15th; a date without a year is read in the
  year, next to one of its sessions' years, that brings it nearest to a session. In a
  question and its answer, the sessions are those of the question's evidence (all of them
  when no evidence names a turn), and a month stands for the day of the evidence's first
  turn in it, if any: a question is written from its evidence, and its date must still
  name the evidence's time where neighbouring sessions moved by other offsets (with the
  nearest session of all, 13 of the calibration split's 75 dated questions named another
  month or week than their evidence's). It is written back in its format: the same
  separators, an ordinal suffix recomputed, an abbreviated month abbreviated, no year
  where there was none. A day range after a month ("May 5-6, 2023", "April 3rd to 9th",
  "October 19 and 24") moves both days by the first's offset, the second's month written
  when it differs. A year alone (a whole word, 1900-2099: "in 2022", "summer 2022",
  "Cyberpunk 2077") moves only when the conversation moved by about whole years: to Y'
  when every session's offset takes its middle (2 July) into year Y'; otherwise it stays.
  Month names count capitalised ("Sept" too); other forms ("the 15th", "15/08",
  "2023-05-07", misspelt months) stay, and so do weekday names although their dates move.
  Relative times ("last Saturday") are their session's and need nothing.

Layout ``threads``, each conversation a thread that keeps its own days:

- Time: conversation i moves by the whole number of years k = round(days from its first
  session to conversation 0's first session / 365.25): every time by the days between its
  first session date and the same date k years later (28 February for a 29th), and every
  year written in its texts, questions and answers (a whole word, 1900-2099) by k. Whole
  years keep the dates questions name ("on 3 June, 2023", "in July 2023") on their
  sessions, and bring each conversation's start within half a year of the first one's.
- Threads: each conversation is a thread whose id is its first message's id; every other
  message of it replies to that one, as a Slack thread reply does.
- Sessions: each conversation's own, moved (ties of start: the conversation's place, then
  its session number).

Layout ``threaded``, a busy channel whose conversations are threads: the ``interleaved``
layout's days, times, sessions and written dates, with the ``threads`` layout's threads
(each conversation a thread whose id is its first message's id, every other message of it
a reply to that one).
"""

from __future__ import annotations

import calendar
import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from bot import locomo
from memory import ValidationError

LAYOUTS = ("interleaved", "threads", "threaded")
CASTS = ("ring", "pairs")
# The pairs cast's names for a speaker whose name an earlier conversation's speaker has, in this order.
FALLBACK_NAMES = ("Avery", "Blake", "Casey", "Devon", "Emery", "Finley", "Harper", "Jordan")
STEP_DAYS = 14  # between the channel's days past conversation 0's last session

_YEAR = re.compile(r"(?<!\w)(?:19|20)\d\d(?!\w)")

_FULL = {name: number for number, name in enumerate(calendar.month_name) if name}
_MONTHS = {name: number for number, name in enumerate(calendar.month_abbr) if name} | {"Sept": 9} | _FULL
_MONTH = r"(?P<@m>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")(?!\w)\.?"
_DAY = r"(?P<@d>\d{1,2})(?P<@s>st|nd|rd|th)?(?!\w)"
_RANGE = r"(?:(?:\s*[-–]\s*|\s+(?:to|and)\s+)(?P<@e>\d{1,2})(?P<@t>st|nd|rd|th)?(?!\w))?"
_YEAR_GROUP = r"(?P<@y>(?:19|20)\d\d)(?!\w)"
_BEFORE_MONTH = r"(?:in|during|since|from|until|of|between|and|early|mid|late)"  # the words a month alone follows
# Tried in this order at each place: the longest form first, a year alone last.
_FORMS = {
    "dmy": rf"(?<!\w){_DAY}(?:\s+of)?\s+{_MONTH}[.,]?\s*{_YEAR_GROUP}",
    "mdy": rf"(?<!\w){_MONTH}\s+{_DAY}{_RANGE},?\s*{_YEAR_GROUP}",
    "my": rf"(?<!\w){_MONTH}[.,]?\s*{_YEAR_GROUP}",
    "dm": rf"(?<!\w){_DAY}(?:\s+of)?\s+{_MONTH}",
    "md": rf"(?<!\w){_MONTH}\s+{_DAY}{_RANGE}",
    "mo": rf"(?<!\w){_BEFORE_MONTH}[\s-]+(?P<@m>{'|'.join(_FULL)})(?!\w)(?![.,]?\s*\d)",
    "y": rf"(?<!\w){_YEAR_GROUP}",
}
_DATE = re.compile("|".join(f"(?P<{form}>{pattern.replace('@', form + '_')})" for form, pattern in _FORMS.items()))

Session = tuple[date, int]  # a session's original date, and the whole days it moved


@dataclass(frozen=True)
class Thread:
    """Where one LoCoMo conversation went in its channel."""

    source: str  # the LoCoMo conversation's name
    root: str | None  # its thread id, the message id of its first turn (None: no turn, or the interleaved layout)
    names: dict[str, str]  # its speakers' original names to their cast names
    years: int  # how far the threads layout moved its times and written years (0 interleaved)
    offsets: dict[int, int]  # per original session number, the whole days it moved


@dataclass(frozen=True)
class Channel:
    """A channel as a LoCoMo conversation (the benchmarks ingest and score it unchanged),
    with the threads it was built from; its speakers are the whole cast."""

    conversation: locomo.Conversation
    threads: tuple[Thread, ...]


@dataclass(frozen=True)
class _Placed:
    """How a layout places each conversation (lists per conversation, in channel order)."""

    times: list[list[datetime]]  # each turn's new time, in the conversation's turn order
    sessions: list[dict[int, tuple[int, ...]]]  # original session number to its channel session's key
    starts: dict[tuple[int, ...], datetime]  # each channel session's start, by key
    years: list[int]  # written years moved by
    offsets: list[dict[int, int]]  # original session number to the whole days it moved
    dated: list[list[Session]]  # the sessions written dates move with (none: they stay)


def cast_names(conversations: Sequence[locomo.Conversation], rule: str = "ring") -> list[dict[str, str]]:
    """Per conversation, its two speakers' names to their cast names, by the cast ``rule``
    (one of ``CASTS``, as the module docstring says). Pure."""
    if rule not in _CASTS:
        raise ValidationError("cast", f"must be one of {', '.join(CASTS)}, not {rule!r}")
    return _CASTS[rule](conversations)


def _ring(conversations: Sequence[locomo.Conversation]) -> list[dict[str, str]]:
    """The ring: each person talks in two conversations with two others."""
    people = [c.speakers[0] for c in conversations]
    if len(set(people)) < len(people):
        raise ValidationError("speakers", f"the first speakers' names must differ to name the cast: {people}")
    if len(conversations) == 1:
        return [{name: name for name in conversations[0].speakers}]
    return [{c.speakers[0]: people[i], c.speakers[1]: people[(i + 1) % len(people)]} for i, c in enumerate(conversations)]


def _pairs(conversations: Sequence[locomo.Conversation]) -> list[dict[str, str]]:
    """Every speaker under their own name, a name taken earlier replaced by a free fallback
    name, so that one name is one person."""
    spoken = {name for c in conversations for name in c.speakers}
    free = [name for name in FALLBACK_NAMES if name not in spoken]
    taken: set[str] = set()
    names = []
    for conversation in conversations:
        mine = {}
        for name in conversation.speakers:
            if name not in taken:
                mine[name] = name
            elif free:
                mine[name] = free.pop(0)
            else:
                raise ValidationError("speakers", f"no fallback name left for {name} of conversation {conversation.name}")
        taken.update(conversation.speakers)
        names.append(mine)
    return names


_CASTS: dict[str, Callable[[Sequence[locomo.Conversation]], list[dict[str, str]]]] = {"ring": _ring, "pairs": _pairs}


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


def move_dates(text: str, sessions: Sequence[Session], days: Sequence[date] = ()) -> str:
    """``text`` with each date written in it moved as its nearest session moved, in its
    own format (the interleaved layout's rule in the module docstring); a month written
    without a day stands for the first of ``days`` in it (a question's evidence), else
    for its 15th. Pure."""
    return _DATE.sub(lambda match: _moved(match, sessions, days), text) if sessions else text


def _moved(match: re.Match[str], sessions: Sequence[Session], days: Sequence[date]) -> str:
    form = next(form for form in _FORMS if match.group(form) is not None)
    parts = {name[len(form) + 1 :]: value for name, value in match.groupdict().items() if name.startswith(form + "_") and value}
    if form == "y":
        middle = date(int(parts["y"]), 7, 2)
        into = {(middle + timedelta(days=offset)).year for _, offset in sessions}
        return str(into.pop()) if len(into) == 1 else match.group(0)
    month, year = _MONTHS[parts["m"]], int(parts["y"]) if "y" in parts else None
    told = (d.day for d in days if d.month == month and year in (None, d.year))
    day = int(parts["d"]) if "d" in parts else next(told, 15)
    years = [year] if year is not None else sorted({start.year + k for start, _ in sessions for k in (-1, 0, 1)})
    nearest = min(
        (
            (abs((written - start).days), index, written, offset)
            for written in _dates(years, month, day)
            for index, (start, offset) in enumerate(sessions)
        ),
        default=None,
    )
    if nearest is None:
        return match.group(0)
    _, _, written, offset = nearest
    moved = written + timedelta(days=offset)
    new = {"d": str(moved.day), "s": _ordinal(moved.day), "m": _month_name(moved.month, parts["m"]), "y": str(moved.year)}
    if "e" in parts:
        end = _dates([written.year], month, int(parts["e"]))
        if not end or end[0] <= written:
            return match.group(0)
        last = end[0] + timedelta(days=offset)
        new["e"] = str(last.day) if last.month == moved.month else f"{_month_name(last.month, parts['m'])} {last.day}"
        new["t"] = _ordinal(last.day)
    return _spliced(match, {f"{form}_{part}": new[part] for part in parts})


def asked_about(
    conversation: locomo.Conversation, evidence: Sequence[str], offsets: Mapping[int, int]
) -> tuple[list[Session], list[date]]:
    """What a question's written dates move with: the sessions of ``conversation`` that
    hold a turn of its ``evidence``, in date order, each with the days it moved
    (``offsets``, by session number), and the evidence turns' dates. Pure."""
    named = set(evidence)
    wanted = [turn for turn in conversation.turns if turn.dia_id in named]
    dates = conversation.session_dates
    numbers = sorted({turn.session for turn in wanted}, key=lambda n: (dates[n], n))
    return [(dates[n].date(), offsets[n]) for n in numbers], [turn.message.message_time.date() for turn in wanted]


def _dates(years: Sequence[int], month: int, day: int) -> list[date]:
    """The valid dates of ``month`` and ``day`` in ``years`` (none for 31 June)."""
    found = []
    for year in years:
        try:
            found.append(date(year, month, day))
        except ValueError:
            continue
    return found


def _ordinal(day: int) -> str:
    return "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def _month_name(month: int, written: str) -> str:
    """``month`` named in full or abbreviated, as ``written`` was."""
    return calendar.month_name[month] if written in _FULL else calendar.month_abbr[month]


def _spliced(match: re.Match[str], values: Mapping[str, str]) -> str:
    """The match with each named group's text replaced by its value in ``values``."""
    text, origin = match.group(0), match.start()
    for name in sorted(values, key=match.start, reverse=True):
        start, end = match.span(name)
        text = text[: start - origin] + values[name] + text[end - origin :]
    return text


def _threads(conversations: Sequence[locomo.Conversation]) -> _Placed:
    """The threads layout: each conversation moved by whole years, its sessions its own."""
    anchor = min(conversations[0].session_dates.values())
    placed = _Placed([], [], {}, [], [], [])
    for index, conversation in enumerate(conversations):
        first = min(conversation.session_dates.values())
        placed.years.append(years_apart(first, anchor))
        shift = years_later(first, placed.years[-1]) - first
        placed.times.append([turn.message.message_time + shift for turn in conversation.turns])
        placed.sessions.append({number: (index, number) for number in conversation.session_dates})
        placed.starts.update({(index, number): start + shift for number, start in conversation.session_dates.items()})
        placed.offsets.append(dict.fromkeys(conversation.session_dates, shift.days))
        placed.dated.append([])
    return placed


def _interleaved(conversations: Sequence[locomo.Conversation]) -> _Placed:
    """The interleaved layout: session k of every conversation on day k, turns alternating."""
    if len(conversations) > 60:
        raise ValidationError(
            "conversations",
            "an interleaved channel takes at most 60 (turn j of conversation i is j minutes and i seconds into its day)",
        )
    orders = [[number for _, number in sorted((d, n) for n, d in c.session_dates.items())] for c in conversations]
    anchors = [conversations[0].session_dates[number] for number in orders[0]]

    def day(k: int) -> date:
        last = len(anchors) - 1
        return (anchors[min(k, last)] + timedelta(days=STEP_DAYS * max(k - last, 0))).date()

    placed = _Placed([], [], {}, [], [], [])
    earliest: dict[int, datetime] = {}  # per day, the earliest moved start of its sessions
    longest: Counter[int] = Counter()  # per day, the most turns a session of it has
    for conversation, order in zip(conversations, orders, strict=True):
        dates, counts = conversation.session_dates, Counter(turn.session for turn in conversation.turns)
        offsets = {number: (day(k) - dates[number].date()).days for k, number in enumerate(order)}
        placed.sessions.append({number: (k,) for k, number in enumerate(order)})
        placed.offsets.append(offsets)
        placed.years.append(0)
        placed.dated.append([(dates[number].date(), offsets[number]) for number in order])
        for k, number in enumerate(order):
            moved = dates[number] + timedelta(days=offsets[number])
            earliest[k] = min(earliest.get(k, moved), moved)
            longest[k] = max(longest[k], counts[number])
    for k in range(len(earliest)):
        after = placed.starts[(k - 1,)] + timedelta(minutes=longest[k - 1]) if k else earliest[k]
        placed.starts[(k,)] = max(earliest[k], after)
    for index, conversation in enumerate(conversations):
        seen: Counter[int] = Counter()
        times = []
        for turn in conversation.turns:
            start = placed.starts[placed.sessions[index][turn.session]]
            times.append(start + timedelta(minutes=seen[turn.session], seconds=index))
            seen[turn.session] += 1
        placed.times.append(times)
    return placed


_PLACES: dict[str, Callable[[Sequence[locomo.Conversation]], _Placed]] = {
    "interleaved": _interleaved,
    "threads": _threads,
    "threaded": _interleaved,
}


def source_of(message_id: str) -> str:
    """The conversation a channel message or evidence id (``<conversation>:<turn>``)
    comes from. Pure."""
    return message_id.split(":", 1)[0]


def build_channel(conversations: Sequence[locomo.Conversation], *, layout: str = "interleaved", cast: str = "ring") -> Channel:
    """One channel of ``conversations`` in ``layout`` (one of ``LAYOUTS``) with the ``cast``
    rule (one of ``CASTS``), by the rule of the module docstring. Pure."""
    if layout not in _PLACES:
        raise ValidationError("layout", f"must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    names = cast_names(conversations, cast)
    _check(conversations)
    placed = _PLACES[layout](conversations)

    def moved(index: int, texts: Sequence[str], evidence: Sequence[str] = ()) -> list[str]:
        """``texts`` of conversation ``index`` as the channel writes them (a question and its
        answer with their ``evidence``: its sessions and days are worked out once)."""
        dated, days = placed.dated[index], list[date]()
        if evidence and dated:
            sessions, days = asked_about(conversations[index], evidence, placed.offsets[index])
            dated = sessions or dated
        return [move_dates(rewrite(text, names[index], placed.years[index]), dated, days) for text in texts]

    def asked(index: int, question: locomo.Question) -> locomo.Question:
        text, answer = moved(index, [question.question, question.answer], question.evidence)
        evidence = tuple(f"{conversations[index].name}:{e}" for e in question.evidence)
        return locomo.Question(text, answer, evidence, question.category)

    order: list[tuple[datetime, int, int, locomo.Turn]] = []  # time, conversation, position, turn
    for index, conversation in enumerate(conversations):
        for position, (turn, at) in enumerate(zip(conversation.turns, placed.times[index], strict=True)):
            was = turn.message
            message = dataclasses.replace(
                was,
                platform_message_id=f"{conversation.name}:{turn.dia_id}",
                speaker_id=names[index].get(was.speaker_id, was.speaker_id),
                speaker_name=names[index].get(was.speaker_name, was.speaker_name),
                text=moved(index, [was.text])[0],
                message_time=at,
                edited_at=was.edited_at + (at - was.message_time) if was.edited_at else None,
            )
            order.append((at, index, position, dataclasses.replace(turn, message=message)))
    order.sort(key=lambda item: item[:3])
    numbers = {key: n for n, (_, key) in enumerate(sorted((start, key) for key, start in placed.starts.items()), start=1)}
    roots: dict[int, str] = {}
    turns = []
    for _, index, _, turn in order:
        own = turn.message.platform_message_id
        root = roots.setdefault(index, own) if layout != "interleaved" else None
        message = dataclasses.replace(turn.message, thread_id=root, reply_to=None if root in (None, own) else root)
        turns.append(locomo.Turn(own, numbers[placed.sessions[index][turn.session]], message))
    questions = [asked(i, q) for i, c in enumerate(conversations) for q in c.questions]
    channel = locomo.Conversation(
        name="group-" + "-".join(c.name for c in conversations),
        speakers=tuple(dict.fromkeys(name for thread in names for name in thread.values())),
        turns=turns,
        questions=questions,
        session_dates={numbers[key]: start for key, start in placed.starts.items()},
    )
    threads = tuple(
        Thread(c.name, roots.get(i), names[i], placed.years[i], placed.offsets[i]) for i, c in enumerate(conversations)
    )
    return Channel(channel, threads)


def _check(conversations: Sequence[locomo.Conversation]) -> None:
    """Refuse what no layout can place: no conversation, or one without session dates."""
    if not conversations:
        raise ValidationError("conversations", "a channel needs at least one conversation")
    for conversation in conversations:
        if not conversation.session_dates:
            raise ValidationError("session_dates", f"conversation {conversation.name} has no session date")
        if undated := sorted({turn.session for turn in conversation.turns} - set(conversation.session_dates)):
            raise ValidationError(
                "session_dates", f"conversation {conversation.name} has turns in sessions without a date: {undated}"
            )


def split_channels(
    conversations: Sequence[locomo.Conversation],
    splits: Mapping[str, Sequence[str]],
    *,
    layout: str = "interleaved",
    cast: str = "ring",
) -> dict[str, Channel]:
    """One channel per split of ``splits`` with a conversation among ``conversations``: the
    split's conversations that are there, in the split's order, in ``layout`` with the
    ``cast`` rule. Pure."""
    by_name = {c.name: c for c in conversations}
    chosen = {split: [by_name[n] for n in names if n in by_name] for split, names in splits.items()}
    return {split: build_channel(present, layout=layout, cast=cast) for split, present in chosen.items() if present}
