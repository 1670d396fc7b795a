"""Date expressions in a text, resolved to day ranges against an anchor day (when it was said, or "now").

In: a text and its anchor day. Out: half-open ranges of days ``(first, end)`` as proleptic ordinals, each
with the character span it was read from, so a caller can leave those characters to no other reading.

The forms read (each has a test in ``tests/longterm/test_dates.py``):

=============================  ==========================================  ==================================
form                           examples                                    resolves to
=============================  ==========================================  ==================================
ISO date (and time)            ``2023-05-20``, ``2023-05-20T14:30``        that day
ISO month                      ``2023-05``                                 that month
year first, slashes            ``2023/05/20``, ``2023/05/20 (Sat) 02:21``  that day
day first, dots                ``20.05.2023``, ``5.6.2023``                that day (dd.mm.yyyy)
slashes, month or day first    ``05/20/2023``, ``20/05/2023``              that day, only where unambiguous
                                                                           (a part above 12 is the day;
                                                                           ``05/06/2023`` is not read)
day month year                 ``8 May 2023``, ``8th of May, 2023``        that day
month day year                 ``May 8, 2023``, ``May 8th 2023``           that day
month year, year               ``May 2023``, ``in 2022``                   that month, that year
day and month, no year         ``8 May``, ``May 8th``, ``the 8th of May``  that day in the year it was said
                                                                           (a question: now's year, else
                                                                           every year of the archive; the
                                                                           month name capitalized)
weekday                        ``on Saturday``, ``Saturday``               the nearest one before the anchor
                                                                           (or that day) and the one after
named days                     ``yesterday``, ``today``, ``tonight``,      relative to the anchor
                               ``tomorrow``, ``the day before yesterday``,
                               ``the day after tomorrow``, ``the other
                               day`` (the week before)
last / this / next ...         ``last week``, ``this weekend``, ``next     that week, weekend, month, year,
                               month``, ``last summer``, ``last Friday``,  season, weekday, night
                               ``earlier this year``, ``this morning``
... ago                        ``3 days ago``, ``a couple of weeks ago``   that day, week (+-3 days), month,
                                                                           year
in ... / ... from now          ``in two weeks``, ``a month from now``      as ``ago``, forward
in the last / past ...         ``in the last two months``, ``over the      from that long before the anchor
                               past 3 weeks``, ``within the last year``    to the anchor
=============================  ==========================================  ==================================

Everything is deterministic and never raises; an impossible day (``31 February, 2023``) is not read, and
what else the text says is. Query-only forms (seasons of a year, parts of a month, month ranges, a month
alone) are in :mod:`.temporal`.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import date, timedelta

__all__ = ["MONTHS", "DayRange", "Found", "absolute", "day_range", "month_range", "relative", "safe_date"]

DayRange = tuple[int, int]  # (first day, end day), proleptic ordinals, end exclusive
Found = tuple[DayRange, tuple[int, int]]  # a range and the character span it was read from

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
SEASONS = {"spring": (3, 6), "summer": (6, 9), "fall": (9, 12), "autumn": (9, 12), "winter": (12, 15)}
_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
NUMBERS = {"a": 1, "an": 1, **{word: i for i, word in enumerate(_WORDS, start=1)}}
NUMBERS.update({"a few": 3, "few": 3, "a couple of": 2, "a couple": 2, "couple of": 2, "several": 4})

_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_CAPITAL_MONTH = r"(?P<month>" + "|".join(n.capitalize() for n in sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_COUNT = r"(?P<count>\d+|" + "|".join(sorted(NUMBERS, key=len, reverse=True)) + ")"
_UNIT = r"(?P<unit>day|week|weekend|month|year)s?"
_WHICH = r"(?P<which>last|this|next|this past|past|coming|earlier this|later this)"
_WHAT = r"(?P<what>week|weekend|month|year|night|morning|evening|afternoon|" + "|".join(WEEKDAYS) + "|"
_WHAT += "|".join(SEASONS) + ")"

# Numeric forms first (their spans then keep the named forms off their digits); "(?<![\d./-])" and friends
# keep them off version numbers, decimals and longer digit runs. One pattern, one scan of the text.
_NUMERIC = re.compile(
    r"(?<![\d./-])(?:"
    r"(?P<iso>(?P<y1>(?:19|20)\d\d)-(?P<m1>\d\d)-(?P<d1>\d\d))(?:T\d\d:\d\d(?::\d\d)?)?(?![\d-])"
    r"|(?P<ymd>(?P<y2>(?:19|20)\d\d)/(?P<m2>\d{1,2})/(?P<d2>\d{1,2}))(?:\s*\([A-Za-z]{3}\))?(?![\d/])"
    r"|(?P<dots>(?P<d3>\d{1,2})\.(?P<m3>\d{1,2})\.(?P<y3>(?:19|20)\d\d))(?![\d.]\d)"
    r"|(?P<slashes>(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y4>(?:19|20)\d\d))(?![\d/])"
    r"|(?P<month>(?P<y5>(?:19|20)\d\d)-(?P<m5>0[1-9]|1[0-2]))(?![\d-])"
    r")"
)
_NAMED = re.compile(
    _DAY.replace("<day>", "<d1>")
    + r"(?:\s+of)?\s+"
    + _MONTH.replace("<month>", "<mo1>")
    + r",?\s+"
    + _YEAR.replace("<year>", "<y1>")  # 8 May 2023, 8th of May, 2023
    + "|"
    + _MONTH.replace("<month>", "<mo2>")
    + r"\s+"
    + _DAY.replace("<day>", "<d2>")
    + r",?\s+"
    + _YEAR.replace("<year>", "<y2>")  # May 8, 2023
    + "|"
    + _MONTH.replace("<month>", "<mo3>")
    + r",?\s+"
    + _YEAR.replace("<year>", "<y3>"),  # May 2023
    re.I,
)
_NAMED = re.compile(r"\b(?:" + _NAMED.pattern + r")\b", re.I)
_IN_YEAR = re.compile(rf"\b(?:in|since|during|of|by|from|year)\s+{_YEAR}\b", re.I)  # in 2022
_NO_YEAR = re.compile(
    r"\b(?:(?:the\s+)?"
    + _DAY.replace("<day>", "<d1>")
    + r"(?:\s+of)?\s+"
    + _CAPITAL_MONTH.replace("<month>", "<mo1>")
    + r"(?![a-z])|"
    + _CAPITAL_MONTH.replace("<month>", "<mo2>")
    + r"\s+"
    + _DAY.replace("<day>", "<d2>")
    + r"\b(?!\s*:))"  # 8 May, the 8th of May; May 8th (not "May 8:30")
)
_WEEKDAY = re.compile(r"\b(?:on\s+)?(?P<weekday>" + "|".join(d.capitalize() for d in WEEKDAYS) + r")\b")
# Each relative form with the words one of which it always holds: a text without any skips its scan.
_RELATIVE = [
    (
        re.compile(rf"\b(?P<since>in|over|within|during)\s+the\s+(?:last|past)\s+(?:{_COUNT}\s+)?{_UNIT}\b", re.I),
        ("the last", "the past"),
    ),
    (re.compile(rf"\b{_WHICH}\s+{_WHAT}\b", re.I), ("last", "this", "next", "past", "coming")),
    (re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+(?P<ago>ago|from now)\b", re.I), (" ago", "from now")),
    (re.compile(rf"\b(?P<ahead>in)\s+{_COUNT}\s+{_UNIT}\b(?!\s+ago)", re.I), ("day", "week", "month", "year")),
    (
        re.compile(
            r"\b(?P<word>yesterday|today|tonight|tomorrow|the other day|the day before yesterday|"
            r"the day after tomorrow)\b",
            re.I,
        ),
        ("yesterday", "today", "tonight", "tomorrow", "other day"),
    ),
]
_DIGIT = re.compile(r"\d")
_MONTH_STEMS = tuple(sorted({m[:3] for m in MONTHS}))
_CAPITAL_STEMS = tuple(m.capitalize() for m in _MONTH_STEMS)


def day_range(start: date, end: date) -> DayRange:
    """``[start, end)`` as ordinals."""
    return start.toordinal(), end.toordinal()


def month_range(year: int, month: int) -> DayRange:
    """The days of a month."""
    first = date(year, month, 1)
    following = date(year + (month == 12), month % 12 + 1, 1)
    return day_range(first, following)


def safe_date(year: int, month: int, day: int) -> date | None:
    """The date, or None if there is no such day."""
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _one_day(when: date | None) -> DayRange | None:
    return None if when is None else day_range(when, when + timedelta(days=1))


def _numeric(groups: dict[str, str | None]) -> DayRange | None:
    def number(name: str) -> int:
        return int(groups[name] or 0)

    if groups["iso"]:
        return _one_day(safe_date(number("y1"), number("m1"), number("d1")))
    if groups["ymd"]:
        return _one_day(safe_date(number("y2"), number("m2"), number("d2")))
    if groups["dots"]:
        return _one_day(safe_date(number("y3"), number("m3"), number("d3")))
    if groups["month"]:
        return month_range(number("y5"), number("m5"))
    first, second = number("a"), number("b")
    if first > 12 >= second:
        month, day = second, first  # 20/05/2023
    elif second > 12 >= first or first == second:
        month, day = first, second  # 05/20/2023
    else:
        return None  # 05/06/2023: May 6 or 5 June, said nowhere
    return _one_day(safe_date(number("y4"), month, day))


def _free(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    return not any(s < end and start < e for s, e in spans)


def absolute(text: str, spans: list[tuple[int, int]], years: Sequence[int] = ()) -> Iterator[Found]:
    """The absolute dates of ``text``; a day and month without a year are read in each of ``years``.

    ``spans`` holds the character spans already read (extended as dates are found here).
    """
    if _DIGIT.search(text) is None:
        return
    lower = text.lower()
    months = any(stem in lower for stem in _MONTH_STEMS)
    scans: list[tuple[re.Pattern[str], Callable[[dict[str, str | None]], DayRange | None]]] = [(_NUMERIC, _numeric)]
    if months:
        scans.append((_NAMED, _named))
    if "19" in text or "20" in text:
        scans.append((_IN_YEAR, _year))
    for pattern, read in scans:
        for match in pattern.finditer(text):
            found = read(match.groupdict())
            if found is not None and _free(spans, *match.span()):
                spans.append(match.span())
                yield found, match.span()
    if not (years and months and any(stem in text for stem in _CAPITAL_STEMS)):
        return
    for match in _NO_YEAR.finditer(text):
        if not _free(spans, *match.span()):
            continue
        groups = match.groupdict()
        month = MONTHS[(groups["mo1"] or groups["mo2"] or "").lower().rstrip(".")]
        day = int(groups["d1"] or groups["d2"] or 0)
        days = [d for y in years if (d := _one_day(safe_date(y, month, day)))]
        if days:
            spans.append(match.span())
            yield from ((d, match.span()) for d in days)


def _named(groups: dict[str, str | None]) -> DayRange | None:
    year = int(groups["y1"] or groups["y2"] or groups["y3"] or 0)
    month = MONTHS[(groups["mo1"] or groups["mo2"] or groups["mo3"] or "").lower().rstrip(".")]
    day = groups["d1"] or groups["d2"]
    found = _one_day(safe_date(year, month, int(day))) if day else None
    return found or month_range(year, month)  # an impossible day ("31 February, 2023"): its month


def _year(groups: dict[str, str | None]) -> DayRange:
    year = int(groups["year"] or 0)
    return day_range(date(year, 1, 1), date(year + 1, 1, 1))


def relative(text: str, anchor: date, spans: list[tuple[int, int]], *, weekdays: str = "both") -> Iterator[Found]:
    """The relative expressions of ``text`` resolved against ``anchor``.

    ``weekdays``: a weekday named alone is the nearest one on or before the anchor and the one after it
    (``"both"``: a message may look back or ahead) or only the one before (``"past"``: a question).
    """
    day = anchor.toordinal()
    lower = text.lower()
    for pattern, words in _RELATIVE:
        if any(word in lower for word in words):
            for match in pattern.finditer(text):
                if not _free(spans, *match.span()):
                    continue
                found = _resolve(match.groupdict(), anchor, day)
                if found is not None:
                    spans.append(match.span())
                    yield found, match.span()
    if "day" in text:
        for match in _WEEKDAY.finditer(text):
            if not _free(spans, *match.span()):
                continue
            back = (anchor.weekday() - WEEKDAYS[match.group("weekday").lower()]) % 7
            spans.append(match.span())
            yield (day - back, day - back + 1), match.span()
            if weekdays == "both":
                ahead = 7 - back
                yield (day + ahead, day + ahead + 1), match.span()


def _count(raw: str | None) -> int:
    text = " ".join((raw or "").lower().split())
    return int(text) if text.isdigit() else NUMBERS.get(text, 1)


def _resolve(groups: dict[str, str | None], anchor: date, day: int) -> DayRange | None:
    word = " ".join((groups.get("word") or "").lower().split())
    if word:
        offset = {
            "yesterday": -1,
            "today": 0,
            "tonight": 0,
            "tomorrow": 1,
            "the day before yesterday": -2,
            "the day after tomorrow": 2,
        }.get(word)
        if offset is not None:
            return day + offset, day + offset + 1
        return day - 7, day  # "the other day"
    unit = (groups.get("unit") or "").lower()
    if unit:
        count = _count(groups.get("count"))
        if count > 200:
            return None
        if groups.get("since"):
            return _since(anchor, count, unit)
        if groups.get("ahead") or (groups.get("ago") or "").lower() == "from now":
            return _ahead(anchor, count, unit)
        return _ago(anchor, count, unit)
    which = " ".join((groups.get("which") or "").lower().split())
    what = (groups.get("what") or "").lower()
    step = {"last": -1, "past": -1, "this past": -1, "coming": 1, "next": 1}.get(which, 0)
    return _named_period(anchor, day, step, what)


def _shift_month(anchor: date, months: int) -> tuple[int, int]:
    month = anchor.month + months
    return anchor.year + (month - 1) // 12, (month - 1) % 12 + 1


def _ago(anchor: date, count: int, unit: str) -> DayRange | None:
    day = anchor.toordinal()
    if unit == "day":
        return day - count, day - count + 1
    if unit in ("week", "weekend"):
        middle = day - 7 * count
        return middle - 3, middle + 4
    if unit == "month":
        year, month = _shift_month(anchor, -count)
        return month_range(year, month) if year >= 1 else None
    year = anchor.year - count
    return day_range(date(year, 1, 1), date(year + 1, 1, 1)) if year >= 1 else None


def _ahead(anchor: date, count: int, unit: str) -> DayRange | None:
    day = anchor.toordinal()
    if unit == "day":
        return day + count, day + count + 1
    if unit in ("week", "weekend"):
        middle = day + 7 * count
        return middle - 3, middle + 4
    if unit == "month":
        year, month = _shift_month(anchor, count)
        return month_range(year, month) if year <= 9999 else None
    year = anchor.year + count
    return day_range(date(year, 1, 1), date(year + 1, 1, 1)) if year < 9999 else None


def _since(anchor: date, count: int, unit: str) -> DayRange | None:
    """From ``count`` units before ``anchor`` to it (``in the last two months``)."""
    day = anchor.toordinal()
    if unit in ("day", "week", "weekend"):
        start = day - count * (1 if unit == "day" else 7)
        return (start, day + 1) if start >= 1 else None
    months = count * (12 if unit == "year" else 1)
    year, month = _shift_month(anchor, -months)
    if year < 1:
        return None
    first = date(year, month, min(anchor.day, calendar.monthrange(year, month)[1]))
    return first.toordinal(), day + 1


def _named_period(anchor: date, day: int, step: int, what: str) -> DayRange | None:
    monday = day - anchor.weekday()
    if what in ("night", "morning", "evening", "afternoon"):
        return (day - 1, day) if step < 0 else (day, day + 1) if step == 0 else (day + 1, day + 2)
    if what == "week":
        return monday + 7 * step, monday + 7 * step + 7
    if what == "weekend":
        saturday = monday + 5 + 7 * step
        return saturday, saturday + 2
    if what == "month":
        year, month = _shift_month(anchor, step)
        return month_range(year, month)
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
