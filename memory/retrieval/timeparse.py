"""Relative time expressions in a question resolved against the question date.

Pure and deterministic: ``resolve_times("what did Ann do last week?", date)`` gives the
explicit ranges retrieval uses to boost messages from that time. Ranges are half-open
``[start, end)`` in the question date's time zone (UTC when naive).

Conventions (what a careful reader would expect):
- "last week/month/year" is the previous calendar week (Monday start), month or year;
  "this ..." is the current one up to its end.
- "last Friday" is the most recent Friday strictly before the question date;
  "on Friday" / "Friday" alone is the same, because questions look back.
- "in May" without a year is the most recent May that has begun by the question date.
- "3 weeks ago" is the whole calendar week three weeks back; "3 days ago" that day.
- "in the last/past N days|weeks|months" runs from N units back to the question date.
- "two days before the concert" cannot be resolved without knowing when the concert
  was: it becomes an ``AnchoredOffset`` whose anchor phrase retrieval searches for; the
  range is resolved around the anchor's message time by ``resolve_anchor``. When no
  anchor is found the fallback is no time boost (the anchor phrase still serves as a
  query), never a guessed date.
- An expression whose range would leave the calendar (``last year`` asked on
  0001-01-01, ``tomorrow`` around 9999-12-31) resolves to nothing rather than failing
  the question.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone, tzinfo

MONTHS = {name.lower(): index for index, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): index for index, name in enumerate(calendar.month_abbr) if name})
WEEKDAYS = {name.lower(): index for index, name in enumerate(calendar.day_name)}
NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 3,
}
UNITS = ("day", "week", "month", "year")

_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_WEEKDAY = r"(?P<weekday>" + "|".join(WEEKDAYS) + r")"
_NUMBER = r"(?P<number>\d+|" + "|".join(sorted((re.escape(n) for n in NUMBERS), key=len, reverse=True)) + r")"
_UNIT = r"(?P<unit>day|week|month|year)s?"

_PAST_WORDS = re.compile(
    r"\b(used to|before|previous(ly)?|former(ly)?|originally|at first|in the past|earlier|"
    r"back (then|when|in)|prior|no longer|anymore|any more|until|ago|history|changed?)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class TimeRange:
    start: datetime
    end: datetime
    expression: str

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


@dataclass(frozen=True)
class AnchoredOffset:
    """``days`` (negative: before) relative to the event ``anchor``, within ``slack_days``."""

    anchor: str
    days: int
    slack_days: int
    expression: str


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _day_start(day: date, tz: tzinfo | None) -> datetime:
    return datetime.combine(day, time(), tzinfo=tz)


def _days(start: date, end: date, tz: tzinfo | None, expression: str) -> TimeRange:
    return TimeRange(_day_start(start, tz), _day_start(end, tz), expression)


def _month_start(year: int, month: int) -> date:
    while month < 1:
        month, year = month + 12, year - 1
    while month > 12:
        month, year = month - 12, year + 1
    return date(year, month, 1)


def _month(year: int, month: int, tz: tzinfo | None, expression: str) -> TimeRange:
    return _days(_month_start(year, month), _month_start(year, month + 1), tz, expression)


def _number(value: str) -> int:
    return int(value) if value.isdigit() else NUMBERS[value.lower()]


def _unit_range(today: date, unit: str, back: int, tz: tzinfo | None, expression: str) -> TimeRange:
    """The calendar ``unit`` that lies ``back`` units before the one holding ``today``."""
    if unit == "day":
        day = today - timedelta(days=back)
        return _days(day, day + timedelta(days=1), tz, expression)
    if unit == "week":
        monday = today - timedelta(days=today.weekday()) - timedelta(weeks=back)
        return _days(monday, monday + timedelta(weeks=1), tz, expression)
    if unit == "month":
        return _month(today.year, today.month - back, tz, expression)
    return _days(date(today.year - back, 1, 1), date(today.year - back + 1, 1, 1), tz, expression)


def _span_back(today: date, unit: str, count: int, tz: tzinfo | None, expression: str) -> TimeRange:
    """From ``count`` units before ``today`` up to the end of today."""
    if unit == "day":
        start = today - timedelta(days=count)
    elif unit == "week":
        start = today - timedelta(weeks=count)
    elif unit == "month":
        first = _month_start(today.year, today.month - count)
        start = first.replace(day=min(today.day, calendar.monthrange(first.year, first.month)[1]))
    else:
        start = (
            today.replace(year=today.year - count)
            if not (today.month == 2 and today.day == 29)
            else date(today.year - count, 2, 28)
        )
    return _days(start, today + timedelta(days=1), tz, expression)


_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?P<year>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})\b"), "iso"),
    (re.compile(r"\b(?P<day>\d{1,2})(st|nd|rd|th)?(\s+of)?\s+" + _MONTH + r",?\s+(?P<year>\d{4})\b", re.I), "day_month_year"),
    (re.compile(r"\b" + _MONTH + r"\s+(?P<day>\d{1,2})(st|nd|rd|th)?,?\s+(?P<year>\d{4})\b", re.I), "day_month_year"),
    (re.compile(r"\b" + _MONTH + r",?\s+(?P<year>\d{4})\b", re.I), "month_year"),
    (re.compile(r"\b(?P<day>\d{1,2})(st|nd|rd|th)?\s+of\s+" + _MONTH + r"\b", re.I), "day_month"),
    (re.compile(r"\b" + _MONTH + r"\s+(?P<day>\d{1,2})(st|nd|rd|th)?\b", re.I), "day_month"),
    (
        re.compile(
            r"\b"
            + _NUMBER
            + r"\s+"
            + _UNIT
            + r"\s+(?P<dir>before|after)\s+(?P<anchor>(the|my|his|her|their|our|a|an)\s+[\w' -]+?)(?=[?.!,;]|$)",
            re.I,
        ),
        "anchored",
    ),
    (
        re.compile(
            r"\b(the\s+)?(?P<dir>day|week|month|year)\s+(?P<rel>before|after)\s+"
            r"(?P<anchor>(the|my|his|her|their|our|a|an)\s+[\w' -]+?)(?=[?.!,;]|$)",
            re.I,
        ),
        "anchored_unit",
    ),
    (re.compile(r"\bthe day before yesterday\b", re.I), "before_yesterday"),
    (re.compile(r"\byesterday\b", re.I), "yesterday"),
    (re.compile(r"\btoday\b|\btonight\b|\bthis (morning|afternoon|evening)\b", re.I), "today"),
    (re.compile(r"\b(in|within|over|during)\s+the\s+(last|past)\s+" + _NUMBER + r"\s+" + _UNIT, re.I), "span_back"),
    (re.compile(r"\b(in|within|over|during)\s+the\s+(last|past)\s+" + _UNIT, re.I), "span_back_one"),
    (re.compile(r"\b" + _NUMBER + r"\s+" + _UNIT + r"\s+ago\b", re.I), "ago"),
    (re.compile(r"\b(?P<which>last|this|next|previous)\s+weekend\b", re.I), "weekend"),
    (re.compile(r"\b(?P<which>last|this|previous)\s+(?P<unit>week|month|year)\b", re.I), "relative_unit"),
    (re.compile(r"\bearlier this (?P<unit>week|month|year)\b", re.I), "relative_unit_this"),
    (re.compile(r"\b(?P<which>last|this|on|previous)?\s*" + _WEEKDAY + r"\b", re.I), "weekday"),
    (re.compile(r"\b(in|during|since|of|from)\s+" + _MONTH + r"\b", re.I), "month"),
    (re.compile(r"\b(in|during|since|of|from)\s+(?P<year>(19|20)\d{2})\b", re.I), "year"),
]


def _resolve(kind: str, match: re.Match[str], now: datetime) -> TimeRange | AnchoredOffset | None:
    tz = now.tzinfo
    today = now.date()
    text = match.group(0).strip()
    groups = match.groupdict()
    if kind == "iso":
        try:
            day = date(int(groups["year"]), int(groups["m"]), int(groups["d"]))
        except ValueError:
            return None
        return _days(day, day + timedelta(days=1), tz, text)
    if kind in ("day_month_year", "day_month"):
        month = MONTHS[groups["month"].lower()]
        year = int(groups["year"]) if groups.get("year") else today.year
        try:
            day = date(year, month, int(groups["day"]))
            if not groups.get("year") and day > today:
                day = date(year - 1, month, int(groups["day"]))
        except ValueError:
            return None
        return _days(day, day + timedelta(days=1), tz, text)
    if kind == "month_year":
        return _month(int(groups["year"]), MONTHS[groups["month"].lower()], tz, text)
    if kind == "anchored":
        count = _number(groups["number"])
        days = count * {"day": 1, "week": 7, "month": 30, "year": 365}[groups["unit"].lower()]
        sign = -1 if groups["dir"].lower() == "before" else 1
        slack = 0 if groups["unit"].lower() == "day" else max(1, days // 7)
        return AnchoredOffset(groups["anchor"].strip(), sign * days, slack, text)
    if kind == "anchored_unit":
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[groups["dir"].lower()]
        sign = -1 if groups["rel"].lower() == "before" else 1
        return AnchoredOffset(groups["anchor"].strip(), sign * days, 0 if days == 1 else days // 2, text)
    if kind == "before_yesterday":
        return _unit_range(today, "day", 2, tz, text)
    if kind == "yesterday":
        return _unit_range(today, "day", 1, tz, text)
    if kind == "today":
        return _unit_range(today, "day", 0, tz, text)
    if kind == "span_back":
        return _span_back(today, groups["unit"].lower(), _number(groups["number"]), tz, text)
    if kind == "span_back_one":
        return _span_back(today, groups["unit"].lower(), 1, tz, text)
    if kind == "ago":
        return _unit_range(today, groups["unit"].lower(), _number(groups["number"]), tz, text)
    if kind == "weekend":
        which = groups["which"].lower()
        saturday = today + timedelta(days=5 - today.weekday())
        if which in ("last", "previous"):
            saturday -= timedelta(weeks=1)
        elif which == "next":
            saturday += timedelta(weeks=1)
        return _days(saturday, saturday + timedelta(days=2), tz, text)
    if kind == "relative_unit":
        back = 0 if groups["which"].lower() == "this" else 1
        return _unit_range(today, groups["unit"].lower(), back, tz, text)
    if kind == "relative_unit_this":
        current = _unit_range(today, groups["unit"].lower(), 0, tz, text)
        return TimeRange(current.start, _day_start(today + timedelta(days=1), tz), text)
    if kind == "weekday":
        weekday = WEEKDAYS[groups["weekday"].lower()]
        which = (groups.get("which") or "").lower()
        if which == "this":
            day = today - timedelta(days=today.weekday()) + timedelta(days=weekday)
        else:
            back = (today.weekday() - weekday) % 7 or 7
            day = today - timedelta(days=back)
        return _days(day, day + timedelta(days=1), tz, text)
    if kind == "month":
        month = MONTHS[groups["month"].lower()]
        year = today.year if month <= today.month else today.year - 1
        if text.lower().startswith("since"):
            return TimeRange(_day_start(date(year, month, 1), tz), _day_start(today + timedelta(days=1), tz), text)
        return _month(year, month, tz, text)
    if kind == "year":
        year = int(groups["year"])
        if text.lower().startswith("since"):
            return TimeRange(_day_start(date(year, 1, 1), tz), _day_start(today + timedelta(days=1), tz), text)
        return _days(date(year, 1, 1), date(year + 1, 1, 1), tz, text)
    raise AssertionError(kind)


def resolve_times(question: str, question_date: datetime) -> list[TimeRange | AnchoredOffset]:
    """Every time expression in ``question``, left to right; overlapping matches go to
    the rule listed first (the more specific one)."""
    now = _aware(question_date)
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, TimeRange | AnchoredOffset]] = []
    for pattern, kind in _RULES:
        for match in pattern.finditer(question):
            span = match.span()
            if any(span[0] < end and start < span[1] for start, end in taken):
                continue
            if kind == "weekday" and not match.group("weekday"):
                continue
            try:
                resolved = _resolve(kind, match, now)
            except (OverflowError, ValueError):  # the range would leave years 1 to 9999
                resolved = None
            if resolved is not None:
                taken.append(span)
                found.append((span[0], resolved))
    return [value for _, value in sorted(found, key=lambda item: item[0])]


def resolve_anchor(offset: AnchoredOffset, anchor_time: datetime) -> TimeRange | None:
    """The range ``offset`` denotes once its anchor event's time is known (None when it
    would leave years 1 to 9999)."""
    tz = _aware(anchor_time).tzinfo
    try:
        day = _aware(anchor_time).date() + timedelta(days=offset.days)
        return _days(day - timedelta(days=offset.slack_days), day + timedelta(days=offset.slack_days + 1), tz, offset.expression)
    except OverflowError:
        return None


def asks_about_past(question: str, ranges: list[TimeRange | AnchoredOffset], question_date: datetime) -> bool:
    """True when the question is about earlier states of affairs, so superseded facts
    should not be ranked below current ones: past-marking words, or a time range that
    ends before the question's day."""
    if _PAST_WORDS.search(question):
        return True
    today_start = _day_start(_aware(question_date).date(), _aware(question_date).tzinfo)
    return any(isinstance(r, TimeRange) and r.end <= today_start for r in ranges)


_ASKS_WHEN = re.compile(r"^\W*(when\b|what (date|day|time|year|month)\b|how long ago\b|since when\b)", re.IGNORECASE)


def asks_when(question: str) -> bool:
    """True when the answer is a time ("When did ...?", "What year ...?")."""
    return bool(_ASKS_WHEN.search(question))


def states_time(text: str, said_at: datetime) -> bool:
    """True when a message names a time (a date, a weekday, "last year"): the kind of
    message that answers a question asking when."""
    return bool(resolve_times(text, said_at))
