"""UTC timestamps: one clock, one text format (ISO 8601 with a ``Z``).

The clock is injectable so that expiry and idle-time logic can be tested without
sleeping.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

from loci.errors import ValidationError

Clock = Callable[[], datetime]
#: The instants a timestamp or a filter may name: those Python's datetime holds, less a
#: day at each end, so that a day added or taken off (a period, a tick) cannot overflow.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)


def utc_now() -> datetime:
    return datetime.now(UTC)


def parse_timestamp(text: str) -> datetime:
    """Parse ISO 8601 (``Z`` or an offset; naive means UTC) into an aware UTC datetime."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, AttributeError) as exc:
        raise ValidationError(f"not an ISO 8601 timestamp: {text!r}") from exc
    return check_time("timestamp", value)


def check_time(field: str, value: Any) -> datetime:
    """``value`` as an aware UTC datetime (naive means UTC) between ``EARLIEST`` and
    ``LATEST``, else a ``ValidationError``."""
    if not isinstance(value, datetime):
        raise ValidationError(f"{field} must be a date and time, not {type(value).__name__}")
    utc: datetime | None
    try:
        utc = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except (OverflowError, ValueError):
        utc = None
    if utc is None or not EARLIEST <= utc <= LATEST:
        raise ValidationError(f"{field} is out of range: use a time between "
                              f"{EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d} (UTC)")
    return utc


def format_timestamp(value: datetime) -> str:
    """Format as ``2024-01-01T00:00:00Z``, with milli- or microseconds only when set."""
    value = value.astimezone(UTC)
    base = value.strftime("%Y-%m-%dT%H:%M:%S")
    micros = value.microsecond
    if micros == 0:
        return base + "Z"
    if micros % 1000 == 0:
        return f"{base}.{micros // 1000:03d}Z"
    return f"{base}.{micros:06d}Z"


def day_label(when: date) -> str:
    """A day as dated facts, summaries, recalled turns and history show it: "8 May 2023"."""
    return f"{when.day} {when:%B %Y}"
