"""Dates named in queries."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from loci.search.temporal import Period, periods


def day(y: int, m: int, d: int) -> Period:
    start = datetime(y, m, d, tzinfo=UTC)
    return Period(start, start.replace(day=d + 1))


@pytest.mark.parametrize("text", [
    "What did she cook on 3 July, 2023?", "on the 3rd of July 2023", "on July 3, 2023",
    "Jul. 3 2023", "on 2023-07-03",
])
def test_days(text: str) -> None:
    assert periods(text) == [day(2023, 7, 3)]


def test_months_years_and_recurring_months() -> None:
    december = Period(datetime(2023, 12, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC))
    assert periods("as of December 2023") == [december]
    assert periods("What deal did he get in December?") == [Period(month=12)]
    assert periods("What happened in 2024?") == [
        Period(datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC))]


def test_nothing_is_invented() -> None:
    assert periods("May I ask what you did last week?") == []
    assert periods("room 2023 and 31 February, 2023") == []
    assert periods("") == []


def test_contains() -> None:
    assert day(2023, 7, 3).contains(datetime(2023, 7, 3, 23, 59, tzinfo=UTC))
    assert not day(2023, 7, 3).contains(datetime(2023, 7, 4, tzinfo=UTC))
    assert Period(month=7).contains(datetime(1999, 7, 20, tzinfo=UTC))
    assert not Period(month=7).contains(datetime(1999, 8, 1, tzinfo=UTC))


def test_questions_about_time_and_texts_that_say_when() -> None:
    from loci.search.temporal import asks_when, says_when

    assert asks_when("When did Nate win his third tournament?")
    assert asks_when("How long has Jon been dancing?")
    assert not asks_when("What did Nate win?")
    assert says_when("I won another tournament last week!")
    assert says_when("We met in June.") and says_when("back in 2019")
    assert not says_when("I won another tournament!")
