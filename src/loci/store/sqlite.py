"""The SQLite backend: the embedded default.

One connection per store, shared by threads under a lock; WAL journal so readers in
other processes never block; every write in an explicit ``BEGIN IMMEDIATE``
transaction so a killed process leaves nothing half-written. Full-text search uses FTS5
external-content tables kept in sync by triggers.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from loci.errors import ConfigError, NotFoundError, StoreError
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
    SessionInfo,
    StateItem,
)
from loci.search import bm25_to_score, fts_query
from loci.store.base import (
    NO_FILTERS,
    CompactionPlan,
    NewCompaction,
    SearchFilters,
    Store,
    Vectors,
)
from loci.store.codec import (
    dump_json,
    dump_tags,
    from_micros,
    load_json,
    load_tags,
    to_micros,
)
from loci.store.sqlite_rows import (
    COMPACTION_COLUMNS,
    DOCUMENT_COLUMNS,
    EVENT_COLUMNS,
    KINDS,
    MEMORY_COLUMNS,
    filter_sql,
    memory_filters,
    search_columns,
    to_document,
    to_event,
    to_hit,
    to_memory,
    to_state,
    to_version,
)
from loci.store.sqlite_schema import migrate
from loci.store.sqlite_vectors import SQLiteVectors
from loci.timeutil import utc_now


def sqlite_path(url: str) -> str:
    """The file path of a ``sqlite:///path`` URL (``sqlite:///:memory:`` for memory)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise ConfigError(f"not a SQLite URL: {url!r} (expected sqlite:///path/to/loci.db)")
    return url[len(prefix) :]


