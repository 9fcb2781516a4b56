"""Conversions between model values and the plain column values backends store."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: One encoder: ``json.dumps`` with options builds a new one on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def to_micros(value: datetime) -> int:
    """Microseconds since the epoch: exact, sortable, and the same in every backend."""
    delta = value.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def canonical_json(value: Any) -> str:
    """Deterministic JSON: what is stored, counted and sent in a cacheable prefix."""
    return _CANONICAL.encode(value)


def dump_json(value: Any, *, keep_empty: bool = False) -> str | None:
    """Canonical JSON (sorted keys) or None for empty values; ``keep_empty`` stores
    ``{}`` as itself, for a field where empty and absent differ (a tool call's args)."""
    if value is None or (value == {} and not keep_empty):
        return None
    return _CANONICAL.encode(value)


def load_json(text: str | None) -> Any:
    return json.loads(text, parse_int=_int) if text else None


def _int(text: str) -> int | float:
    """A JSON integer; past 64 bits, the float it was written as: PostgreSQL's jsonb
    keeps numbers, not their spelling, and gives ``1e20`` back as an integer, which no
    value Loci accepts can be (``checks.check_json``)."""
    value = int(text)
    return value if -_INT64 <= value < _INT64 else float(value)


_INT64 = 2**63


def dump_tags(tags: tuple[str, ...]) -> str:
    """Tags as one space-separated string: indexable by full-text search as words."""
    return " ".join(tags)


def load_tags(text: str) -> tuple[str, ...]:
    return tuple(text.split()) if text else ()
