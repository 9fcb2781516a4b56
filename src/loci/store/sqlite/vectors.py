"""Embeddings in the SQLite backend: stored in their rows, searched in memory.

Each (table, tenant, agent) slice gets a :class:`VectorIndex` built on first use and
refreshed incrementally from ``vec_seq`` before every search, so other processes'
writes are seen without reloading everything.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from loci.models import Scope
from loci.store.base import Scored, SearchFilters
from loci.store.rows import EMBED_CHARS, event_embedding_text
from loci.store.sqlite.base import SQLiteBase
from loci.store.sqlite.rows import KEY_MASK, KINDS, filter_sql
from loci.store.vector_index import VectorIndex

Vectors = npt.NDArray[np.float32]
#: Candidates fetched beyond the limit before filters, on the first try.
SPARE_CANDIDATES = 10
#: At most this many candidates are asked of the graph when filters reject many.
MAX_CANDIDATES = 2_000
#: Filters that leave at most this many rows (as found in indexes) are served by exact
#: search over them.
EXACT_ALLOWED = 2_000
_WORDY = re.compile(r"\w")
_TAGGED = "memories_fts MATCH ? AND rowid BETWEEN ? AND ?"
_TEXT = {"event": "content", "memory": "content", "document": "path || ' ' || content"}


class SQLiteVectors(SQLiteBase):
    """Mixed into :class:`SQLiteStore`; uses its ``_query``, ``_write`` and ``_index_lock``."""

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
        index = self._indexes.get((kind, scope.tenant, scope.agent))
        with self._write() as db:
            seq = db.execute(
                f"SELECT COALESCE(MAX(vec_seq), 0) FROM {k.table} "
                "WHERE tenant = ? AND agent = ? AND vec_seq IS NOT NULL",
                (scope.tenant, scope.agent),
            ).fetchone()[0]
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
        if written:
            self._hand_over(scope, kind, seq, written, vectors)

    def _hand_over(self, scope: Scope, kind: str, before: int,
                   written: list[tuple[int, int]], vectors: Vectors) -> None:
        """Give the scope's loaded vector index the rows a write of this process just
        committed, so that no search reads them back from the database; unless the
        index lacks rows committed before them (up to ``before``, another process's
        say): their ``vec_seq`` are lower, so the next search reads them all."""
        with self._index_lock:
            index = self._indexes.get((kind, scope.tenant, scope.agent))
            if index is None or index.max_seq != before or index.dim != vectors.shape[1]:
                return
            keys, seqs = np.array(written, dtype=np.int64).T
            index.update_vectors(keys, np.ascontiguousarray(vectors[seqs - before - 1],
                                                            dtype=np.float32), seqs)

    def clear_embeddings(self) -> None:
        with self._write() as db:
            for k in KINDS.values():
                db.execute(f"UPDATE {k.table} SET embedding = NULL, vec_seq = NULL "
                           "WHERE embedding IS NOT NULL")
        with self._index_lock:
            self._indexes.clear()

    def vector_candidates(
        self, scope: Scope, kind: str, query: Vectors, *, limit: int, filters: SearchFilters
    ) -> list[Scored]:
        with self._index_lock:
            index = self._fresh_index(scope, kind, int(query.shape[0]))
            if filters.narrowing():  # few rows may pass: then score just those, exactly
                few = self._roughly_allowed(kind, scope, filters)
                if few is not None:
                    for wanted in (limit + SPARE_CANDIDATES, len(few)):
                        passing = self._passing(kind, scope, index.search(query, wanted, few),
                                                filters)
                        if len(passing) >= limit or wanted >= len(few):
                            return passing[:limit]
            # A few spare candidates usually survive the filters (expiry, type); checking
            # 5x the limit every time cost more than the graph search.
            wanted = limit + SPARE_CANDIDATES
            for _ in range(2):
                candidates = index.search(query, wanted)
                passing = self._passing(kind, scope, candidates, filters)
                relevant = sum(1 for _, score in candidates if score > 0)
                if len(passing) >= min(limit, relevant) or len(index) <= len(candidates):
                    return passing[:limit]
                # Ask again for as many as the share that passed says are needed.
                wanted = min(MAX_CANDIDATES, max(limit * 5, 2 * limit * len(candidates)
                                                 // max(1, len(passing))))
            # Filters removed too many: score only the rows that pass them.
            allowed = self._allowed_keys(kind, scope, filters)
            passing = self._passing(kind, scope, index.search(query, limit, allowed), filters)
        return passing[:limit]

    def vector_scores(
        self, scope: Scope, kind: str, query: Vectors, keys: Sequence[int]
    ) -> list[Scored]:
        if not keys:
            return []
        with self._index_lock:  # the scope's index holds only the scope's rows
            index = self._fresh_index(scope, kind, int(query.shape[0]))
            return [(key, min(1.0, max(0.0, score)))
                    for key, score in index.search(query, len(keys), keys)]

    def wait_for_vector_index(
        self, scope: Scope, kind: str, dim: int, timeout: float | None = None
    ) -> bool:
        """Load the scope's vectors and wait for its HNSW graph (built in the
        background on first search); True if searches use the graph. For benchmarks
        and warm-up: searches never need to call it."""
        with self._index_lock:
            index = self._fresh_index(scope, kind, dim)
            if index.graph_ready():
                return True
        index.wait_for_build(timeout)  # without the lock: searches go on meanwhile
        with self._index_lock:
            return index.graph_ready()

    def _fresh_index(self, scope: Scope, kind: str, dim: int) -> VectorIndex:
        k = KINDS[kind]
        slot = (kind, scope.tenant, scope.agent)
        index = self._indexes.get(slot)
        if index is None or index.dim != dim:
            index = self._indexes[slot] = VectorIndex(dim, self._ann_path(kind, scope))
        latest = self._query(
            f"SELECT MAX(vec_seq) FROM {k.table} "
            "WHERE tenant = ? AND agent = ? AND vec_seq IS NOT NULL",
            (scope.tenant, scope.agent),
        )[0][0]
        if latest is not None and latest > index.max_seq:
            index.update(self._vector_rows(k.table, k.key, scope, index.max_seq))
        return index

    def persist_indexes(self) -> None:
        with self._index_lock:
            for index in self._indexes.values():
                index.persist()

    def _vector_rows(
        self, table: str, key: str, scope: Scope, after: int
    ) -> Iterator[tuple[int, bytes, int]]:
        rows = self._query(
            f"SELECT {key}, embedding, vec_seq FROM {table} "
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
