"""UTC timestamps: one clock, one text format (ISO 8601 with a ``Z``).

The clock is injectable so that expiry and idle-time logic can be tested without
sleeping.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime

from loci.errors import ValidationError

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def parse_timestamp(text: str) -> datetime:
    """Parse ISO 8601 (``Z`` or an offset; naive means UTC) into an aware UTC datetime."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, AttributeError) as exc:
        raise ValidationError(f"not an ISO 8601 timestamp: {text!r}") from exc
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValidationError(f"timestamp out of range once in UTC: {text!r}") from None


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
