"""Whole-scope export and import in the PostgreSQL backend (``loci migrate``)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Any

import numpy as np

from loci.models import ApiKey, Event, Scope
from loci.search import conversation
from loci.store.base import ScopeData, Vectors
from loci.store.codec import from_micros, to_micros
from loci.store.postgres_base import Cursor, PostgresBase
from loci.store.postgres_rows import (
    COMPACTION_COLUMNS,
    DOCUMENT_COLUMNS,
    EVENT_COLUMNS,
    KINDS,
    MEMORY_COLUMNS,
    check_text,
    json_value,
    path_to_ltree,
)
from loci.store.rows import (
    to_compaction,
    to_document,
    to_document_version,
    to_event,
    to_memory,
    to_state,
    to_version,
)

_SCOPED_TABLES = ("events", "memories", "memory_versions", "state", "documents",
                  "document_versions", "compactions")


class PostgresTransfer(PostgresBase):
    """Mixed into :class:`PostgresStore`."""

    def set_embeddings(
        self, scope: Scope, kind: str, ids: Sequence[str], vectors: Vectors
    ) -> None:
        raise NotImplementedError  # PostgresVectors, earlier in the MRO, provides it

    def list_scopes(self) -> list[Scope]:
        union = " UNION ".join(f"SELECT tenant, agent FROM {t}" for t in _SCOPED_TABLES)
        rows = self._query(f"SELECT * FROM ({union}) s ORDER BY tenant COLLATE \"C\", "
                           "agent COLLATE \"C\"")
        return [Scope(r[0], r[1]) for r in rows]

    def list_meta(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self._query("SELECT key, value FROM meta")}

    def export_api_keys(self) -> list[tuple[ApiKey, str]]:
        rows = self._query("SELECT id, tenant, label, created, revoked, secret_hash "
                           "FROM api_keys ORDER BY created, id COLLATE \"C\"")
        return [(ApiKey(r[0], r[1], r[2], from_micros(r[3]), bool(r[4])), r[5]) for r in rows]

    def export_scope(self, scope: Scope) -> ScopeData:
        s = (scope.tenant, scope.agent)
        where = "WHERE tenant = %s AND agent = %s"
        q = self._query
        return ScopeData(
            scope=scope,
            events=tuple(to_event(r) for r in q(
                f"SELECT {EVENT_COLUMNS} FROM events {where} ORDER BY id", s)),
            memories=tuple(to_memory(r) for r in q(
                f"SELECT {MEMORY_COLUMNS} FROM memories {where} ORDER BY seq", s)),
            memory_versions=tuple((to_version(r[:-1]), r[-1]) for r in q(
                "SELECT memory_id, version, type, content, loci_words(tags), created, "
                f"updated, expires, superseded, reason, source FROM memory_versions {where} "
                "ORDER BY memory_id COLLATE \"C\", version", s)),
            state=tuple(to_state(r) for r in q(
                f"SELECT key, value, updated FROM state {where} ORDER BY key COLLATE \"C\"",
                s)),
            documents=tuple(to_document(r) for r in q(
                f"SELECT {DOCUMENT_COLUMNS} FROM documents {where} ORDER BY seq", s)),
            document_versions=tuple(to_document_version(r) for r in q(
                "SELECT path, version, content, loci_words(tags), created, updated, "
                f"superseded, metadata::text FROM document_versions {where} "
                "ORDER BY path COLLATE \"C\", version", s)),
            compactions=tuple(to_compaction(r) for r in q(
                f"SELECT {COMPACTION_COLUMNS} FROM compactions {where} ORDER BY id", s)),
            vectors={kind: self._export_vectors(kind, scope) for kind in KINDS},
        )

    def _export_vectors(self, kind: str, scope: Scope) -> tuple[list[str], Vectors]:
        k = KINDS[kind]
        rows = self._query(
            f"SELECT {k.key}, embedding FROM {k.table} WHERE tenant = %s AND agent = %s "
            f"AND embedding IS NOT NULL ORDER BY {k.order}", (scope.tenant, scope.agent))
        if not rows:
            return [], np.zeros((0, 0), np.float32)
        vectors = np.stack([np.asarray(r[1].to_numpy(), np.float32) for r in rows])
        return [str(r[0]) for r in rows], vectors

    def import_scope(self, data: ScopeData) -> None:
        with self._write() as cur:
            _import_events(cur, data.scope, data.events)
            _import_rows(cur, data)
            # Ids were given explicitly: move the sequences past them.
            for table in ("events", "compactions"):
                cur.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"GREATEST((SELECT MAX(id) FROM {table}), 1))")
        for kind, (ids, vectors) in data.vectors.items():
            if ids:
                self.set_embeddings(data.scope, kind, ids, vectors)


def _import_events(cur: Cursor, scope: Scope, events: Sequence[Event]) -> None:
    """Insert events with their ids; search columns are derived per session, in order,
    as appending them would have (``search.conversation``)."""
    rows = []
    ordered = sorted(events, key=lambda e: (e.session, e.id))
    for session, group in groupby(ordered, key=lambda e: e.session):
        batch = list(group)
        columns = conversation.index_columns(batch, [])
        for e, (extra, ctx) in zip(batch, columns, strict=True):
            check_text(session, e.type, e.role, e.content, e.tool_name, e.tool_call_id,
                       e.masked, extra, ctx)
            rows.append((e.id, scope.tenant, scope.agent, session, e.type, e.role, e.content,
                         to_micros(e.timestamp), e.tokens, e.tool_name, e.tool_call_id,
                         json_value(e.args), json_value(e.metadata), e.archived, e.masked,
                         extra, ctx))
    cur.executemany(
        "INSERT INTO events (id, tenant, agent, session, type, role, content, ts, tokens, "
        "tool_name, tool_call_id, args, metadata, archived, masked, search_extra, "
        "search_context) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, "
        "%s::jsonb, %s, %s, %s, %s)", rows)


def _import_rows(cur: Cursor, data: ScopeData) -> None:
    """Memories (and history), state, documents (and history) and compactions."""
    s = (data.scope.tenant, data.scope.agent)
    for m in data.memories:
        check_text(m.id, m.type, m.content, m.source, *m.tags)
    cur.executemany(
        "INSERT INTO memories (id, tenant, agent, type, content, tags, created, updated, "
        "expires, source, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
        "%s::jsonb)",
        [(m.id, *s, m.type, m.content, list(m.tags), to_micros(m.created_at),
          to_micros(m.updated_at), _micros(m.expires_at), m.source, json_value(m.metadata))
         for m in data.memories])
    cur.executemany(
        "INSERT INTO memory_versions (memory_id, tenant, agent, version, type, content, "
        "tags, created, updated, expires, source, superseded, reason) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        [(v.memory_id, *s, v.version, v.type, v.content, list(v.tags),
          to_micros(v.created_at), to_micros(v.updated_at), _micros(v.expires_at), source,
          to_micros(v.superseded_at), v.reason) for v, source in data.memory_versions])
    cur.executemany(
        "INSERT INTO state (tenant, agent, key, value, updated) VALUES (%s, %s, %s, %s, %s)",
        [(*s, i.key, i.value, to_micros(i.updated_at)) for i in data.state])
    cur.executemany(
        "INSERT INTO documents (tenant, agent, path, lpath, content, tags, version, created, "
        "updated, metadata) VALUES (%s, %s, %s, %s::ltree, %s, %s, %s, %s, %s, %s::jsonb)",
        [(*s, d.path, path_to_ltree(d.path), d.content, list(d.tags), d.version,
          to_micros(d.created_at), to_micros(d.updated_at), json_value(d.metadata))
         for d in data.documents])
    cur.executemany(
        "INSERT INTO document_versions (tenant, agent, path, version, content, tags, "
        "created, updated, metadata, superseded) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s)",
        [(*s, v.path, v.version, v.content, list(v.tags), to_micros(v.created_at),
          to_micros(v.updated_at), json_value(v.metadata), to_micros(v.superseded_at))
         for v in data.document_versions])
    cur.executemany(
        "INSERT INTO compactions (id, tenant, agent, session, strategy, first_event_id, "
        "last_event_id, summary_event_id, summary, tokens_before, tokens_after, created) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        [(c.id, *s, c.session, c.strategy, c.first_event_id, c.last_event_id,
          c.summary_event_id, c.summary, c.tokens_before, c.tokens_after,
          to_micros(c.created_at)) for c in data.compactions])


def _micros(value: Any) -> int | None:
    return None if value is None else to_micros(value)
