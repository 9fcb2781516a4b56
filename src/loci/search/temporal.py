"""Dates named in a query, as periods that search can favour.

"What did Ana cook on 3 July, 2023?" is about what was said that day. This module finds
calendar expressions in English text and turns each into a :class:`Period`:

- a day: ``3 July 2023``, ``3rd of July, 2023``, ``July 3, 2023``, ``2023-07-03``;
- a month: ``July 2023``, ``Jul. 2023``; a month without a year (``in December``)
  matches that month of any year;
- a year after a preposition: ``in 2024``, ``during 2023``.

Relative expressions ("last week") need an anchor the query does not give and are left
alone; so is a bare "May", which is more often a verb. Periods are in UTC.

It also tells questions about time ("When did...", "How long...") and texts that say
when something happened ("last Friday", "two years ago", "in June"): the answer to a
"when" question is usually a text of the second kind (answer-type matching).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_MONTH})\.?,?\s+{_YEAR}\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH})\.?\s+{_DAY},?\s*{_YEAR}\b", re.I)
_ISO_DAY = re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,?\s+(?:of\s+)?{_YEAR}\b", re.I)
# Full month names only, and not "May": "may" is more often a verb.
_MONTH_ALONE = re.compile(
    r"\b(january|february|march|april|june|july|august|september|october|november"
    r"|december)\b", re.I)
_YEAR_ALONE = re.compile(rf"\b(?:in|during|of|since|from|by)\s+{_YEAR}\b", re.I)


_ASKS_WHEN = re.compile(
    r"^\W*(when|since when|how long|how many (years|months|weeks|days)"
    r"|what (year|month|day|date|time))\b", re.I)
_SAYS_WHEN = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago|last|next|weekends?|recently|soon|earlier"
    r"|later|monday|tuesday|wednesday|thursday|friday|saturday|sunday|years?|months?"
    r"|weeks?|days?|january|february|march|april|june|july|august|september|october"
    r"|november|december|(19|20)\d\d)\b", re.I)


def asks_when(question: str) -> bool:
    """Whether ``question`` asks for a time or a duration."""
    return _ASKS_WHEN.search(question) is not None


def says_when(text: str) -> bool:
    """Whether ``text`` says when something happened (a date, a day, "ago", ...)."""
    return _SAYS_WHEN.search(text) is not None


@dataclass(frozen=True)
class Period:
    """``[start, end)`` in UTC; or, when ``month`` is set, that month of any year."""

    start: datetime | None = None
    end: datetime | None = None
    month: int | None = None

    def contains(self, moment: datetime) -> bool:
        if self.month is not None:
            return moment.astimezone(UTC).month == self.month
        assert self.start is not None and self.end is not None
        return self.start <= moment < self.end


def periods(text: str) -> list[Period]:
    """The periods named in ``text``, each expression once, in order of precision."""
    found: list[Period] = []
    taken: list[tuple[int, int]] = []

    def free(match: re.Match[str]) -> bool:
        start, end = match.span()
        if any(start < b and a < end for a, b in taken):
            return False
        taken.append((start, end))
        return True

    for match in _DAY_MONTH_YEAR.finditer(text):
        if free(match):
            day, month, year = match.groups()
            _add_day(found, int(year), _MONTHS[month.lower()], int(day))
    for match in _MONTH_DAY_YEAR.finditer(text):
        if free(match):
            month, day, year = match.groups()
            _add_day(found, int(year), _MONTHS[month.lower()], int(day))
    for match in _ISO_DAY.finditer(text):
        if free(match):
            year, month, day = match.groups()
            _add_day(found, int(year), int(month), int(day))
    for match in _MONTH_YEAR.finditer(text):
        if free(match):
            month, year = match.groups()
            found.append(_month(int(year), _MONTHS[month.lower()]))
    for match in _MONTH_ALONE.finditer(text):
        if free(match):
            found.append(Period(month=_MONTHS[match.group(1).lower()]))
    for match in _YEAR_ALONE.finditer(text):
        if free(match):
            year = int(match.group(1))
            found.append(Period(datetime(year, 1, 1, tzinfo=UTC),
                                datetime(year + 1, 1, 1, tzinfo=UTC)))
    return list(dict.fromkeys(found))


def _add_day(found: list[Period], year: int, month: int, day: int) -> None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:  # "31 February": not a date
        return
    found.append(Period(start, start + timedelta(days=1)))


def _month(year: int, month: int) -> Period:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return Period(start, end)
