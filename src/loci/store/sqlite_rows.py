"""SQL fragments and row conversions of the SQLite backend, shared by its keyword and
vector search paths."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loci.models import (
    Compaction,
    Document,
    DocumentVersion,
    Event,
    Memory,
    MemoryVersion,
    NewEvent,
    Scope,
    SearchHit,
    StateItem,
)
from loci.search import conversation
from loci.store.base import SearchFilters
from loci.store.codec import from_micros, load_json, load_tags, to_micros

EVENT_COLUMNS = (
    "id, session, type, role, content, ts, tokens, tool_name, tool_call_id, args, "
    "metadata, archived, masked"
)
MEMORY_COLUMNS = "id, type, content, tags, created, updated, expires, source, metadata"
DOCUMENT_COLUMNS = "path, content, tags, version, created, updated, metadata"
COMPACTION_COLUMNS = (
    "id, session, strategy, first_event_id, last_event_id, summary_event_id, summary, "
    "tokens_before, tokens_after, created"
)


@dataclass(frozen=True)
class Kind:
    """How one searchable table is keyed, filtered and turned into hits."""

    table: str
    alias: str
    key: str  # the integer key FTS and the vector index use
    public: str  # the id callers see
    hit_columns: str
    fts: str


KINDS = {
    "event": Kind("events", "e", "id", "id",
                  "e.id, e.session, e.content, e.ts, e.role, e.type", "events_fts"),
    "memory": Kind("memories", "m", "rowid", "id",
                   "m.id, m.type, m.content, m.tags, m.updated", "memories_fts"),
    "document": Kind("documents", "d", "rowid", "path",
                     "d.path, d.content, d.updated, d.tags", "documents_fts"),
}


def to_hit(kind: str, r: tuple[Any, ...], score: float) -> SearchHit:
    """A hit from a row selected with ``KINDS[kind].hit_columns``."""
    if kind == "event":
        return SearchHit(kind="event", id=str(r[0]), score=score, text=r[2],
                         timestamp=from_micros(r[3]), session=r[1],
                         metadata={"role": r[4], "type": r[5]})
    if kind == "memory":
        return SearchHit(kind="memory", id=r[0], score=score, text=r[2],
                         timestamp=from_micros(r[4]),
                         metadata={"type": r[1], "tags": list(load_tags(r[3]))})
    return SearchHit(kind="document", id=r[0], score=score, text=r[1],
                     timestamp=from_micros(r[2]), metadata={"tags": list(load_tags(r[3]))})


def filter_sql(kind: str, filters: SearchFilters) -> tuple[str, list[Any]]:
    """``AND ...`` clauses and their parameters for one kind's filters."""
    if kind == "event":
        return event_filters(filters)
    if kind == "memory":
        return memory_filters(filters, expired_only=False)
    if filters.path_prefix:
        return " AND substr(d.path, 1, ?) = ?", [len(filters.path_prefix), filters.path_prefix]
    return "", []


def event_filters(filters: SearchFilters) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if filters.session is not None:
        clauses.append("e.session = ?")
        params.append(filters.session)
    if not filters.include_archived:
        clauses.append("e.archived = 0")
    if filters.since is not None:
        clauses.append("e.ts >= ?")
        params.append(to_micros(filters.since))
    if filters.until is not None:
        clauses.append("e.ts <= ?")
        params.append(to_micros(filters.until))
    return "".join(f" AND {c}" for c in clauses), params


def memory_filters(filters: SearchFilters, expired_only: bool) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if filters.types:
        clauses.append(f"m.type IN ({', '.join('?' * len(filters.types))})")
        params.extend(filters.types)
    for tag in filters.tags:
        clauses.append("(' ' || m.tags || ' ') LIKE ?")
        params.append(f"% {tag.replace('%', '').replace('_', '')} %")
    if filters.now is not None:
        if expired_only:
            clauses.append("(m.expires IS NOT NULL AND m.expires <= ?)")
        else:
            clauses.append("(m.expires IS NULL OR m.expires > ?)")
        params.append(to_micros(filters.now))
    if filters.since is not None:
        clauses.append("m.updated >= ?")
        params.append(to_micros(filters.since))
    if filters.until is not None:
        clauses.append("m.updated <= ?")
        params.append(to_micros(filters.until))
    return "".join(f" AND {c}" for c in clauses), params


def search_columns(
    db: sqlite3.Connection, scope: Scope, session: str, events: Sequence[NewEvent]
) -> list[tuple[str | None, str | None]]:
    """(``search_extra``, ``search_context``) for events about to be appended to a
    session, inside the appending transaction (see ``search.conversation``)."""
    previous: list[tuple[str, Any]] = []
    if conversation.CONTEXT_TURNS:
        rows = db.execute(
            "SELECT content, metadata FROM events WHERE tenant = ? AND agent = ? "
            "AND session = ? ORDER BY id DESC LIMIT ?",
            (scope.tenant, scope.agent, session, conversation.CONTEXT_TURNS),
        ).fetchall()
        previous = [(r[0], load_json(r[1])) for r in reversed(rows)]
    return conversation.index_columns([(e.content, e.metadata) for e in events], previous)


def to_event(r: tuple[Any, ...]) -> Event:
    return Event(
        id=r[0], session=r[1], type=r[2], role=r[3], content=r[4],
        timestamp=from_micros(r[5]), tokens=r[6], tool_name=r[7], tool_call_id=r[8],
        args=load_json(r[9]), metadata=load_json(r[10]) or {}, archived=bool(r[11]),
        masked=r[12],
    )


def to_memory(r: tuple[Any, ...]) -> Memory:
    return Memory(
        id=r[0], type=r[1], content=r[2], tags=load_tags(r[3]),
        created_at=from_micros(r[4]), updated_at=from_micros(r[5]),
        expires_at=None if r[6] is None else from_micros(r[6]), source=r[7],
        metadata=load_json(r[8]) or {},
    )


def to_state(r: tuple[Any, ...]) -> StateItem:
    return StateItem(key=r[0], value=r[1], updated_at=from_micros(r[2]))


def to_document(r: tuple[Any, ...]) -> Document:
    return Document(
        path=r[0], content=r[1], tags=load_tags(r[2]), version=r[3],
        created_at=from_micros(r[4]), updated_at=from_micros(r[5]),
        metadata=load_json(r[6]) or {},
    )


def to_version(r: tuple[Any, ...]) -> MemoryVersion:
    return MemoryVersion(
        memory_id=r[0], version=r[1], type=r[2], content=r[3], tags=load_tags(r[4]),
        created_at=from_micros(r[5]), updated_at=from_micros(r[6]),
        expires_at=None if r[7] is None else from_micros(r[7]),
        superseded_at=from_micros(r[8]), reason=r[9],
    )


def to_compaction(r: tuple[Any, ...]) -> Compaction:
    """A compaction from a row selected with ``COMPACTION_COLUMNS``."""
    return Compaction(
        id=r[0], session=r[1], strategy=r[2], first_event_id=r[3], last_event_id=r[4],
        summary_event_id=r[5], summary=r[6], tokens_before=r[7], tokens_after=r[8],
        created_at=from_micros(r[9]),
    )


def to_document_version(r: tuple[Any, ...]) -> DocumentVersion:
    """path, version, content, tags, created, updated, superseded, metadata."""
    return DocumentVersion(
        path=r[0], version=r[1], content=r[2], tags=load_tags(r[3]),
        created_at=from_micros(r[4]), updated_at=from_micros(r[5]),
        superseded_at=from_micros(r[6]), metadata=load_json(r[7]) or {},
    )
