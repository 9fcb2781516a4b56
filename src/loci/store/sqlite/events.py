"""Events, sessions and compactions in the SQLite backend."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from loci.models import Compaction, Event, NewEvent, Scope, SessionInfo
from loci.store.base import CompactionPlan, NewCompaction
from loci.store.codec import dump_json, from_micros, to_micros
from loci.store.rows import in_time_order, to_event
from loci.store.sqlite.base import SQLiteBase
from loci.store.sqlite.documents import upsert_document
from loci.store.sqlite.rows import (
    COMPACTION_COLUMNS,
    EVENT_COLUMNS,
    SPEAKER,
    index_events,
    search_columns,
)


class SQLiteEvents(SQLiteBase):
    """The append-only event log of each session, its sessions and compactions."""

    def append_events(
        self, scope: Scope, session: str, events: Sequence[NewEvent]
    ) -> list[Event]:
        with self._write() as db:
            return self._insert_events(db, scope, session, events)

    @staticmethod
    def _insert_events(
        db: sqlite3.Connection, scope: Scope, session: str, events: Sequence[NewEvent]
    ) -> list[Event]:
        if any(e.stamped for e in events):
            last = db.execute(
                "SELECT ts FROM events INDEXED BY events_by_session WHERE tenant = ? AND "
                "agent = ? AND session = ? ORDER BY id DESC LIMIT 1",
                (scope.tenant, scope.agent, session)).fetchone()
            events = in_time_order(events, last[0] if last else None)
        rows = [
            (
                scope.tenant, scope.agent, session, e.type, e.role, e.content,
                to_micros(e.timestamp), e.tokens, e.tool_name, e.tool_call_id,
                dump_json(e.args, keep_empty=True), dump_json(e.metadata), extra, context,
                int(e.archived),
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
            "tokens, tool_name, tool_call_id, args, metadata, search_extra, search_context, "
            "archived) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        index_events(db, scope, "e.id >= ?", (first,))
        return [
            Event(
                id=first + i, session=session, type=e.type, role=e.role,
                content=e.content, timestamp=e.timestamp, tokens=e.tokens,
                tool_name=e.tool_name, tool_call_id=e.tool_call_id, args=e.args,
                metadata=dict(e.metadata), archived=e.archived,
            )
            for i, e in enumerate(events)
        ]

    def apply_compaction(self, scope: Scope, session: str, plan: CompactionPlan
                         ) -> tuple[Event | None, Compaction]:
        with self._write() as db:
            newest = db.execute(
                "SELECT coalesce(max(id), 0) FROM compactions WHERE tenant = ? AND agent = ? "
                "AND session = ?", (scope.tenant, scope.agent, session)).fetchone()[0]
            plan.check_basis(int(newest))
            db.executemany(
                "UPDATE events SET masked = ?, tokens = ? WHERE tenant = ? AND agent = ? "
                "AND session = ? AND id = ?",
                [(text, tokens, scope.tenant, scope.agent, session, i)
                 for i, (text, tokens) in plan.masks.items()],
            )
            for document in plan.artifacts:
                upsert_document(db, scope, document)
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
        self, scope: Scope, session: str, limit: int, *, include_archived: bool = False,
        before_id: int | None = None,
    ) -> list[Event]:
        archived = "" if include_archived else " AND archived = 0"
        rows = self._query(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE tenant = ? AND agent = ? "
            f"AND session = ? AND id < ?{archived} ORDER BY id DESC LIMIT ?",
            (scope.tenant, scope.agent, session,
             (1 << 62) if before_id is None else before_id, limit),
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

    def redact_events(self, scope: Scope, session: str,
                      metadata: Mapping[int, Mapping[str, Any]]) -> int:
        with self._write() as db:
            changed = db.executemany(
                "UPDATE events SET metadata = ? WHERE tenant = ? AND agent = ? "
                "AND session = ? AND id = ?",
                [(dump_json(dict(m)), scope.tenant, scope.agent, session, i)
                 for i, m in metadata.items()]).rowcount
        self._scrub(())  # the old pages leave the journal (freed ones are zeroed)
        return changed

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

    def speaker_sessions(self, scope: Scope, names: Sequence[str], limit: int
                         ) -> list[tuple[str, int]]:
        names = list(dict.fromkeys(names))
        if not names:
            return []
        rows = self._query(
            f"SELECT session, COUNT(*) FROM events INDEXED BY events_by_speaker "
            f"WHERE tenant = ? AND agent = ? AND {SPEAKER} IN ({', '.join('?' * len(names))}) "
            f"AND {SPEAKER} IS NOT NULL GROUP BY session ORDER BY COUNT(*) DESC, session "
            "LIMIT ?", (scope.tenant, scope.agent, *names, limit))
        return [(row[0], int(row[1])) for row in rows]

    def speakers_among(self, scope: Scope, names: Sequence[str]) -> set[str]:
        names = list(dict.fromkeys(names))
        if not names:
            return set()
        rows = self._query(
            f"SELECT n.column1 FROM (VALUES {', '.join(['(?)'] * len(names))}) n "
            "WHERE EXISTS (SELECT 1 FROM events INDEXED BY events_by_speaker "
            f"WHERE tenant = ? AND agent = ? AND {SPEAKER} = n.column1 "
            f"AND {SPEAKER} IS NOT NULL)", (*names, scope.tenant, scope.agent))
        return {str(row[0]) for row in rows}

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

    def count_compactions(self, scope: Scope, session: str) -> int:
        rows = self._query(
            "SELECT count(*) FROM compactions WHERE tenant = ? AND agent = ? "
            "AND session = ?", (scope.tenant, scope.agent, session))
        return int(rows[0][0])

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
