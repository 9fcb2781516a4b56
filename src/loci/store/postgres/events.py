"""Events, sessions and compactions in the PostgreSQL backend."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from loci.models import Compaction, Event, NewEvent, Scope, SessionInfo
from loci.search import conversation
from loci.store.base import CompactionPlan, NewCompaction
from loci.store.codec import from_micros, load_json, to_micros
from loci.store.postgres.base import Cursor, PostgresBase
from loci.store.postgres.documents import upsert_document
from loci.store.postgres.rows import COMPACTION_COLUMNS, EVENT_COLUMNS, check_text, json_value
from loci.store.rows import in_time_order, to_compaction, to_event


class PostgresEvents(PostgresBase):
    """The append-only event log of each session, its sessions and compactions."""

    def append_events(
        self, scope: Scope, session: str, events: Sequence[NewEvent]
    ) -> list[Event]:
        with self._write() as cur:
            appended = self._insert_events(cur, scope, session, events)
        self._grew("events", len(appended))
        return appended

    def _insert_events(
        self, cur: Cursor, scope: Scope, session: str, events: Sequence[NewEvent]
    ) -> list[Event]:
        if not events:
            return []
        latest, previous = self._session_tail(cur, scope, session)
        if any(e.stamped for e in events):
            events = in_time_order(events, latest)
        columns = conversation.index_columns(events, previous)
        rows = [
            (
                scope.tenant, scope.agent, session, e.type, e.role, e.content,
                to_micros(e.timestamp), e.tokens, e.tool_name, e.tool_call_id,
                json_value(e.args, keep_empty=True), json_value(e.metadata), extra, context,
                e.archived,
            )
            for e, (extra, context) in zip(events, columns, strict=True)
        ]
        for row in rows:
            check_text(session, *row[3:6], *row[8:14])
        # One statement for the batch; ids come back in insertion order (ORDINALITY).
        cur.execute(
            "INSERT INTO events (tenant, agent, session, type, role, content, ts, tokens, "
            "tool_name, tool_call_id, args, metadata, search_extra, search_context, "
            "archived) "
            "SELECT %s, %s, %s, r.type, r.role, r.content, r.ts, r.tokens, r.tool_name, "
            "r.tool_call_id, r.args::jsonb, r.metadata::jsonb, r.extra, r.context, "
            "r.archived FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[], "
            "%s::int[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
            "%s::text[], %s::boolean[]) "
            "WITH ORDINALITY AS r(type, role, content, ts, tokens, tool_name, tool_call_id, "
            "args, metadata, extra, context, archived, n) ORDER BY r.n RETURNING id",
            (scope.tenant, scope.agent, session,
             *([row[i] for row in rows] for i in range(3, 15))),
        )
        ids = sorted(int(r[0]) for r in cur.fetchall())
        return [
            Event(
                id=ids[i], session=session, type=e.type, role=e.role,
                content=e.content, timestamp=e.timestamp, tokens=e.tokens,
                tool_name=e.tool_name, tool_call_id=e.tool_call_id, args=e.args,
                metadata=dict(e.metadata), archived=e.archived,
            )
            for i, e in enumerate(events)
        ]

    def _session_tail(
        self, cur: Cursor, scope: Scope, session: str
    ) -> tuple[int | None, list[tuple[str, Any]]]:
        """Lock the session (``_lock_session``) and read its latest time and last turns
        (what the search columns of appended events are made from: see
        ``search.conversation``), in one round trip. The read is its own statement, so
        its snapshot is taken after the lock is granted and sees every turn committed
        before."""
        with cur.connection.pipeline():
            self._lock_session(cur, scope, session)
            cur.execute(
                "SELECT ts, content, metadata::text FROM events WHERE tenant = %s "
                "AND agent = %s AND session = %s ORDER BY id DESC LIMIT %s",
                (scope.tenant, scope.agent, session, max(conversation.CONTEXT_TURNS, 1)),
            )
            last = cur.fetchall()
        previous = [(r[1], load_json(r[2])) for r in reversed(last)]
        return (int(last[0][0]) if last else None), previous

    def apply_compaction(self, scope: Scope, session: str, plan: CompactionPlan
                         ) -> tuple[Event | None, Compaction]:
        for text, _ in plan.masks.values():
            check_text(text)
        with self._write() as cur:
            self._lock_session(cur, scope, session)
            cur.execute(
                "SELECT coalesce(max(id), 0) FROM compactions WHERE tenant = %s AND agent = %s "
                "AND session = %s", (scope.tenant, scope.agent, session))
            row = cur.fetchone()
            plan.check_basis(int(str(row[0])) if row else 0)
            cur.executemany(
                "UPDATE events SET masked = %s, tokens = %s WHERE tenant = %s AND agent = %s "
                "AND session = %s AND id = %s",
                [(text, tokens, scope.tenant, scope.agent, session, i)
                 for i, (text, tokens) in plan.masks.items()],
            )
            for document in plan.artifacts:
                check_text(document.path, document.content)
                upsert_document(cur, scope, document)
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
        self, scope: Scope, session: str, limit: int, *, include_archived: bool = False,
        before_id: int | None = None,
    ) -> list[Event]:
        archived = "" if include_archived else " AND NOT archived"
        rows = self._query(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE tenant = %s AND agent = %s "
            f"AND session = %s AND id < %s{archived} ORDER BY id DESC LIMIT %s",
            (scope.tenant, scope.agent, session,
             (1 << 62) if before_id is None else before_id, limit),
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

    def redact_events(self, scope: Scope, session: str,
                      metadata: Mapping[int, Mapping[str, Any]]) -> int:
        with self._write() as cur:
            cur.execute(
                "UPDATE events e SET metadata = v.m::jsonb "
                "FROM unnest(%s::bigint[], %s::text[]) AS v(id, m) WHERE e.id = v.id "
                "AND e.tenant = %s AND e.agent = %s AND e.session = %s",
                (list(metadata), [json_value(dict(m)) for m in metadata.values()],
                 scope.tenant, scope.agent, session))
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

    def speaker_sessions(self, scope: Scope, names: Sequence[str], limit: int
                         ) -> list[tuple[str, int]]:
        rows = self._query(
            "SELECT session, COUNT(*) FROM events WHERE tenant = %s AND agent = %s "
            "AND metadata ->> 'name' = ANY(%s) AND metadata ->> 'name' IS NOT NULL "
            "GROUP BY session ORDER BY COUNT(*) DESC, session LIMIT %s",
            (scope.tenant, scope.agent, list(dict.fromkeys(names)), limit))
        return [(row[0], int(row[1])) for row in rows]

    def speakers_among(self, scope: Scope, names: Sequence[str]) -> set[str]:
        if not names:
            return set()
        rows = self._query(
            "SELECT n FROM unnest(%s::text[]) n WHERE EXISTS (SELECT 1 FROM events "
            "WHERE tenant = %s AND agent = %s AND metadata ->> 'name' = n "
            "AND metadata ->> 'name' IS NOT NULL)",
            (list(dict.fromkeys(names)), scope.tenant, scope.agent))
        return {str(row[0]) for row in rows}

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

    def add_compaction(self, scope: Scope, compaction: NewCompaction) -> Compaction:
        with self._write() as cur:
            return self._insert_compaction(cur, scope, compaction)

    @staticmethod
    def _insert_compaction(cur: Cursor, scope: Scope, c: NewCompaction) -> Compaction:
        check_text(c.session, c.strategy, c.summary)
        cur.execute(
            "INSERT INTO compactions (tenant, agent, session, strategy, first_event_id, "
            "last_event_id, summary_event_id, summary, tokens_before, tokens_after, created) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (scope.tenant, scope.agent, c.session, c.strategy, c.first_event_id,
             c.last_event_id, c.summary_event_id, c.summary, c.tokens_before,
             c.tokens_after, to_micros(c.created_at)),
        )
        row = cur.fetchone()
        assert row is not None
        return Compaction(
            id=int(row[0]), session=c.session, strategy=c.strategy,
            first_event_id=c.first_event_id, last_event_id=c.last_event_id,
            summary_event_id=c.summary_event_id, summary=c.summary,
            tokens_before=c.tokens_before, tokens_after=c.tokens_after,
            created_at=c.created_at,
        )

    def count_compactions(self, scope: Scope, session: str) -> int:
        rows = self._query(
            "SELECT count(*) FROM compactions WHERE tenant = %s AND agent = %s "
            "AND session = %s", (scope.tenant, scope.agent, session))
        return int(rows[0][0])

    def list_compactions(self, scope: Scope, session: str) -> list[Compaction]:
        rows = self._query(
            f"SELECT {COMPACTION_COLUMNS} FROM compactions "
            "WHERE tenant = %s AND agent = %s AND session = %s ORDER BY id",
            (scope.tenant, scope.agent, session),
        )
        return [to_compaction(r) for r in rows]
