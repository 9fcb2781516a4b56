"""SQL fragments of the SQLite backend (column lists, searchable kinds, filters),
shared by its keyword and vector search paths; rows become models in ``store/rows``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from loci.models import NewEvent, Scope
from loci.search import conversation
from loci.store.base import SearchFilters
from loci.store.codec import load_json, to_micros

EVENT_COLUMNS = (
    "id, session, type, role, content, ts, tokens, tool_name, tool_call_id, args, "
    "metadata, archived, masked"
)
MEMORY_COLUMNS = ("id, type, content, tags, created, updated, expires, source, metadata, "
                  "confirmed, superseded_by")
DOCUMENT_COLUMNS = "path, content, tags, version, created, updated, metadata"
COMPACTION_COLUMNS = (
    "id, session, strategy, first_event_id, last_event_id, summary_event_id, summary, "
    "tokens_before, tokens_after, created"
)


# Full-text rows are partitioned by scope (see ``keywords``).
#: Bits of the content key in a full-text rowid (keys up to ~10^12); the scope number
#: takes the 23 bits above them (8,388,607 scopes; ``scopes`` refuses more).
SCOPE_SHIFT = 40
KEY_MASK = (1 << SCOPE_SHIFT) - 1
MAX_SCOPES = (1 << (63 - SCOPE_SHIFT)) - 1


@dataclass(frozen=True)
class FullText:
    """One content table's full-text index: its key and indexed columns."""

    table: str
    key: str
    columns: tuple[str, ...]
    #: BM25 weight of each column (None: 1.0 each).
    weights: tuple[float, ...] | None = None
    #: Rows are indexed by a trigger (else the code indexes each batch in one statement).
    insert_trigger: bool = True

    @property
    def rank(self) -> str | None:
        """The weights as FTS5's configured ``rank`` (None: its default)."""
        return f"bm25({', '.join(map(str, self.weights))})" if self.weights else None

    def column_weights(self) -> tuple[float, ...]:
        return self.weights or (1.0,) * len(self.columns)


#: Migration 9 is built from these: a change here needs a migration of its own that
#: rebuilds the tables it touches.
FULL_TEXT = (
    FullText("events", "id", ("content", "search_extra", "search_context"),
             weights=(1.0, 1.0, 0.3), insert_trigger=False),
    FullText("memories", "rowid", ("content", "tags")),
    FullText("documents", "rowid", ("path", "content")),
)

FULL_TEXT_OF = {ft.table: ft for ft in FULL_TEXT}


def scope_base(db: sqlite3.Connection, scope: Scope) -> int:
    """The lowest full-text rowid of ``scope``, numbering the scope if it is new (call
    inside the write transaction that indexes its rows)."""
    db.execute("INSERT OR IGNORE INTO scopes (tenant, agent) VALUES (?, ?)",
               (scope.tenant, scope.agent))
    number = db.execute("SELECT no FROM scopes WHERE tenant = ? AND agent = ?",
                        (scope.tenant, scope.agent)).fetchone()[0]
    return int(number) << SCOPE_SHIFT


def index_events(db: sqlite3.Connection, scope: Scope, where: str, params: Sequence[Any]
                 ) -> None:
    """Index the events of ``scope`` just inserted (``where`` selects them as ``e``) and
    count them in ``fts_stats``: one statement each for a whole batch, about five times
    faster than a per-row trigger."""
    base = scope_base(db, scope)
    cols = ", ".join(FULL_TEXT_OF["events"].columns)
    db.execute(f"INSERT INTO events_fts (rowid, {cols}) SELECT ? | e.id, {cols} "
               f"FROM events e WHERE {where}", (base, *params))
    db.execute("INSERT INTO fts_stats (kind, scope, docs, tokens) SELECT 'events', ?, "
               "count(*), coalesce(sum(loci_tokens(d.sz)), 0) FROM events e "
               f"JOIN events_fts_docsize d ON d.id = (? | e.id) WHERE {where} "
               "ON CONFLICT (kind, scope) DO UPDATE "
               "SET docs = docs + excluded.docs, tokens = tokens + excluded.tokens",
               (base >> SCOPE_SHIFT, base, *params))


def varints(blob: bytes) -> Iterator[int]:
    """The integers of an FTS5 record (SQLite varints: 7 bits a byte, big-endian, the
    high bit set on all bytes but the last; a ninth byte gives all 8 bits)."""
    value = length = 0
    for byte in blob:
        if length == 8:
            yield value << 8 | byte
            value = length = 0
            continue
        value, length = value << 7 | byte & 0x7F, length + 1
        if byte < 0x80:
            yield value
            value = length = 0


def tokens(sizes: bytes | None) -> int:
    """A row's length in tokens: the sum of its FTS5 ``docsize`` record (its tokens per
    column). Registered on every connection as ``loci_tokens``, for the triggers that
    keep ``fts_stats`` and for keyword search."""
    return sum(varints(sizes)) if sizes else 0


#: Who spoke an event (``search.conversation``): the expression of the speakers' index.
SPEAKER = "json_extract(metadata, '$.name')"


#: Whether an event's metadata describes what it shared (``models.captions``):
#: only then is its metadata read with its hit.
SHARES = ("json_type(e.metadata, '$.caption') IS NOT NULL "
          "OR json_type(e.metadata, '$.attachments') IS NOT NULL")


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
                  "e.id, e.session, e.content, e.ts, e.role, e.type, "
                  "json_extract(e.metadata, '$.name'), e.tool_name, e.args, "
                  f"CASE WHEN {SHARES} THEN e.metadata END", "events_fts"),
    "memory": Kind("memories", "m", "rowid", "id",
                   "m.id, m.type, m.content, m.tags, m.updated, m.expires, m.superseded_by, "
                   "m.source",
                   "memories_fts"),
    "document": Kind("documents", "d", "rowid", "path",
                     "d.path, d.content, d.updated, d.tags", "documents_fts"),
}


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
    if filters.sessions:
        clauses.append(f"e.session IN ({', '.join(['?'] * len(filters.sessions))})")
        params.extend(filters.sessions)
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
        # Tags hold no spaces (``checks.clean_tags``): a space-delimited search is exact.
        clauses.append("instr(' ' || m.tags || ' ', ?) > 0")
        params.append(f" {tag} ")
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
    return conversation.index_columns(events, previous)
