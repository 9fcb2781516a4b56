"""The memory tools' result shapes: search returns summaries and ids, read
returns a page of the full markdown. Search first, read if needed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from loci.checks import check_page
from loci.memory.markdown import render
from loci.memory.timeline import hit_standing
from loci.models import Memory, SearchHit

SUMMARY_CHARS = 200


@dataclass(frozen=True)
class MemorySummary:
    """One ``memory_search`` result."""

    id: str
    summary: str
    relevance: float
    timestamp: datetime
    type: str
    tags: tuple[str, ...]
    #: "active", "expired" or "superseded" (``timeline``)
    status: str = "active"
    #: When an expired or superseded fact stopped holding.
    until: datetime | None = None
    #: The newer fact that superseded it.
    superseded_by: str | None = None


@dataclass(frozen=True)
class MemoryPage:
    """One ``memory_read`` page: ``content[offset:offset+limit]`` of the markdown."""

    id: str
    content: str
    offset: int
    total_chars: int
    next_offset: int | None


def summarize(text: str, width: int = SUMMARY_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def to_summary(hit: SearchHit, now: datetime) -> MemorySummary:
    held = hit_standing(hit, now)
    return MemorySummary(
        id=hit.id, summary=summarize(hit.text), relevance=round(hit.score, 4),
        timestamp=hit.timestamp, type=str(hit.metadata.get("type", "")),
        tags=tuple(hit.metadata.get("tags", ())), status=held.status, until=held.until,
        superseded_by=hit.metadata.get("superseded_by"),
    )


def page(memory: Memory, offset: int, limit: int) -> MemoryPage:
    offset, limit = check_page(offset, limit)
    text = render(memory)
    end = offset + limit
    return MemoryPage(
        id=memory.id, content=text[offset:end], offset=offset, total_chars=len(text),
        next_offset=end if end < len(text) else None,
    )
