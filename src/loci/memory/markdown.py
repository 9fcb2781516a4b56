"""Memories as markdown files with YAML front matter::

    ---
    id: mem_abc123
    type: user_preference
    tags: [settings]
    createdAt: '2024-01-01T00:00:00Z'
    updatedAt: '2024-01-01T00:00:00Z'
    expiresAt: '2024-03-31T00:00:00Z'
    ---

    User prefers dark mode and concise responses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml

from loci.errors import ValidationError
from loci.models import Memory
from loci.timeutil import format_timestamp, parse_timestamp


@dataclass(frozen=True)
class MemoryFile:
    """The parsed content of one memory file."""

    id: str | None
    type: str | None
    tags: tuple[str, ...]
    body: str
    updated_at: datetime | None
    #: When the file says the memory expires (None: never), if it says so at all
    #: (``expiresAt``; an empty value is "never").
    expires_stated: bool = False
    expires_at: datetime | None = None


def render(memory: Memory) -> str:
    front: dict[str, Any] = {
        "id": memory.id,
        "type": memory.type,
        "tags": list(memory.tags),
        "createdAt": format_timestamp(memory.created_at),
        "updatedAt": format_timestamp(memory.updated_at),
    }
    if memory.expires_at is not None:
        front["expiresAt"] = format_timestamp(memory.expires_at)
    header = yaml.safe_dump(front, sort_keys=False, allow_unicode=True,
                            default_flow_style=None)
    return f"---\n{header}---\n\n{memory.content}\n"


def parse(text: str) -> MemoryFile:
    """Parse a memory file; a file without front matter is all body (a byte-order mark
    before it, as some editors save, is not part of it)."""
    text = text.removeprefix("\ufeff")
    front: dict[str, Any] = {}
    body = text
    if text.startswith("---"):
        parts = text.split("\n---", 1)
        if len(parts) == 2:
            try:
                loaded = yaml.safe_load(parts[0][3:]) or {}
            except yaml.YAMLError as exc:
                raise ValidationError(f"bad front matter: {exc}") from exc
            if not isinstance(loaded, dict):
                raise ValidationError("front matter must be a mapping")
            front = loaded
            body = parts[1].split("\n", 1)[1] if "\n" in parts[1] else ""
    tags = front.get("tags") or []
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")]
    if not isinstance(tags, list):
        raise ValidationError(f"tags must be a list or comma-separated text, not {tags!r}")
    updated, expires = front.get("updatedAt"), front.get("expiresAt")
    return MemoryFile(
        id=str(front["id"]) if front.get("id") else None,
        type=str(front["type"]) if front.get("type") else None,
        tags=tuple(str(t) for t in tags if str(t).strip()),
        body=body.strip(),
        updated_at=parse_timestamp(str(updated)) if updated else None,
        expires_stated="expiresAt" in front,
        expires_at=parse_timestamp(str(expires)) if expires else None,
    )
