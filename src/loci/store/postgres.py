"""The PostgreSQL backend: the store for teams and scale.

Many Loci processes (servers, CLIs, workers) share one database. A psycopg 3 connection
pool serves each process's threads; every write is one transaction; writers of one
session are serialized by a transaction-scoped advisory lock so that event ids grow in
commit order within a session. Full-text search uses generated ``tsvector`` columns with
GIN indexes and BM25 over postings derived from them (``postgres_keywords``), vectors
use pgvector with HNSW indexes, document paths are ``ltree`` too.

Tenant isolation: every statement filters by ``tenant`` and ``agent`` (the contract
suite proves it). Row-level security is not enabled: the process connects as one role
for all tenants, so RLS would only add a ``SET LOCAL loci.tenant`` per transaction
without a second identity to enforce it against; see docs/architecture.md.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from loci.errors import ConfigError
from loci.models import Compaction, Event, NewEvent, Scope, SessionInfo
from loci.search import conversation
from loci.store.base import CompactionPlan, Store
from loci.store.codec import from_micros, load_json, to_micros
from loci.store.postgres_base import Cursor, translated_errors
from loci.store.postgres_documents import PostgresDocuments
from loci.store.postgres_keywords import PostgresKeywords
from loci.store.postgres_memories import PostgresMemories
from loci.store.postgres_records import PostgresRecords
from loci.store.postgres_rows import EVENT_COLUMNS, check_text, json_value
from loci.store.postgres_schema import migrate
from loci.store.postgres_transfer import PostgresTransfer
from loci.store.postgres_vectors import PostgresVectors
from loci.store.rows import in_time_order, to_event
from loci.timeutil import utc_now

#: Connections per process. Each thread holds one only for the length of a call.
POOL_SIZE = 8


def _configure(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)  # numpy arrays ↔ vector, in text and binary


class PostgresStore(PostgresVectors, PostgresKeywords, PostgresMemories, PostgresDocuments,
                    PostgresRecords, PostgresTransfer, Store):
    """Storage in one PostgreSQL database (``postgresql://user@host/db``)."""

    def __init__(self, url: str, *, pool_size: int = POOL_SIZE) -> None:
        if not url.startswith(("postgresql:", "postgres:")):
            raise ConfigError(f"not a PostgreSQL URL: {url!r}")
        self.url = url
        with translated_errors("open"):
            with psycopg.connect(url, autocommit=True) as conn:
                migrate(conn, to_micros(utc_now()))
            self._pool = ConnectionPool(
                url, min_size=1, max_size=pool_size, kwargs={"autocommit": True},
                configure=_configure, open=True, name="loci",
            )
        self._indexed = set()
        self._bulk = 0
        self._vector_lock = threading.Lock()

    def close(self) -> None:
        self._pool.close()

    # -- meta ---------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = %s", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        check_text(key, value)
        with self._write() as cur:
            cur.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- events -------------------------------------------------------------------
    def append_events(
        self, scope: Scope, session: str, events: Sequence[NewEvent]
    ) -> list[Event]:
        with self._write() as cur:
            return self._insert_events(cur, scope, session, events)

    def _insert_events(
        self, cur: Cursor, scope: Scope, session: str, events: Sequence[NewEvent]
    ) -> list[Event]:
        if not events:
            return []
        self._lock_session(cur, scope, session)
        if any(e.stamped for e in events):
            cur.execute("SELECT ts FROM events WHERE tenant = %s AND agent = %s AND "
                        "session = %s ORDER BY id DESC LIMIT 1",
                        (scope.tenant, scope.agent, session))
            last = cur.fetchone()
            events = in_time_order(events, int(last[0]) if last else None)
        columns = self._search_columns(cur, scope, session, events)
        rows = [
            (
                scope.tenant, scope.agent, session, e.type, e.role, e.content,
                to_micros(e.timestamp), e.tokens, e.tool_name, e.tool_call_id,
                json_value(e.args), json_value(e.metadata), extra, context,
            )
            for e, (extra, context) in zip(events, columns, strict=True)
        ]
        for row in rows:
            check_text(session, *row[3:6], *row[8:])
        # One statement for the batch; ids come back in insertion order (ORDINALITY).
        cur.execute(
            "INSERT INTO events (tenant, agent, session, type, role, content, ts, tokens, "
            "tool_name, tool_call_id, args, metadata, search_extra, search_context) "
            "SELECT %s, %s, %s, r.type, r.role, r.content, r.ts, r.tokens, r.tool_name, "
            "r.tool_call_id, r.args::jsonb, r.metadata::jsonb, r.extra, r.context "
            "FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[], %s::int[], "
            "%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[]) "
            "WITH ORDINALITY AS r(type, role, content, ts, tokens, tool_name, tool_call_id, "
            "args, metadata, extra, context, n) ORDER BY r.n RETURNING id",
            (scope.tenant, scope.agent, session,
             *([row[i] for row in rows] for i in range(3, 14))),
        )
        ids = sorted(int(r[0]) for r in cur.fetchall())
        return [
            Event(
                id=ids[i], session=session, type=e.type, role=e.role,
                content=e.content, timestamp=e.timestamp, tokens=e.tokens,
                tool_name=e.tool_name, tool_call_id=e.tool_call_id, args=e.args,
                metadata=dict(e.metadata),
            )
            for i, e in enumerate(events)
        ]

    @staticmethod
    def _search_columns(
        cur: Cursor, scope: Scope, session: str, events: Sequence[NewEvent]
    ) -> list[tuple[str | None, str | None]]:
        """(``search_extra``, ``search_context``) of events about to be appended, from
        the session's last turns (read under the session lock; see
        ``search.conversation``)."""
        previous: list[tuple[str, Any]] = []
        if conversation.CONTEXT_TURNS:
            cur.execute(
                "SELECT content, metadata::text FROM events WHERE tenant = %s AND agent = %s "
                "AND session = %s ORDER BY id DESC LIMIT %s",
                (scope.tenant, scope.agent, session, conversation.CONTEXT_TURNS),
            )
            previous = [(r[0], load_json(r[1])) for r in reversed(cur.fetchall())]
        return conversation.index_columns(events, previous)

    def apply_compaction(self, scope: Scope, session: str, plan: CompactionPlan
                         ) -> tuple[Event | None, Compaction]:
        for text, _ in plan.masks.values():
            check_text(text)
        with self._write() as cur:
            self._lock_session(cur, scope, session)
            cur.executemany(
                "UPDATE events SET masked = %s, tokens = %s WHERE tenant = %s AND agent = %s "
                "AND session = %s AND id = %s",
                [(text, tokens, scope.tenant, scope.agent, session, i)
                 for i, (text, tokens) in plan.masks.items()],
            )
            for document in plan.artifacts:
                check_text(document.path, document.content)
                self._upsert_document(cur, scope, document)
            event = None
            record = plan.compaction
            if plan.summary is not None:
                (event,) = self._insert_events(cur, scope, session, [plan.summary])
                record = replace(record, summary_event_id=event.id)
            cur.execute(
                "UPDATE events SET archived = true WHERE tenant = %s AND agent = %s "
                "AND session = %s AND id = ANY(%s)",
                (scope.tenant, scope.agent, session, list(plan.archive_ids)),
            )
            return event, self._insert_compaction(cur, scope, record)

    def list_events(
        self,
        scope: Scope,
        session: str,
        *,
        include_archived: bool = True,
        after_id: int = 0,
        limit: int | None = None,
    ) -> list[Event]:
        archived = "" if include_archived else " AND NOT archived"
        rows = self._query(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE tenant = %s AND agent = %s "
            f"AND session = %s AND id > %s{archived} ORDER BY id LIMIT %s",
            (scope.tenant, scope.agent, session, after_id, limit),
        )
        return [to_event(row) for row in rows]

    def tail_events(
        self, scope: Scope, session: str, limit: int, *, include_archived: bool = False
    ) -> list[Event]:
        archived = "" if include_archived else " AND NOT archived"
        rows = self._query(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE tenant = %s AND agent = %s "
            f"AND session = %s{archived} ORDER BY id DESC LIMIT %s",
            (scope.tenant, scope.agent, session, limit),
        )
        return [to_event(row) for row in reversed(rows)]

    def set_archived(self, scope: Scope, session: str, ids: Sequence[int]) -> int:
        with self._write() as cur:
            cur.execute(
                "UPDATE events SET archived = true WHERE tenant = %s AND agent = %s "
                "AND session = %s AND id = ANY(%s) AND NOT archived",
                (scope.tenant, scope.agent, session, list(ids)),
            )
            return cur.rowcount

    def session_activity(self, scope: Scope, session: str) -> tuple[int, datetime] | None:
        key = (scope.tenant, scope.agent, session)
        rows = self._query(
            "SELECT (SELECT COALESCE(SUM(tokens), 0) FROM events WHERE tenant = %s "
            "AND agent = %s AND session = %s AND NOT archived), "
            "(SELECT ts FROM events WHERE tenant = %s AND agent = %s AND session = %s "
            "ORDER BY id DESC LIMIT 1)",
            (*key, *key),
        )
        tokens, last = rows[0]
        return None if last is None else (int(tokens), from_micros(last))

    def latest_summary(self, scope: Scope, session: str) -> Event | None:
        rows = self._query(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE tenant = %s AND agent = %s "
            "AND session = %s AND type = 'summary' AND NOT archived ORDER BY id DESC LIMIT 1",
            (scope.tenant, scope.agent, session),
        )
        return to_event(rows[0]) if rows else None

    def session_info(self, scope: Scope, session: str) -> SessionInfo | None:
        rows = self._session_rows(scope, "AND session = %s", (session,))
        return rows[0] if rows else None

    def list_sessions(self, scope: Scope) -> list[SessionInfo]:
        return self._session_rows(scope, "", ())

    def _session_rows(
        self, scope: Scope, where: str, params: tuple[Any, ...]
    ) -> list[SessionInfo]:
        rows = self._query(
            "SELECT session, COUNT(*), COUNT(*) FILTER (WHERE type = 'message'), SUM(tokens), "
            "COALESCE(SUM(tokens) FILTER (WHERE NOT archived), 0), MIN(ts), MAX(ts) "
            f"FROM events WHERE tenant = %s AND agent = %s {where} "
            "GROUP BY session ORDER BY MAX(id) DESC",
            (scope.tenant, scope.agent, *params),
        )
        return [
            SessionInfo(
                id=r[0], event_count=int(r[1]), message_count=int(r[2]),
                token_count=int(r[3]), active_token_count=int(r[4]),
                created_at=from_micros(r[5]), updated_at=from_micros(r[6]),
            )
            for r in rows
        ]
