"""Dates in messages and in queries, resolved to day ranges.

A message says "we went camping last week"; recall knows when it was said,
so the event falls in the week before that day. A question asks "what did
Melanie paint in October 2023?"; the answer was said in October 2023, or
talks about it. This module turns both into half-open ranges of days so
recall can prefer the messages whose time matches the question's.

* :func:`mentions` resolves the date expressions of a message against the time it was said:
  ``yesterday``, ``today``, ``tonight``, ``tomorrow``, ``last night``,
  ``last``/``this``/``next`` ``week``/``weekend``/``month``/``year``/season/weekday,
  ``N days|weeks|weekends|months|years ago``, ``the other day``, and absolute dates
  (``8 May 2023``, ``May 8, 2023``, ``May 2023``, ``in 2022``).
* :func:`query_ranges` finds the dates a query names: absolute ones as above, a month
  without a year (every year recall has messages of), ``summer 2021``, ``the beginning of
  November 2022``, ``the week before August 3, 2023``, and relative ones against ``now``.
* :func:`asks_when` tells whether a query asks for a time ("When did...", "What year...").

Everything is deterministic, never raises on any text, and works in whole days (UTC dates of
the aware datetimes it is given). Ranges are ``(first_day, end_day)`` as proleptic ordinals
(``date.toordinal()``), end exclusive.

Example::

    said = datetime(2023, 6, 27, 10, 37, tzinfo=timezone.utc)
    mentions("We went camping last week!", said)     # [(ordinal of 2023-06-19, ordinal of 2023-06-26)]
    query_ranges("What did Caroline do in June?", years=(2023, 2023))  # [(2023-06-01, 2023-07-01)]
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, timedelta

__all__ = ["DayRange", "asks_when", "day_range", "mentions", "query_ranges"]

DayRange = tuple[int, int]  # (first day, end day), proleptic ordinals, end exclusive

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
SEASONS = {"spring": (3, 6), "summer": (6, 9), "fall": (9, 12), "autumn": (9, 12), "winter": (12, 15)}
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
    "a few": 3,
    "few": 3,
    "a couple of": 2,
    "couple of": 2,
    "several": 4,
}

_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_COUNT = r"(?P<count>\d+|" + "|".join(sorted(NUMBERS, key=len, reverse=True)) + ")"
_UNIT = r"(?P<unit>day|week|weekend|month|year)s?"
_WHICH = r"(?P<which>last|this|next|this past|past|coming)"
_WHAT = r"(?P<what>week|weekend|month|year|night|morning|evening|afternoon|" + "|".join(WEEKDAYS) + "|"
_WHAT += "|".join(SEASONS) + ")"

_ABSOLUTE = [
    re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}\b", re.I),  # 8 May 2023, 8th of May, 2023
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I),  # May 8, 2023
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I),  # May 2023
    re.compile(rf"\b(?:in|since|during|of|by|from|year)\s+{_YEAR}\b", re.I),  # in 2022
]
_RELATIVE = [
    re.compile(rf"\b{_WHICH}\s+{_WHAT}\b", re.I),
    re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.I),
    re.compile(r"\b(?P<word>yesterday|today|tonight|tomorrow|the other day|the day before yesterday)\b", re.I),
]
_SEASON_YEAR = re.compile(rf"\b(?P<season>{'|'.join(SEASONS)})\s+(?:of\s+)?{_YEAR}\b", re.I)
_PART_OF = re.compile(
    rf"\b(?P<part>beginning|start|early|middle|mid|end|late)\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I
)
_BEFORE = re.compile(r"\b(?:before|prior to|leading up to)\s*$", re.I)
_MONTH_ONLY = re.compile(rf"\b(?:in|during|of|since|by|for|this|last|early|late|mid)\s+{_MONTH}\b(?!\s*,?\s*\d)", re.I)
_WHEN = re.compile(
    r"^\s*(?:when\b|what (?:year|month|date|day|time)\b|which (?:year|month|day)\b|how long ago\b|"
    r"in which (?:year|month)\b|on what date\b|at what time\b)",
    re.I,
)


def day_range(start: date, end: date) -> DayRange:
    """``[start, end)`` as ordinals."""
    return start.toordinal(), end.toordinal()


def _month_range(year: int, month: int) -> DayRange:
    first = date(year, month, 1)
    following = date(year + (month == 12), month % 12 + 1, 1)
    return day_range(first, following)


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _absolute(text: str, out: list[DayRange], *, before_pad: int) -> list[tuple[int, int]]:
    """Append the absolute dates of ``text``; returns the character spans they used."""
    spans: list[tuple[int, int]] = []
    for pattern in _ABSOLUTE:
        for match in pattern.finditer(text):
            if any(s <= match.start() < e for s, e in spans):
                continue
            groups = match.groupdict()
            year = int(groups["year"])
            month = MONTHS.get((groups.get("month") or "").lower().rstrip("."))
            day = groups.get("day")
            if month and day:
                when = _safe_date(year, month, int(day))
                if when is None:
                    continue
                found = day_range(when, when + timedelta(days=1))
            elif month:
                found = _month_range(year, month)
            else:
                found = day_range(date(year, 1, 1), date(year + 1, 1, 1))
            if before_pad and _BEFORE.search(text[: match.start()]):
                # "the week before August 3, 2023": the time leading up to the date.
                found = (found[0] - before_pad, found[0] + 1)
            spans.append(match.span())
            out.append(found)
    return spans


def _relative(text: str, anchor: date, out: list[DayRange], spans: list[tuple[int, int]]) -> None:
    day = anchor.toordinal()
    for pattern in _RELATIVE:
        for match in pattern.finditer(text):
            if any(s <= match.start() < e for s, e in spans):
                continue
            found = _resolve(match.groupdict(), anchor, day)
            if found is not None:
                out.append(found)


def _resolve(groups: dict[str, str | None], anchor: date, day: int) -> DayRange | None:
    word = (groups.get("word") or "").lower()
    if word:
        offset = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1, "the day before yesterday": -2}.get(word)
        if offset is not None:
            return day + offset, day + offset + 1
        return day - 7, day  # "the other day"
    if groups.get("unit"):
        raw = (groups.get("count") or "").lower()
        count = int(raw) if raw.isdigit() else NUMBERS.get(raw, 1)
        unit = (groups.get("unit") or "").lower()
        return _ago(anchor, count, unit)
    which = " ".join((groups.get("which") or "").lower().split())
    what = (groups.get("what") or "").lower()
    step = {"last": -1, "past": -1, "this past": -1, "this": 0, "next": 1, "coming": 1}[which]
    return _named(anchor, day, step, what)


def _ago(anchor: date, count: int, unit: str) -> DayRange | None:
    day = anchor.toordinal()
    if count > 200:
        return None
    if unit == "day":
        return day - count, day - count + 1
    if unit in ("week", "weekend"):
        middle = day - 7 * count
        return middle - 3, middle + 4
    if unit == "month":
        month = anchor.month - count
        year = anchor.year + (month - 1) // 12
        return _month_range(year, (month - 1) % 12 + 1) if year >= 1 else None
    year = anchor.year - count
    return day_range(date(year, 1, 1), date(year + 1, 1, 1)) if year >= 1 else None


def _named(anchor: date, day: int, step: int, what: str) -> DayRange | None:
    monday = day - anchor.weekday()
    if what in ("night", "morning", "evening", "afternoon"):
        return (day - 1, day) if step < 0 else (day, day + 1) if step == 0 else (day + 1, day + 2)
    if what == "week":
        return monday + 7 * step, monday + 7 * step + 7
    if what == "weekend":
        saturday = monday + 5 + 7 * step
        return saturday, saturday + 2
    if what == "month":
        month = anchor.month + step
        year = anchor.year + (month - 1) // 12
        return _month_range(year, (month - 1) % 12 + 1)
    if what == "year":
        year = anchor.year + step
        return day_range(date(year, 1, 1), date(year + 1, 1, 1))
    if what in SEASONS:
        first, last = SEASONS[what]
        year = anchor.year + step
        if step < 0 and anchor.month >= last:  # "last summer" said in October is this year's
            year += 1
        start = date(year, first, 1)
        end = date(year + (last > 12), (last - 1) % 12 + 1, 1)
        return day_range(start, end)
    weekday = WEEKDAYS.get(what)
    if weekday is None:
        return None
    if step < 0:  # "last Friday": the most recent Friday before today
        back = (anchor.weekday() - weekday) % 7 or 7
        return day - back, day - back + 1
    if step > 0:
        ahead = (weekday - anchor.weekday()) % 7 or 7
        return day + ahead, day + ahead + 1
    return monday + weekday, monday + weekday + 1


def mentions(text: str, said: datetime | date) -> list[DayRange]:
    """The days the date expressions of ``text`` refer to, resolved against when it was ``said``."""
    anchor = said.date() if isinstance(said, datetime) else said
    out: list[DayRange] = []
    try:
        spans = _absolute(text, out, before_pad=0)
        _relative(text, anchor, out, spans)
    except (ValueError, OverflowError):  # a date out of range: what was found so far stands
        pass
    return out


def query_ranges(
    text: str, *, now: datetime | date | None = None, years: tuple[int, int] | None = None
) -> list[DayRange]:
    """The days a query names.

    Args:
        text: the query.
        now: resolves relative expressions ("last week"); without it they are ignored.
        years: the first and last year the archive covers, for a month named without a year.
    """
    out: list[DayRange] = []
    try:
        spans: list[tuple[int, int]] = []
        for pattern, kind in ((_SEASON_YEAR, "season"), (_PART_OF, "part")):
            for match in pattern.finditer(text):
                spans.append(match.span())
                out.append(_season_or_part(match.groupdict(), kind))
        spans += _absolute(_blank(text, spans), out, before_pad=14)
        if years is not None:
            for match in _MONTH_ONLY.finditer(text):
                if any(s <= match.start() < e for s, e in spans):
                    continue
                month = MONTHS[match.group("month").lower().rstrip(".")]
                out.extend(_month_range(y, month) for y in range(years[0], min(years[1], years[0] + 50) + 1))
        if now is not None:
            anchor = now.date() if isinstance(now, datetime) else now
            _relative(text, anchor, out, spans)
    except (ValueError, OverflowError):
        pass
    return out


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    for start, end in spans:
        text = text[:start] + " " * (end - start) + text[end:]
    return text


def _season_or_part(groups: dict[str, str | None], kind: str) -> DayRange:
    year = int(groups["year"] or 0)
    if kind == "season":
        first, last = SEASONS[(groups["season"] or "").lower()]
        return day_range(date(year, first, 1), date(year + (last > 12), (last - 1) % 12 + 1, 1))
    month = MONTHS[(groups["month"] or "").lower().rstrip(".")]
    start, end = _month_range(year, month)
    part = (groups["part"] or "").lower()
    if part in ("beginning", "start", "early"):
        return start, start + 11
    if part in ("end", "late"):
        return end - 11, end
    return start + 9, start + 21


def asks_when(text: str) -> bool:
    """Whether ``text`` asks for a time: "When did...", "What year...", "How long ago..."."""
    return _WHEN.search(text) is not None
