"""Dates in messages and in queries, resolved to day ranges; what a question asks of time.

A message says "we went camping last week"; recall knows when it was said, so the event falls in the week
before that day. A question asks "what did Melanie paint in October 2023?"; the answer was said in October
2023, or talks about it. This module turns both into half-open ranges of days so recall can prefer the
messages whose time matches the question's. The forms read are listed in :mod:`.dates` (ISO,
``dd.mm.yyyy``, ``mm/dd/yyyy`` where unambiguous, ``2023/05/20 (Sat)``, month and weekday names,
relative expressions); this module adds what only a question says:

* :func:`mentions` resolves the date expressions of a message against the time it was said.
* :func:`query_ranges` finds the days a query names: the message forms (relative ones against ``now``,
  a day and month without a year in now's year or every year of the archive), plus ``summer 2021``,
  ``the beginning of November 2022``, ``the week before August 3, 2023``, a month alone (``in June``:
  every year recall has messages of) and month ranges (``from July to October``, ``between May and July``).
* :func:`asks_when` tells whether a query asks for a time ("When did...", "What year...");
  :func:`asks_order` whether it asks for the newest state of something ("what is my current...") or
  the oldest ("what did I have before...").

Everything is deterministic, never raises on any text, and works in whole days (UTC dates of the aware
datetimes it is given). Ranges are ``(first_day, end_day)`` as proleptic ordinals (``date.toordinal()``),
end exclusive.

Example::

    said = datetime(2023, 6, 27, 10, 37, tzinfo=timezone.utc)
    mentions("We went camping last week!", said)     # [(ordinal of 2023-06-19, ordinal of 2023-06-26)]
    query_ranges("What did Caroline do in June?", years=(2023, 2023))  # [(2023-06-01, 2023-07-01)]
"""

from __future__ import annotations

import re
from datetime import date, datetime

from .dates import MONTHS, SEASONS, DayRange, absolute, day_range, month_range, relative

__all__ = ["DayRange", "asks_order", "asks_when", "day_range", "mentions", "query_ranges"]

_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_SEASON_YEAR = re.compile(rf"\b(?P<season>{'|'.join(SEASONS)})\s+(?:of\s+)?{_YEAR}\b", re.I)
_PART_OF = re.compile(
    rf"\b(?P<part>beginning|start|early|middle|mid|end|late)\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I
)
_BEFORE = re.compile(r"\b(?:before|prior to|leading up to)\s*$", re.I)
_MONTH_ONLY = re.compile(rf"\b(?:in|during|of|since|by|for|this|last|early|late|mid)\s+{_MONTH}\b(?!\s*,?\s*\d)", re.I)
_FIRST_MONTH = _MONTH.replace("<month>", "<first>")
_MONTH_SPAN = re.compile(
    rf"\b(?:from|between)\s+{_FIRST_MONTH}\s+(?:to|and|through|until|till)\s+{_MONTH}\b(?!\s*,?\s*\d)", re.I
)
_WHEN = re.compile(
    r"^\s*(?:when\b|what (?:year|month|date|day|time)\b|which (?:year|month|day)\b|how long ago\b|"
    r"in which (?:year|month)\b|on what date\b|at what time\b)",
    re.I,
)
#: A week and a half before the date: "the week before August 3, 2023" and the days leading up to it.
BEFORE_PAD = 14


def mentions(text: str, said: datetime | date) -> list[DayRange]:
    """The days the date expressions of ``text`` refer to, resolved against when it was ``said``."""
    anchor = said.date() if isinstance(said, datetime) else said
    spans: list[tuple[int, int]] = []
    try:
        out = [found for found, _ in absolute(text, spans, (anchor.year,))]
        out += [found for found, _ in relative(text, anchor, spans)]
    except (ValueError, OverflowError):  # a date out of range: nothing is read from this text
        return []
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
    anchor = (now.date() if isinstance(now, datetime) else now) if now is not None else None
    every = list(range(years[0], min(years[1], years[0] + 50) + 1)) if years is not None else []
    out: list[DayRange] = []
    try:
        spans: list[tuple[int, int]] = []
        for pattern, kind in ((_SEASON_YEAR, "season"), (_PART_OF, "part")):
            for match in pattern.finditer(text):
                spans.append(match.span())
                out.append(_season_or_part(match.groupdict(), kind))
        for found, (start, _) in absolute(text, spans, (anchor.year,) if anchor is not None else every):
            if _BEFORE.search(text[:start]):  # "the week before August 3, 2023": the time leading up to it
                found = (found[0] - BEFORE_PAD, found[0] + 1)
            out.append(found)
        for match in _MONTH_SPAN.finditer(text):
            if any(s <= match.start() < e for s, e in spans):
                continue
            spans.append(match.span())
            first = MONTHS[match.group("first").lower().rstrip(".")]
            last = MONTHS[match.group("month").lower().rstrip(".")]
            for year in every:
                start_range = month_range(year, first)
                end_range = month_range(year + (last < first), last)
                out.append((start_range[0], end_range[1]))
        for match in _MONTH_ONLY.finditer(text) if every else ():
            if any(s <= match.start() < e for s, e in spans):
                continue
            month = MONTHS[match.group("month").lower().rstrip(".")]
            out.extend(month_range(y, month) for y in every)
        if anchor is not None:
            out += [found for found, _ in relative(text, anchor, spans, weekdays="past")]
    except (ValueError, OverflowError):
        pass
    return out


def _season_or_part(groups: dict[str, str | None], kind: str) -> DayRange:
    year = int(groups["year"] or 0)
    if kind == "season":
        first, last = SEASONS[(groups["season"] or "").lower()]
        return day_range(date(year, first, 1), date(year + (last > 12), (last - 1) % 12 + 1, 1))
    month = MONTHS[(groups["month"] or "").lower().rstrip(".")]
    start, end = month_range(year, month)
    part = (groups["part"] or "").lower()
    if part in ("beginning", "start", "early"):
        return start, start + 11
    if part in ("end", "late"):
        return end - 11, end
    return start + 9, start + 21


_NEWEST = re.compile(
    r"\b(?:currently|current|now|these days|nowadays|at the moment|most recent(?:ly)?|latest|newest|"
    r"(?:the )?last time|still|anymore|any more)\b",
    re.I,
)
_OLDEST = re.compile(
    r"\b(?:before|previous(?:ly)?(?!\s+(?:conversation|chat|discussion|session)s?\b)|originally|original|"
    r"initially|at first|first time|used to|formerly|earliest|oldest|in the beginning)\b",
    re.I,
)


def asks_order(text: str) -> str | None:
    """Whether ``text`` asks for the newest state of something or the oldest: ``"newest"``, ``"oldest"`` or None.

    "What is my current...", "my most recent...", "do I still..." ask for the newest; "what did I have
    before...", "originally", "at first", "used to" for the oldest. A question with both (or neither) is None.
    """
    newest, oldest = _NEWEST.search(text) is not None, _OLDEST.search(text) is not None
    if newest == oldest:
        return None
    return "newest" if newest else "oldest"


def asks_when(text: str) -> bool:
    """Whether ``text`` asks for a time: "When did...", "What year...", "How long ago..."."""
    return _WHEN.search(text) is not None
