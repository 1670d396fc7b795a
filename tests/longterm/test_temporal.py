"""Dates in messages and queries: relative expressions resolved against when they were said."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem.longterm.recall.temporal import asks_when, mentions, query_ranges

SAID = datetime(2023, 6, 27, 10, 37, tzinfo=timezone.utc)  # a Tuesday


def days(ranges: list[tuple[int, int]]) -> list[tuple[str, str]]:
    """Ranges as (first day, last day) ISO dates, the end made inclusive for readability."""
    return [(date.fromordinal(a).isoformat(), date.fromordinal(b - 1).isoformat()) for a, b in ranges]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went camping last week!", [("2023-06-19", "2023-06-25")]),
        ("Yesterday was great", [("2023-06-26", "2023-06-26")]),
        ("we're going tomorrow", [("2023-06-28", "2023-06-28")]),
        ("I saw it last night", [("2023-06-26", "2023-06-26")]),
        ("Last Friday we painted", [("2023-06-23", "2023-06-23")]),
        ("last Tuesday", [("2023-06-20", "2023-06-20")]),  # said on a Tuesday: the one a week before
        ("next Friday", [("2023-06-30", "2023-06-30")]),
        ("last weekend", [("2023-06-24", "2023-06-25")]),
        ("this weekend", [("2023-07-01", "2023-07-02")]),
        ("last month", [("2023-05-01", "2023-05-31")]),
        ("next month", [("2023-07-01", "2023-07-31")]),
        ("last year", [("2022-01-01", "2022-12-31")]),
        ("two days ago", [("2023-06-25", "2023-06-25")]),
        ("a few years ago", [("2020-01-01", "2020-12-31")]),
        ("3 months ago", [("2023-03-01", "2023-03-31")]),
        ("two weekends ago", [("2023-06-10", "2023-06-16")]),
        ("last summer", [("2022-06-01", "2022-08-31")]),
        ("on 8 May, 2023 I started", [("2023-05-08", "2023-05-08")]),
        ("on May 8th, 2023", [("2023-05-08", "2023-05-08")]),
        ("in March 2021", [("2021-03-01", "2021-03-31")]),
        ("back in 2019", [("2019-01-01", "2019-12-31")]),
        ("I love May", []),  # a month alone says no date
        ("the 31 February, 2023", [("2023-02-01", "2023-02-28")]),  # an impossible day: its month
        ("nothing dated here", []),
    ],
)
def test_mentions_resolve_against_the_day_said(text: str, expected: list[tuple[str, str]]) -> None:
    assert days(mentions(text, SAID)) == expected


def test_year_boundaries() -> None:
    new_year = datetime(2024, 1, 2, tzinfo=timezone.utc)
    assert days(mentions("last month", new_year)) == [("2023-12-01", "2023-12-31")]
    assert days(mentions("next month", datetime(2023, 12, 5, tzinfo=timezone.utc))) == [("2024-01-01", "2024-01-31")]
    assert days(mentions("last week", new_year)) == [("2023-12-25", "2023-12-31")]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Maria donate in December 2023?", [("2023-12-01", "2023-12-31")]),
        ("What did Gina find on 1 February, 2023?", [("2023-02-01", "2023-02-01")]),
        ("What painting on October 13, 2023?", [("2023-10-13", "2023-10-13")]),
        ("When did Melanie go camping in June?", [("2022-06-01", "2022-06-30"), ("2023-06-01", "2023-06-30")]),
        ("What state did Joanna visit in summer 2021?", [("2021-06-01", "2021-08-31")]),
        ("Which tournament at the beginning of November 2022?", [("2022-11-01", "2022-11-11")]),
        ("What did John do the week before August 3, 2023?", [("2023-07-20", "2023-08-03")]),
        ("What did Nate do in 2022?", [("2022-01-01", "2022-12-31")]),
        ("What may I do?", []),
    ],
)
def test_query_ranges(query: str, expected: list[tuple[str, str]]) -> None:
    assert days(query_ranges(query, years=(2022, 2023))) == expected


def test_relative_query_dates_need_now() -> None:
    assert query_ranges("what did I do last week?") == []
    assert days(query_ranges("what did I do last week?", now=SAID)) == [("2023-06-19", "2023-06-25")]


def test_asks_when() -> None:
    assert asks_when("When did Caroline go to the LGBTQ support group?")
    assert asks_when("What year did Nate win?")
    assert asks_when("  how long ago was that?")
    assert not asks_when("What did Caroline do when she was sad?")
    assert not asks_when("Where does my sister live?")


@settings(max_examples=300, deadline=None)
@given(st.text(), st.datetimes(min_value=datetime(1, 1, 8), max_value=datetime(9998, 12, 1)))
def test_never_raises_and_ranges_are_well_formed(text: str, when: datetime) -> None:
    for first, end in mentions(text, when) + query_ranges(text, now=when, years=(when.year, when.year)):
        assert first < end


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["last", "next", "this", "2 days ago", "May 2023", "8 May 2023", "week", "weekend", "in", "2024"]
        ),
        max_size=8,
    ),
    st.datetimes(min_value=datetime(1, 1, 8), max_value=datetime(9998, 12, 1)),
)
def test_word_salad_of_date_words_never_raises(words: list[str], when: datetime) -> None:
    text = " ".join(words)
    for first, end in mentions(text, when):
        assert first < end
