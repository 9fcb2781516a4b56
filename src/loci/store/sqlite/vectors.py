"""Embeddings in the SQLite backend: stored in their rows, searched in memory
(``store.indexed_vectors``). One writer at a time numbers a scope's vectors
(``vec_seq``) from the highest one stored, so the numbers follow commit order."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from loci.models import Scope
from loci.store.base import Scored, SearchFilters, Vectors
from loci.store.indexed_vectors import EXACT_ALLOWED
from loci.store.rows import EMBED_CHARS, event_embedding_text
from loci.store.sqlite.base import SQLiteBase
from loci.store.sqlite.rows import KEY_MASK, KINDS, filter_sql

_WORDY = re.compile(r"\w")
_TAGGED = "memories_fts MATCH ? AND rowid BETWEEN ? AND ?"
_TEXT = {"event": "content", "memory": "content", "document": "path || ' ' || content"}


class SQLiteVectors(SQLiteBase):
    """Mixed into :class:`SQLiteStore`."""

    def unembedded(
        self, kind: str, limit: int, scope: Scope | None = None
    ) -> list[tuple[Scope, str, str]]:
        k = KINDS[kind]
        where, params = "", list[Any]()
        if scope is not None:
            where, params = " AND tenant = ? AND agent = ?", [scope.tenant, scope.agent]
        # Events are embedded with their speaker, captions and context.
        extra = ", metadata, search_context" if kind == "event" else ""
        rows = self._query(
            f"SELECT tenant, agent, {k.public}, substr({_TEXT[kind]}, 1, {EMBED_CHARS})"
            f"{extra} "
            # The partial index holds only unembedded rows; without INDEXED BY the planner
            # prefers the scope index and reads every row of the scope.
            f"FROM {k.table} INDEXED BY {k.table}_unembedded WHERE embedding IS NULL{where} "
            f"ORDER BY {k.key} LIMIT ?",
            (*params, limit),
        )
        if kind == "event":
            return [(Scope(r[0], r[1]), str(r[2]), event_embedding_text(r[3], r[4], r[5]))
                    for r in rows]
        return [(Scope(r[0], r[1]), str(r[2]), r[3]) for r in rows]

    def count_unembedded(self, kind: str) -> int:
        k = KINDS[kind]
        return int(self._query(
            f"SELECT COUNT(*) FROM {k.table} INDEXED BY {k.table}_unembedded "
            "WHERE embedding IS NULL")[0][0])

    def set_embeddings(
        self, scope: Scope, kind: str, ids: Sequence[str], vectors: Vectors
    ) -> None:
        k = KINDS[kind]
        keys: list[Any] = [int(i) for i in ids] if kind == "event" else list(ids)
        index = self._loaded_index(kind, scope)
        with self._write() as db:
            seq = self._latest_vec_seq(kind, scope) or 0  # (read on the writer's connection)
            db.executemany(
                f"UPDATE {k.table} SET embedding = ?, vec_seq = ? "
                f"WHERE {k.public} = ? AND tenant = ? AND agent = ?",
                [
                    (_blob(vectors[i]), seq + 1 + i, key, scope.tenant, scope.agent)
                    for i, key in enumerate(keys)
                ],
            )
            # The rows written (a vanished one was not): read from the index of vec_seq.
            written = db.execute(
                f"SELECT {k.key}, vec_seq FROM {k.table} WHERE tenant = ? AND agent = ? "
                "AND vec_seq > ?", (scope.tenant, scope.agent, seq)
            ).fetchall() if index is not None else []
        self._hand_over(scope, kind, seq, written, vectors)

    def clear_embeddings(self) -> None:
        with self._write() as db:
            for k in KINDS.values():
                db.execute(f"UPDATE {k.table} SET embedding = NULL, vec_seq = NULL "
                           "WHERE embedding IS NOT NULL")
        with self._index_lock:
            self._indexes.clear()

    def _latest_vec_seq(self, kind: str, scope: Scope) -> int | None:
        rows = self._query(
            f"SELECT MAX(vec_seq) FROM {KINDS[kind].table} "
            "WHERE tenant = ? AND agent = ? AND vec_seq IS NOT NULL",
            (scope.tenant, scope.agent),
        )
        return None if rows[0][0] is None else int(rows[0][0])

    def _vector_rows(self, kind: str, scope: Scope, after: int
                     ) -> Iterator[tuple[int, bytes, int]]:
        k = KINDS[kind]
        rows = self._query(
            f"SELECT {k.key}, embedding, vec_seq FROM {k.table} "
            "WHERE tenant = ? AND agent = ? AND vec_seq > ?",
            (scope.tenant, scope.agent, after),
        )
        return ((r[0], r[1], r[2]) for r in rows)

    def _passing(
        self, kind: str, scope: Scope, candidates: list[tuple[int, float]],
        filters: SearchFilters,
    ) -> list[Scored]:
        """The candidates with a positive score whose rows exist in the scope and pass
        the filters, best first (the graph may still hold rows deleted since)."""
        scored = {key: min(1.0, score) for key, score in candidates if score > 0}
        if not scored:
            return []
        k = KINDS[kind]
        where, params = filter_sql(kind, filters)
        rows = self._query(
            # NOT INDEXED: look rows up by key, never by scanning the scope's index.
            f"SELECT {k.alias}.{k.key} FROM {k.table} {k.alias} NOT INDEXED "
            f"WHERE {k.alias}.{k.key} IN ({', '.join('?' * len(scored))}) "
            f"AND {k.alias}.tenant = ? AND {k.alias}.agent = ?{where}",
            (*scored, scope.tenant, scope.agent, *params),
        )
        return sorted(((r[0], scored[r[0]]) for r in rows), key=lambda c: c[1], reverse=True)

    def _allowed_keys(self, kind: str, scope: Scope, filters: SearchFilters) -> list[int]:
        """The keys of the scope's rows that pass the filters (those without a vector
        are left out by the index; asking for ``vec_seq`` here read past each row's
        vector, in overflow pages: several times slower)."""
        k = KINDS[kind]
        where, params = filter_sql(kind, filters)
        rows = self._query(
            f"SELECT {k.alias}.{k.key} FROM {k.table} {k.alias} WHERE {k.alias}.tenant = ? "
            f"AND {k.alias}.agent = ?{where}", (scope.tenant, scope.agent, *params))
        return [r[0] for r in rows]

    def _roughly_allowed(self, kind: str, scope: Scope, filters: SearchFilters
                         ) -> list[int] | None:
        """The keys of at most ``EXACT_ALLOWED`` rows among which are all those that
        pass the filters, found in indexes alone (expiry is not tested, and tags are
        found through the full-text index of tags); None if there are more."""
        k = KINDS[kind]
        tagged, tag_params = self._tagged(kind, scope, filters.tags)
        loose = replace(filters, now=None, tags=() if tagged else filters.tags)
        where, params = filter_sql(kind, loose)
        if tagged and not where:  # the full-text rows alone (their rowids hold the scope)
            sql = f"SELECT rowid & {KEY_MASK} FROM memories_fts WHERE {_TAGGED}"
            leading = tag_params
        else:  # tagged: the full-text rows looked up by key, not by the scope's index
            sql = (f"SELECT {k.alias}.{k.key} FROM {k.table} {k.alias}"
                   f"{' NOT INDEXED' if tagged else ''} WHERE {k.alias}.tenant = ? "
                   f"AND {k.alias}.agent = ?"
                   + (f" AND m.rowid IN (SELECT rowid & {KEY_MASK} FROM memories_fts "
                      f"WHERE {_TAGGED})" if tagged else "") + where)
            leading = [scope.tenant, scope.agent, *tag_params]
        rows = self._query(f"{sql} LIMIT ?", (*leading, *params, EXACT_ALLOWED + 1))
        return None if len(rows) > EXACT_ALLOWED else [r[0] for r in rows]

    def _tagged(self, kind: str, scope: Scope, tags: tuple[str, ...]
                ) -> tuple[bool, list[Any]]:
        """Whether the memories with ``tags`` can be found through the full-text index
        of their tags (a superset: ``_passing`` tests them exactly), and the parameters
        of ``_TAGGED`` that find them."""
        words = [tag for tag in tags if _WORDY.search(tag)]  # (else nothing to look up)
        rowids = self._scope_rowids(scope) if kind == "memory" and words else None
        if rowids is None:
            return False, []
        match = " AND ".join('tags : "' + tag.replace('"', '""') + '"' for tag in words)
        return True, [match, *rowids]


def _blob(vector: Vectors) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()
