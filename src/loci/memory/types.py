"""Memory types and their time-to-live.

``sticky`` never expires; ``user_preference`` lasts 90 days; ``project_context`` and
``learned_pattern`` 30 days. Custom types get a TTL from settings (``[memory_types]``,
0 meaning never). A type that is neither built in nor configured is kept with the
default TTL of 30 days rather than rejected, so that an agent's new type is not lost.
"""

from __future__ import annotations

import difflib
import secrets
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

DEFAULT_TTL_DAYS: dict[str, int | None] = {
    "sticky": None,
    "user_preference": 90,
    "project_context": 30,
    "learned_pattern": 30,
}
FALLBACK_TTL_DAYS = 30

def typo_of(name: str, configured: Iterable[str] = ()) -> str | None:
    """The built-in or configured type that an unknown ``name`` is most likely a typo
    of (``stiky``: ``sticky``), or None."""
    known = [*DEFAULT_TTL_DAYS, *configured]
    if name in known:
        return None
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return close[0] if close else None


def ttl_days(memory_type: str, custom: Mapping[str, int] | None = None) -> int | None:
    if custom and memory_type in custom:
        return custom[memory_type] or None
    return DEFAULT_TTL_DAYS.get(memory_type, FALLBACK_TTL_DAYS)


def expiry_for(
    memory_type: str, now: datetime, custom: Mapping[str, int] | None = None
) -> datetime | None:
    """When a fact of ``memory_type`` written at ``now`` expires (None: never)."""
    days = ttl_days(memory_type, custom)
    return None if days is None else now + timedelta(days=days)


def new_memory_id() -> str:
    return f"mem_{secrets.token_hex(8)}"
