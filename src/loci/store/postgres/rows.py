"""SQL fragments, filters and value checks of the PostgreSQL backend.

Rows are selected in the column order of ``sqlite.rows`` (tags as one space-joined
string, JSON as text, timestamps as microseconds), so both backends turn rows into
model values with the same functions (`store/rows.py`) and cannot disagree about them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from loci.errors import ValidationError
from loci.store.base import SearchFilters
from loci.store.codec import dump_json, to_micros

EVENT_COLUMNS = (
    "id, session, type, role, content, ts, tokens, tool_name, tool_call_id, args::text, "
    "metadata::text, archived, masked"
)
MEMORY_COLUMNS = (
    "id, type, content, loci_words(tags), created, updated, expires, source, metadata::text, "
    "confirmed, superseded_by"
)
DOCUMENT_COLUMNS = (
    "path, content, loci_words(tags), version, created, updated, metadata::text"
)
COMPACTION_COLUMNS = (
    "id, session, strategy, first_event_id, last_event_id, summary_event_id, summary, "
    "tokens_before, tokens_after, created"
)


@dataclass(frozen=True)
class Kind:
    """How one searchable table is keyed, filtered and turned into hits."""

    table: str
    alias: str
    key: str  # the id callers see (unique within a scope)
    order: str  # insertion order, oldest first; the row key of postings (bigint)
    hit_columns: str
    text: str  # what is embedded


KINDS = {
    "event": Kind("events", "e", "id", "id",
                  "e.id, e.session, e.content, e.ts, e.role, e.type, CASE WHEN "
                  "jsonb_typeof(e.metadata->'name') = 'string' THEN e.metadata->>'name' END, "
                  "e.tool_name, e.args::text, CASE WHEN e.metadata->'caption' IS NOT NULL OR "
                  "e.metadata->'attachments' IS NOT NULL THEN e.metadata::text END",
                  "content"),
    "memory": Kind("memories", "m", "id", "seq",
                   "m.id, m.type, m.content, loci_words(m.tags), m.updated, m.expires, "
                   "m.superseded_by, m.source", "content"),
    "document": Kind("documents", "d", "path", "seq",
                     "d.path, d.content, d.updated, loci_words(d.tags)",
                     "path || ' ' || content"),
}


def check_text(*values: str | None) -> None:
    """PostgreSQL cannot store NUL (U+0000) in text or jsonb. Loci refuses such input
    with a ValidationError before writing anything, rather than altering it silently."""
    for value in values:
        if value is not None and "\x00" in value:
            raise ValidationError(_NUL)


#: A NUL in JSON text: ``\u0000`` after an even run of backslashes (``\\u0000`` is a
#: backslash and "u0000", which any text may hold).
_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
_NUL = ("text contains a NUL character (U+0000), which PostgreSQL cannot store; remove "
        "it and retry")


def json_value(value: Any, *, keep_empty: bool = False) -> str | None:
    """Canonical JSON text for a jsonb column, checked for NUL."""
    text = dump_json(value, keep_empty=keep_empty)
    if text is not None and _JSON_NUL.search(text):
        raise ValidationError(_NUL)
    return text


_PLAIN = re.compile(r"[A-Za-z0-9]")
#: ltree allows labels of at most 1,000 characters.
_MAX_LABEL = 1000


def path_label(segment: str) -> str:
    """An ltree label for one path segment, one-to-one: letters and digits stay, every
    other character becomes ``_`` + its UTF-8 bytes in hex (``.`` → ``_2E``), an empty
    segment becomes ``_``; labels too long for ltree become a hash (still one-to-one in
    practice, and stable, so subtree queries keep working)."""
    if not segment:
        return "_"
    label = "".join(
        ch if _PLAIN.fullmatch(ch) else "".join(f"_{b:02X}" for b in ch.encode())
        for ch in segment
    )
    if len(label) > _MAX_LABEL:
        return "h_" + hashlib.sha256(segment.encode()).hexdigest()
    return label


def path_to_ltree(path: str) -> str:
    """The ltree of a document path: one label per ``/``-separated segment."""
    inner = path.strip("/")
    return ".".join(path_label(s) for s in inner.split("/")) if inner else ""


def prefix_filter(alias: str, prefix: str) -> tuple[str, list[Any]]:
    """Documents under ``prefix``: a folder prefix (ending in ``/``) is an ltree subtree
    query (GiST-indexed) without the folder's own node (a document ``/x`` is not under
    ``/x/``); any other prefix compares the leading characters of the path."""
    if prefix in ("", "/"):
        return "", []
    if prefix.endswith("/") and prefix.startswith("/"):
        tree = path_to_ltree(prefix)
        return f" AND {alias}.lpath <@ %s::ltree AND {alias}.lpath <> %s::ltree", [tree, tree]
    return f" AND left({alias}.path, %s) = %s", [len(prefix), prefix]


def filter_sql(kind: str, filters: SearchFilters) -> tuple[str, list[Any]]:
    """``AND ...`` clauses and their parameters for one kind's filters."""
    if kind == "event":
        return event_filters(filters)
    if kind == "memory":
        return memory_filters(filters, expired_only=False)
    return prefix_filter("d", filters.path_prefix or "")


def event_filters(filters: SearchFilters) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if filters.session is not None:
        clauses.append("e.session = %s")
        params.append(filters.session)
    if filters.sessions:
        clauses.append(f"e.session IN ({', '.join(['%s'] * len(filters.sessions))})")
        params.extend(filters.sessions)
    if not filters.include_archived:
        clauses.append("NOT e.archived")
    if filters.since is not None:
        clauses.append("e.ts >= %s")
        params.append(to_micros(filters.since))
    if filters.until is not None:
        clauses.append("e.ts <= %s")
        params.append(to_micros(filters.until))
    return "".join(f" AND {c}" for c in clauses), params


def memory_filters(filters: SearchFilters, expired_only: bool) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if filters.types:
        clauses.append("m.type = ANY(%s)")
        params.append(list(filters.types))
    if filters.tags:
        clauses.append("m.tags @> %s::text[]")
        params.append(list(filters.tags))
    if filters.now is not None:
        if expired_only:
            clauses.append("(m.expires IS NOT NULL AND m.expires <= %s)")
        else:
            clauses.append("(m.expires IS NULL OR m.expires > %s)")
        params.append(to_micros(filters.now))
    if filters.since is not None:
        clauses.append("m.updated >= %s")
        params.append(to_micros(filters.since))
    if filters.until is not None:
        clauses.append("m.updated <= %s")
        params.append(to_micros(filters.until))
    return "".join(f" AND {c}" for c in clauses), params
