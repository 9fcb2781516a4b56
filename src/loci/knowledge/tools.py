"""The knowledge tools' result shapes: ``search_knowledge`` returns summaries
with paths and relevance, ``read_document`` a page of a document's full text. Search
first, read if needed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from loci.checks import check_page
from loci.knowledge.text import best_passage, summarize, title_of
from loci.models import Document, SearchHit


@dataclass(frozen=True)
class DocumentSummary:
    """One ``search_knowledge`` result: where the document is and why it matched."""

    path: str
    title: str
    summary: str
    relevance: float
    tags: tuple[str, ...]
    updated_at: datetime
    version: int


@dataclass(frozen=True)
class DocumentPage:
    """One ``read_document`` page: ``content[offset:offset+limit]`` of the latest version."""

    path: str
    title: str
    content: str
    offset: int
    total_chars: int
    next_offset: int | None
    version: int
    tags: tuple[str, ...]


def to_summary(hit: SearchHit, document: Document, query: str) -> DocumentSummary:
    """The summary of a search hit: the passage of the document that matched."""
    return DocumentSummary(
        path=document.path, title=title_of(document),
        summary=summarize(best_passage(document.content, query)),
        relevance=round(hit.score, 4), tags=document.tags,
        updated_at=document.updated_at, version=document.version,
    )


def page(document: Document, offset: int, limit: int) -> DocumentPage:
    offset, limit = check_page(offset, limit)
    text = document.content
    end = offset + limit
    return DocumentPage(
        path=document.path, title=title_of(document), content=text[offset:end],
        offset=offset, total_chars=len(text), next_offset=end if end < len(text) else None,
        version=document.version, tags=document.tags,
    )
