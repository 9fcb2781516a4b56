from datetime import UTC, datetime, timedelta, timezone

import pytest

from loci import ValidationError
from loci.timeutil import format_timestamp, parse_timestamp


@pytest.mark.parametrize(
    "text", ["2024-01-01T00:00:00Z", "2024-01-01T00:00:00.123Z", "2024-01-01T00:00:00.123456Z"]
)
def test_round_trip(text: str) -> None:
    assert format_timestamp(parse_timestamp(text)) == text


def test_offsets_and_naive_become_utc() -> None:
    assert parse_timestamp("2024-01-01T02:00:00+02:00") == datetime(2024, 1, 1, tzinfo=UTC)
    assert parse_timestamp("2024-01-01T00:00:00").tzinfo is not None
    east = datetime(2024, 1, 1, 5, tzinfo=timezone(timedelta(hours=5)))
    assert format_timestamp(east) == "2024-01-01T00:00:00Z"


def test_garbage_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        parse_timestamp("yesterday")
