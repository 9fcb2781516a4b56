"""Whole-scope export and import in the SQLite backend (``loci migrate``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from itertools import groupby
from typing import Any

import numpy as np

from loci.models import ApiKey, Event, Scope
from loci.search import conversation
from loci.store.base import ScopeData, Vectors
from loci.store.codec import dump_json, dump_tags, from_micros, to_micros
from loci.store.rows import (
    to_compaction,
    to_document,
    to_document_version,
    to_event,
    to_memory,
    to_state,
    to_version,
)
from loci.store.sqlite_base import SQLiteBase
from loci.store.sqlite_fts import scope_base
from loci.store.sqlite_rows import (
    COMPACTION_COLUMNS,
    DOCUMENT_COLUMNS,
    EVENT_COLUMNS,
    KINDS,
    MEMORY_COLUMNS,
)

_SCOPED_TABLES = ("events", "memories", "memory_versions", "state", "documents",
                  "document_versions", "compactions")


class SQLiteTransfer(SQLiteBase):
    """Mixed into :class:`SQLiteStore`."""

    def set_embeddings(
        self, scope: Scope, kind: str, ids: Sequence[str], vectors: Vectors
    ) -> None:
        raise NotImplementedError  # SQLiteVectors, earlier in the MRO, provides it

    def list_scopes(self) -> list[Scope]:
        union = " UNION ".join(f"SELECT tenant, agent FROM {t}" for t in _SCOPED_TABLES)
        return [Scope(r[0], r[1]) for r in self._query(f"{union} ORDER BY 1, 2")]

    def list_meta(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self._query("SELECT key, value FROM meta")}

    def export_api_keys(self) -> list[tuple[ApiKey, str]]:
        rows = self._query("SELECT id, tenant, label, created, revoked, secret_hash "
                           "FROM api_keys ORDER BY created, id")
        return [(ApiKey(r[0], r[1], r[2], from_micros(r[3]), bool(r[4])), r[5]) for r in rows]

    def export_scope(self, scope: Scope) -> ScopeData:
        s = (scope.tenant, scope.agent)
        where = "WHERE tenant = ? AND agent = ?"
        q = self._query
        return ScopeData(
            scope=scope,
            events=tuple(to_event(r) for r in q(
                f"SELECT {EVENT_COLUMNS} FROM events {where} ORDER BY id", s)),
            memories=tuple(to_memory(r) for r in q(
                f"SELECT {MEMORY_COLUMNS} FROM memories {where} ORDER BY rowid", s)),
            memory_versions=tuple((to_version(r[:-1]), r[-1]) for r in q(
                "SELECT memory_id, version, type, content, tags, created, updated, expires, "
                f"superseded, reason, source FROM memory_versions {where} "
                "ORDER BY memory_id, version", s)),
            state=tuple(to_state(r) for r in q(
                f"SELECT key, value, updated FROM state {where} ORDER BY key", s)),
            documents=tuple(to_document(r) for r in q(
                f"SELECT {DOCUMENT_COLUMNS} FROM documents {where} ORDER BY rowid", s)),
            document_versions=tuple(to_document_version(r) for r in q(
                "SELECT path, version, content, tags, created, updated, superseded, metadata "
                f"FROM document_versions {where} ORDER BY path, version", s)),
            compactions=tuple(to_compaction(r) for r in q(
                f"SELECT {COMPACTION_COLUMNS} FROM compactions {where} ORDER BY id", s)),
            vectors={kind: self._export_vectors(kind, scope) for kind in KINDS},
        )

    def _export_vectors(self, kind: str, scope: Scope) -> tuple[list[str], Vectors]:
        k = KINDS[kind]
        rows = self._query(
            f"SELECT {k.public}, embedding FROM {k.table} WHERE tenant = ? AND agent = ? "
            f"AND embedding IS NOT NULL AND length(embedding) > 0 ORDER BY {k.key}",
            (scope.tenant, scope.agent))
        if not rows:
            return [], np.zeros((0, 0), np.float32)
        vectors = np.stack([np.frombuffer(r[1], np.float32) for r in rows])
        return [str(r[0]) for r in rows], vectors

    def import_scope(self, data: ScopeData) -> None:
        with self._write() as db:
            _import_events(db, data.scope, data.events)
            _import_rows(db, data)
        for kind, (ids, vectors) in data.vectors.items():
            if ids:
                self.set_embeddings(data.scope, kind, ids, vectors)


def _import_events(db: sqlite3.Connection, scope: Scope, events: Sequence[Event]) -> None:
    """Insert events with their ids; search columns are derived per session, in order,
    as appending them would have (``search.conversation``)."""
    rows = []
    ordered = sorted(events, key=lambda e: (e.session, e.id))
    for session, group in groupby(ordered, key=lambda e: e.session):
        batch = list(group)
        columns = conversation.index_columns(batch, [])
        rows += [
            (e.id, scope.tenant, scope.agent, session, e.type, e.role, e.content,
             to_micros(e.timestamp), e.tokens, e.tool_name, e.tool_call_id,
             dump_json(e.args), dump_json(e.metadata), int(e.archived), e.masked, extra, ctx)
            for e, (extra, ctx) in zip(batch, columns, strict=True)
        ]
    db.executemany(
        "INSERT INTO events (id, tenant, agent, session, type, role, content, ts, tokens, "
        "tool_name, tool_call_id, args, metadata, archived, masked, search_extra, "
        "search_context) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    db.execute(
        "INSERT INTO events_fts (rowid, content, search_extra, search_context) "
        "SELECT ? | id, content, search_extra, search_context FROM events "
        "WHERE tenant = ? AND agent = ?", (scope_base(db, scope), scope.tenant, scope.agent))


def _import_rows(db: sqlite3.Connection, data: ScopeData) -> None:
    """Memories (and history), state, documents (and history) and compactions."""
    s = (data.scope.tenant, data.scope.agent)
    db.executemany(
        "INSERT INTO memories (id, tenant, agent, type, content, tags, created, updated, "
        "expires, source, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [(m.id, *s, m.type, m.content, dump_tags(m.tags), to_micros(m.created_at),
          to_micros(m.updated_at), _micros(m.expires_at), m.source, dump_json(m.metadata))
         for m in data.memories])
    db.executemany(
        "INSERT INTO memory_versions (memory_id, tenant, agent, version, type, content, "
        "tags, created, updated, expires, source, superseded, reason) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [(v.memory_id, *s, v.version, v.type, v.content, dump_tags(v.tags),
          to_micros(v.created_at), to_micros(v.updated_at), _micros(v.expires_at), source,
          to_micros(v.superseded_at), v.reason) for v, source in data.memory_versions])
    db.executemany(
        "INSERT INTO state (tenant, agent, key, value, updated) VALUES (?,?,?,?,?)",
        [(*s, i.key, i.value, to_micros(i.updated_at)) for i in data.state])
    db.executemany(
        "INSERT INTO documents (tenant, agent, path, content, tags, version, created, "
        "updated, metadata) VALUES (?,?,?,?,?,?,?,?,?)",
        [(*s, d.path, d.content, dump_tags(d.tags), d.version, to_micros(d.created_at),
          to_micros(d.updated_at), dump_json(d.metadata)) for d in data.documents])
    db.executemany(
        "INSERT INTO document_versions (tenant, agent, path, version, content, tags, "
        "created, updated, metadata, superseded) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [(*s, v.path, v.version, v.content, dump_tags(v.tags), to_micros(v.created_at),
          to_micros(v.updated_at), dump_json(v.metadata), to_micros(v.superseded_at))
         for v in data.document_versions])
    db.executemany(
        "INSERT INTO compactions (id, tenant, agent, session, strategy, first_event_id, "
        "last_event_id, summary_event_id, summary, tokens_before, tokens_after, created) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        [(c.id, *s, c.session, c.strategy, c.first_event_id, c.last_event_id,
          c.summary_event_id, c.summary, c.tokens_before, c.tokens_after,
          to_micros(c.created_at)) for c in data.compactions])


def _micros(value: Any) -> int | None:
    return None if value is None else to_micros(value)
