"""Every date form of ``convmem.longterm.recall.dates`` (its docstring's table), in messages and in questions."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from convmem.longterm.recall.temporal import asks_order, mentions, query_ranges

SAID = datetime(2023, 6, 27, 10, 37, tzinfo=timezone.utc)  # a Tuesday
NOW = datetime(2023, 5, 30, 21, 41, tzinfo=timezone.utc)  # a Tuesday too


def days(ranges: list[tuple[int, int]]) -> list[tuple[str, str]]:
    """Ranges as (first day, last day) ISO dates, the end made inclusive for readability."""
    return [(date.fromordinal(a).isoformat(), date.fromordinal(b - 1).isoformat()) for a, b in ranges]


def one(day: str) -> list[tuple[str, str]]:
    return [(day, day)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # ISO date, with or without a time
        ("the meeting on 2023-05-20 went well", one("2023-05-20")),
        ("logged at 2023-05-20T14:30:05", one("2023-05-20")),
        # ISO month
        ("the 2023-05 report", [("2023-05-01", "2023-05-31")]),
        # year first, slashes, with a weekday and a time as LongMemEval writes them
        ("2023/05/20 (Sat) 02:21: I started", one("2023-05-20")),
        ("on 2023/5/2", one("2023-05-02")),
        # day first, dots (REALTALK's dd.mm.yyyy)
        ("we met on 20.05.2023 at noon", one("2023-05-20")),
        ("since 5.6.2023", one("2023-06-05")),
        # slashes, month or day first, read only where the order is certain
        ("due 05/20/2023", one("2023-05-20")),
        ("due 20/05/2023", one("2023-05-20")),
        ("due 07/07/2023", one("2023-07-07")),
        ("due 05/06/2023", []),  # May 6 or 5 June: not read
        # day month year, month day year
        ("on 8 May, 2023 I started", one("2023-05-08")),
        ("the 8th of May 2023", one("2023-05-08")),
        ("on May 8th, 2023", one("2023-05-08")),
        ("May 8 2023", one("2023-05-08")),
        # month year, year
        ("in March 2021", [("2021-03-01", "2021-03-31")]),
        ("back in 2019", [("2019-01-01", "2019-12-31")]),
        # a day and month without a year: the year it was said
        ("my birthday is on 8 May", one("2023-05-08")),
        ("the 15th of March issue", one("2023-03-15")),
        ("see you March 15th", one("2023-03-15")),
        ("you may 8 times out of 10", []),  # "may" the verb: a month name must be capitalized
        ("at May 8:30", []),  # a time, not a day
        # weekdays named alone: the nearest before (or on) the day said, and the next
        ("on Saturday we hiked", [("2023-06-24", "2023-06-24"), ("2023-07-01", "2023-07-01")]),
        ("Tuesday was long", [("2023-06-27", "2023-06-27"), ("2023-07-04", "2023-07-04")]),
        ("I work Saturdays", []),  # a habit, not a day
        # named days
        ("Yesterday was great", one("2023-06-26")),
        ("we're going tomorrow", one("2023-06-28")),
        ("the day before yesterday", one("2023-06-25")),
        ("the day after tomorrow", one("2023-06-29")),
        ("the other day", [("2023-06-20", "2023-06-26")]),
        # last / this / next ...
        ("I went camping last week!", [("2023-06-19", "2023-06-25")]),
        ("last weekend", [("2023-06-24", "2023-06-25")]),
        ("next month", [("2023-07-01", "2023-07-31")]),
        ("Last Friday we painted", one("2023-06-23")),
        ("earlier this year", [("2023-01-01", "2023-12-31")]),
        ("this morning", one("2023-06-27")),
        ("last summer", [("2022-06-01", "2022-08-31")]),
        # ... ago
        ("two days ago", one("2023-06-25")),
        ("a couple of weeks ago", [("2023-06-10", "2023-06-16")]),
        ("3 months ago", [("2023-03-01", "2023-03-31")]),
        # in ... / ... from now
        ("in two weeks", [("2023-07-08", "2023-07-14")]),
        ("a month from now", [("2023-07-01", "2023-07-31")]),
        ("in 3 days", one("2023-06-30")),
        # in the last / past ...
        ("in the last two months", [("2023-04-27", "2023-06-27")]),
        ("over the past 3 weeks", [("2023-06-06", "2023-06-27")]),
        ("within the last year", [("2022-06-27", "2023-06-27")]),
        # not dates
        ("version 1.2.10 of the tool", []),
        ("item 10.5.1234", []),
        ("3.14159 is pi", []),
        ("I love May", []),
        ("the 31 February, 2023", [("2023-02-01", "2023-02-28")]),  # an impossible day: its month
        ("on 31.02.2023", []),
        ("nothing dated here", []),
    ],
)
def test_each_form_in_a_message(text: str, expected: list[tuple[str, str]]) -> None:
    assert days(mentions(text, SAID)) == expected


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What did I do two weeks ago?", [("2023-05-13", "2023-05-19")]),
        ("What did I buy in the last two months?", [("2023-03-30", "2023-05-30")]),
        ("What did I do on Saturday?", one("2023-05-27")),  # a question looks back
        ("What did I read on May 15th?", one("2023-05-15")),  # now's year
        ("How many weddings have I attended this year?", [("2023-01-01", "2023-12-31")]),
        ("What happened on 20.05.2023?", one("2023-05-20")),
        ("What happened on 2023/05/20 (Sat)?", one("2023-05-20")),
    ],
)
def test_questions_resolve_against_now(question: str, expected: list[tuple[str, str]]) -> None:
    assert days(query_ranges(question, now=NOW)) == expected


def test_questions_without_now_read_a_day_and_month_in_every_year_of_the_archive() -> None:
    assert days(query_ranges("What did I read on May 15th?", years=(2022, 2023))) == [
        ("2022-05-15", "2022-05-15"),
        ("2023-05-15", "2023-05-15"),
    ]
    assert query_ranges("What did I read on May 15th?") == []


def test_month_ranges_in_questions() -> None:
    assert days(query_ranges("rides from July to October?", years=(2023, 2023))) == [("2023-07-01", "2023-10-31")]
    assert days(query_ranges("trips between November and February", years=(2022, 2022))) == [
        ("2022-11-01", "2023-02-28")
    ]


@pytest.mark.parametrize(
    ("question", "order"),
    [
        ("How many bikes do I currently own?", "newest"),
        ("Where did I go on my most recent family trip?", "newest"),
        ("What is my current job title?", "newest"),
        ("Do I still play the cello?", "newest"),
        ("What kitchen gadget did I buy before the Air Fryer?", "oldest"),
        ("What was my original plan?", "oldest"),
        ("What did I have initially?", "oldest"),
        ("What did Caroline paint?", None),
        ("What did I have before, and what do I have now?", None),  # both: neither wins
    ],
)
def test_asks_order(question: str, order: str | None) -> None:
    assert asks_order(question) == order