class SQLiteStore(SQLiteVectors, Store):
    """Storage in one SQLite file (or in memory for ``sqlite:///:memory:``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        path = sqlite_path(url)
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            # A 64 MB page cache and memory-mapped reads: hot rows and indexes stay in
            # memory instead of costing a system call per page.
            self._db.execute("PRAGMA cache_size=-65536")
            self._db.execute("PRAGMA mmap_size=268435456")
            migrate(self._db, to_micros(utc_now()))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {path}: {exc}") from exc
        self._lock = threading.RLock()
        self._indexes = {}
        self._ann_dir = None if path == ":memory:" else Path(f"{path}.ann")

    def close(self) -> None:
        with self._lock:
            self.persist_indexes()
            self._db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed on success, rolled back on any error."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    # -- meta ---------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- events -------------------------------------------------------------------
    def append_events(
        self, scope: Scope, session: str, events: Sequence[NewEvent]
    ) -> list[Event]:
        with self._write() as db:
            return self._insert_events(db, scope, session, events)

    @staticmethod
    def _insert_events(
        db: sqlite3.Connection, scope: Scope, session: str, events: Sequence[NewEvent]
    ) -> list[Event]:
        rows = [
            (
                scope.tenant, scope.agent, session, e.type, e.role, e.content,
                to_micros(e.timestamp), e.tokens, e.tool_name, e.tool_call_id,
                dump_json(e.args), dump_json(e.metadata), extra, context,
            )
            for e, (extra, context) in zip(
                events, search_columns(db, scope, session, events), strict=True)
        ]
        # AUTOINCREMENT hands out sqlite_sequence + 1, + 2, ... and never reuses ids;
        # under BEGIN IMMEDIATE no other writer interleaves.
        seq = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
        first = (seq[0] if seq else 0) + 1
        db.executemany(
            "INSERT INTO events (tenant, agent, session, type, role, content, ts, "
            "tokens, tool_name, tool_call_id, args, metadata, search_extra, search_context) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        # One statement indexes the whole batch: five times faster than a trigger.
        db.execute(
            "INSERT INTO events_fts (rowid, content, search_extra, search_context) "
            "SELECT id, content, search_extra, search_context FROM events WHERE id >= ?",
            (first,),
        )
        return [
            Event(
                id=first + i, session=session, type=e.type, role=e.role,
                content=e.content, timestamp=e.timestamp, tokens=e.tokens,
                tool_name=e.tool_name, tool_call_id=e.tool_call_id, args=e.args,
                metadata=dict(e.metadata),
            )
            for i, e in enumerate(events)
        ]

    def apply_compaction(self, scope: Scope, session: str, plan: CompactionPlan
                         ) -> tuple[Event | None, Compaction]:
        with self._write() as db:
            db.executemany(
                "UPDATE events SET masked = ?, tokens = ? WHERE tenant = ? AND agent = ? "
                "AND session = ? AND id = ?",
                [(text, tokens, scope.tenant, scope.agent, session, i)
                 for i, (text, tokens) in plan.masks.items()],
            )
            for document in plan.artifacts:
                self._upsert_document(db, scope, document)
            event = None
            record = plan.compaction
            if plan.summary is not None:
                (event,) = self._insert_events(db, scope, session, [plan.summary])
                record = replace(record, summary_event_id=event.id)
            db.executemany(
                "UPDATE events SET archived = 1 WHERE tenant = ? AND agent = ? "
                "AND session = ? AND id = ?",
                [(scope.tenant, scope.agent, session, i) for i in plan.archive_ids],
            )
            return event, self._insert_compaction(db, scope, record)

    def list_events(
        self,
        scope: Scope,
        session: str,
        *,
        include_archived: bool = True,
        after_id: int = 0,
        limit: int | None = None,
    ) -> list[Event]:
        sql = (
            f"SELECT {EVENT_COLUMNS} FROM events WHERE tenant = ? AND agent = ? "
            "AND session = ? AND id > ?"
        )
        if not include_archived:
            sql += " AND archived = 0"
        sql += " ORDER BY id LIMIT ?"
        params = (scope.tenant, scope.agent, session, after_id, -1 if limit is None else limit)
        return [to_event(row) for row in self._query(sql, params)]

    def tail_events(
        self, scope: Scope, session: str, limit: int, *, include_archived: bool = False
    ) -> list[Event]:
        archived = "" if include_archived else " AND archived = 0"
        rows = self._query(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE tenant = ? AND agent = ? "
            f"AND session = ?{archived} ORDER BY id DESC LIMIT ?",
            (scope.tenant, scope.agent, session, limit),
        )
        return [to_event(row) for row in reversed(rows)]

    def set_archived(self, scope: Scope, session: str, ids: Sequence[int]) -> int:
        with self._write() as db:
            cursor = db.executemany(
                "UPDATE events SET archived = 1 WHERE tenant = ? AND agent = ? "
                "AND session = ? AND id = ? AND archived = 0",
                [(scope.tenant, scope.agent, session, i) for i in ids],
            )
            return cursor.rowcount

    def session_activity(self, scope: Scope, session: str) -> tuple[int, datetime] | None:
        rows = self._query(
            "SELECT (SELECT COALESCE(SUM(tokens), 0) FROM events INDEXED BY events_live_tokens "
            "WHERE tenant = ?1 AND agent = ?2 AND session = ?3 AND archived = 0), "
            "(SELECT ts FROM events WHERE tenant = ?1 AND agent = ?2 AND session = ?3 "
            "ORDER BY id DESC LIMIT 1)",
            (scope.tenant, scope.agent, session),
        )
        tokens, last = rows[0]
        return None if last is None else (int(tokens), from_micros(last))

    def latest_summary(self, scope: Scope, session: str) -> Event | None:
        rows = self._query(
            f"SELECT {EVENT_COLUMNS} FROM events INDEXED BY events_summaries "
            "WHERE tenant = ? AND agent = ? AND session = ? AND type = 'summary' "
            "AND archived = 0 ORDER BY id DESC LIMIT 1",
            (scope.tenant, scope.agent, session),
        )
        return to_event(rows[0]) if rows else None

    def session_info(self, scope: Scope, session: str) -> SessionInfo | None:
        rows = self._session_rows(scope, "AND session = ?", (session,))
        return rows[0] if rows else None

    def list_sessions(self, scope: Scope) -> list[SessionInfo]:
        return self._session_rows(scope, "", ())

    def _session_rows(
        self, scope: Scope, where: str, params: tuple[Any, ...]
    ) -> list[SessionInfo]:
        rows = self._query(
            "SELECT session, COUNT(*), SUM(type = 'message'), SUM(tokens), "
            "SUM(CASE WHEN archived = 0 THEN tokens ELSE 0 END), MIN(ts), MAX(ts) "
            f"FROM events WHERE tenant = ? AND agent = ? {where} "
            "GROUP BY session ORDER BY MAX(id) DESC",
            (scope.tenant, scope.agent, *params),
        )
        return [
            SessionInfo(
                id=r[0], event_count=r[1], message_count=r[2], token_count=r[3],
                active_token_count=r[4], created_at=from_micros(r[5]),
                updated_at=from_micros(r[6]),
            )
            for r in rows
        ]

    def search_events(
        self, scope: Scope, query: str, *, limit: int = 10, filters: SearchFilters = NO_FILTERS
    ) -> list[SearchHit]:
        return self._keyword_search("event", scope, query, limit, filters)

    def _keyword_search(
        self, kind: str, scope: Scope, query: str, limit: int, filters: SearchFilters
    ) -> list[SearchHit]:
        match = fts_query(query)
        if match is None:
            return []
        k = KINDS[kind]
        where, params = filter_sql(kind, filters)
        # Rank on keys only, then read the top hits: reading every matching row's
        # content before sorting costs about twice as much.
        rows = self._query(
            f"SELECT {k.hit_columns}, r.rank FROM ("
            f"SELECT f.rowid AS key, f.rank AS rank FROM {k.fts} f "
            f"JOIN {k.table} {k.alias} ON {k.alias}.{k.key} = f.rowid "
            f"WHERE {k.fts} MATCH ? AND {k.alias}.tenant = ? AND {k.alias}.agent = ?{where} "
            f"ORDER BY f.rank LIMIT ?) r JOIN {k.table} {k.alias} ON {k.alias}.{k.key} = r.key "
            "ORDER BY r.rank",
            (match, scope.tenant, scope.agent, *params, limit),
        )
        return [to_hit(kind, r[:-1], bm25_to_score(r[-1])) for r in rows]

    # -- memories -----------------------------------------------------------------
    def put_memory(self, scope: Scope, memory: Memory) -> None:
        self.put_memories(scope, [memory])

    def put_memories(
        self, scope: Scope, memories: Sequence[Memory], vectors: Vectors | None = None
    ) -> None:
        with self._write() as db:
            for start in range(0, len(memories), 500):
                ids = [m.id for m in memories[start : start + 500]]
                taken = db.execute(
                    f"SELECT id FROM memories WHERE id IN ({', '.join('?' * len(ids))}) "
                    "AND (tenant != ? OR agent != ?) LIMIT 1",
                    (*ids, scope.tenant, scope.agent),
                ).fetchone()
                if taken is not None:
                    raise StoreError(f"memory id {taken[0]} is taken")
            self._upsert_memories(db, scope, memories)
        if vectors is not None:
            self.set_embeddings(scope, "memory", [m.id for m in memories], vectors)

    @staticmethod
    def _upsert_memories(
        db: sqlite3.Connection, scope: Scope, memories: Sequence[Memory]
    ) -> None:
        db.executemany(
            "INSERT INTO memories (id, tenant, agent, type, content, tags, created, "
            "updated, expires, source, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT (id) DO UPDATE SET type = excluded.type, "
            "embedding = CASE WHEN content = excluded.content THEN embedding END, "
            "content = excluded.content, tags = excluded.tags, "
            "created = excluded.created, updated = excluded.updated, "
            "expires = excluded.expires, source = excluded.source, "
            "metadata = excluded.metadata",
            [
                (
                    m.id, scope.tenant, scope.agent, m.type, m.content, dump_tags(m.tags),
                    to_micros(m.created_at), to_micros(m.updated_at),
                    None if m.expires_at is None else to_micros(m.expires_at),
                    m.source, dump_json(m.metadata),
                )
                for m in memories
            ],
        )

    def get_memory(self, scope: Scope, memory_id: str) -> Memory | None:
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ? AND tenant = ? AND agent = ?",
            (memory_id, scope.tenant, scope.agent),
        )
        return to_memory(rows[0]) if rows else None

    def list_memories(
        self,
        scope: Scope,
        *,
        types: Sequence[str] = (),
        now: datetime | None = None,
        expired_only: bool = False,
        limit: int | None = None,
    ) -> list[Memory]:
        where, params = memory_filters(SearchFilters(types=tuple(types), now=now), expired_only)
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE tenant = ? AND agent = ?{where} "
            "ORDER BY updated DESC, rowid DESC LIMIT ?",
            (scope.tenant, scope.agent, *params, -1 if limit is None else limit),
        )
        return [to_memory(r) for r in rows]

    def delete_memory(self, scope: Scope, memory_id: str) -> bool:
        with self._write() as db:
            cursor = db.execute(
                "DELETE FROM memories WHERE id = ? AND tenant = ? AND agent = ?",
                (memory_id, scope.tenant, scope.agent),
            )
            if cursor.rowcount:
                db.execute("DELETE FROM memory_versions WHERE memory_id = ? AND tenant = ? "
                           "AND agent = ?", (memory_id, scope.tenant, scope.agent))
            return cursor.rowcount > 0

    def supersede_memory(self, scope: Scope, memory: Memory, reason: str, now: datetime) -> int:
        with self._write() as db:
            version = db.execute(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM memory_versions WHERE memory_id = ?",
                (memory.id,),
            ).fetchone()[0]
            copied = db.execute(
                "INSERT INTO memory_versions (memory_id, tenant, agent, version, type, content, "
                "tags, created, updated, expires, source, superseded, reason) "
                "SELECT id, tenant, agent, ?, type, content, tags, created, updated, expires, "
                "source, ?, ? FROM memories WHERE id = ? AND tenant = ? AND agent = ?",
                (version, to_micros(now), reason, memory.id, scope.tenant, scope.agent),
            )
            if copied.rowcount == 0:
                raise NotFoundError(f"no memory {memory.id!r}")
            self._upsert_memories(db, scope, [memory])
        return int(version)

    def memory_history(self, scope: Scope, memory_id: str) -> list[MemoryVersion]:
        rows = self._query(
            "SELECT memory_id, version, type, content, tags, created, updated, expires, "
            "superseded, reason FROM memory_versions WHERE memory_id = ? AND tenant = ? "
            "AND agent = ? ORDER BY version",
            (memory_id, scope.tenant, scope.agent),
        )
        return [to_version(r) for r in rows]

    def purge_expired(self, scope: Scope, now: datetime) -> int:
        with self._write() as db:
            ids = [r[0] for r in db.execute(
                "SELECT id FROM memories WHERE tenant = ? AND agent = ? AND expires <= ?",
                (scope.tenant, scope.agent, to_micros(now)),
            )]
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                db.execute(f"DELETE FROM memories WHERE id IN ({marks})", chunk)
                db.execute(f"DELETE FROM memory_versions WHERE memory_id IN ({marks})", chunk)
        return len(ids)

    def search_memories(
        self, scope: Scope, query: str, *, limit: int = 10, filters: SearchFilters = NO_FILTERS
    ) -> list[SearchHit]:
        return self._keyword_search("memory", scope, query, limit, filters)

    # -- state --------------------------------------------------------------------
    def set_state(self, scope: Scope, key: str, value: str, now: datetime) -> StateItem:
        with self._write() as db:
            db.execute(
                "INSERT INTO state (tenant, agent, key, value, updated) VALUES (?,?,?,?,?) "
                "ON CONFLICT (tenant, agent, key) DO UPDATE SET value = excluded.value, "
                "updated = excluded.updated",
                (scope.tenant, scope.agent, key, value, to_micros(now)),
            )
        return StateItem(key=key, value=value, updated_at=now)

    def get_state(self, scope: Scope, key: str) -> StateItem | None:
        rows = self._query(
            "SELECT key, value, updated FROM state WHERE tenant = ? AND agent = ? AND key = ?",
            (scope.tenant, scope.agent, key),
        )
        return to_state(rows[0]) if rows else None

    def list_state(self, scope: Scope) -> list[StateItem]:
        rows = self._query(
            "SELECT key, value, updated FROM state WHERE tenant = ? AND agent = ? ORDER BY key",
            (scope.tenant, scope.agent),
        )
        return [to_state(r) for r in rows]

    def delete_state(self, scope: Scope, key: str) -> bool:
        with self._write() as db:
            cursor = db.execute(
                "DELETE FROM state WHERE tenant = ? AND agent = ? AND key = ?",
                (scope.tenant, scope.agent, key),
            )
            return cursor.rowcount > 0

    # -- documents ----------------------------------------------------------------
    def put_document(self, scope: Scope, document: Document) -> Document:
        return self.put_documents(scope, [document])[0]

    def put_documents(self, scope: Scope, documents: Sequence[Document]) -> list[Document]:
        with self._write() as db:
            return [self._upsert_document(db, scope, d) for d in documents]

    @staticmethod
    def _upsert_document(db: sqlite3.Connection, scope: Scope, document: Document) -> Document:
        """Insert, or keep the stored version in ``document_versions`` and replace it
        with the next version number; identical content, tags and metadata: no-op."""
        key = (scope.tenant, scope.agent, document.path)
        tags, metadata = dump_tags(document.tags), dump_json(document.metadata)
        old = db.execute(
            "SELECT version, content, tags, metadata, created, updated FROM documents "
            "WHERE tenant = ? AND agent = ? AND path = ?", key).fetchone()
        if old is None:
            db.execute(
                "INSERT INTO documents (tenant, agent, path, content, tags, version, "
                "created, updated, metadata) VALUES (?,?,?,?,?,?,?,?,?)",
                (*key, document.content, tags, document.version,
                 to_micros(document.created_at), to_micros(document.updated_at), metadata),
            )
            return document
        if (old[1], old[2], old[3]) == (document.content, tags, metadata):
            return replace(document, version=old[0], created_at=from_micros(old[4]),
                           updated_at=from_micros(old[5]))
        db.execute(
            "INSERT OR REPLACE INTO document_versions (tenant, agent, path, version, content, "
            "tags, created, updated, metadata, superseded) SELECT tenant, agent, path, "
            "version, content, tags, created, updated, metadata, ? FROM documents "
            "WHERE tenant = ? AND agent = ? AND path = ?",
            (to_micros(document.updated_at), *key),
        )
        version = max(document.version, old[0] + 1)
        db.execute(
            "UPDATE documents SET embedding = CASE WHEN content = ? THEN embedding END, "
            "content = ?, tags = ?, version = ?, updated = ?, metadata = ? "
            "WHERE tenant = ? AND agent = ? AND path = ?",
            (document.content, document.content, tags, version,
             to_micros(document.updated_at), metadata, *key),
        )
        return replace(document, version=version, created_at=from_micros(old[4]))

    def get_document(self, scope: Scope, path: str) -> Document | None:
        rows = self._query(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents "
            "WHERE tenant = ? AND agent = ? AND path = ?",
            (scope.tenant, scope.agent, path),
        )
        return to_document(rows[0]) if rows else None

    def list_documents(self, scope: Scope, prefix: str = "/") -> list[Document]:
        rows = self._query(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE tenant = ? AND agent = ? "
            "AND substr(path, 1, ?) = ? ORDER BY path",
            (scope.tenant, scope.agent, len(prefix), prefix),
        )
        return [to_document(r) for r in rows]

    def delete_document(self, scope: Scope, path: str) -> bool:
        with self._write() as db:
            cursor = db.execute(
                "DELETE FROM documents WHERE tenant = ? AND agent = ? AND path = ?",
                (scope.tenant, scope.agent, path),
            )
            db.execute("DELETE FROM document_versions WHERE tenant = ? AND agent = ? "
                       "AND path = ?", (scope.tenant, scope.agent, path))
            return cursor.rowcount > 0

    def document_history(self, scope: Scope, path: str) -> list[DocumentVersion]:
        rows = self._query(
            "SELECT path, version, content, tags, created, updated, superseded, metadata "
            "FROM document_versions WHERE tenant = ? AND agent = ? AND path = ? "
            "ORDER BY version",
            (scope.tenant, scope.agent, path),
        )
        return [
            DocumentVersion(
                path=r[0], version=r[1], content=r[2], tags=load_tags(r[3]),
                created_at=from_micros(r[4]), updated_at=from_micros(r[5]),
                superseded_at=from_micros(r[6]), metadata=load_json(r[7]) or {},
            )
            for r in rows
        ]

    def search_documents(
        self, scope: Scope, query: str, *, limit: int = 10, filters: SearchFilters = NO_FILTERS
    ) -> list[SearchHit]:
        return self._keyword_search("document", scope, query, limit, filters)

    # -- compactions --------------------------------------------------------------
    def add_compaction(self, scope: Scope, compaction: NewCompaction) -> Compaction:
        with self._write() as db:
            return self._insert_compaction(db, scope, compaction)

    @staticmethod
    def _insert_compaction(
        db: sqlite3.Connection, scope: Scope, c: NewCompaction
    ) -> Compaction:
        cursor = db.execute(
            "INSERT INTO compactions (tenant, agent, session, strategy, first_event_id, "
            "last_event_id, summary_event_id, summary, tokens_before, tokens_after, "
            "created) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                scope.tenant, scope.agent, c.session, c.strategy, c.first_event_id,
                c.last_event_id, c.summary_event_id, c.summary, c.tokens_before,
                c.tokens_after, to_micros(c.created_at),
            ),
        )
        assert cursor.lastrowid is not None
        return Compaction(
            id=cursor.lastrowid, session=c.session, strategy=c.strategy,
            first_event_id=c.first_event_id, last_event_id=c.last_event_id,
            summary_event_id=c.summary_event_id, summary=c.summary,
            tokens_before=c.tokens_before, tokens_after=c.tokens_after,
            created_at=c.created_at,
        )

    def list_compactions(self, scope: Scope, session: str) -> list[Compaction]:
        rows = self._query(
            f"SELECT {COMPACTION_COLUMNS} FROM compactions "
            "WHERE tenant = ? AND agent = ? AND session = ? ORDER BY id",
            (scope.tenant, scope.agent, session),
        )
        return [
            Compaction(
                id=r[0], session=r[1], strategy=r[2], first_event_id=r[3],
                last_event_id=r[4], summary_event_id=r[5], summary=r[6],
                tokens_before=r[7], tokens_after=r[8], created_at=from_micros(r[9]),
            )
            for r in rows
        ]
