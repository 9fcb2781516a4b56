"""Embeddings in the PostgreSQL backend: pgvector columns with HNSW indexes (cosine).

The dimension is not known when the schema is created (it belongs to the embedding
model, recorded in ``meta`` by the indexer), so ``embedding`` is an unconstrained
``vector`` and each table gets an expression index on ``embedding::vector(<dim>)`` the
first time vectors of that dimension are written. Searches order by the same expression,
which is what lets the planner use the index. ``clear_embeddings`` drops the indexes
(before re-embedding with another model, whose dimension may differ).

Bulk loads go faster without indexes to maintain: inside :meth:`bulk_load` neither the
HNSW nor the full-text (GIN) indexes exist, and all of them are built once at the end.
It is meant for offline loads (``loci migrate``, benchmarks): searches running meanwhile
from other processes are correct but slow.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np

from loci.models import Scope
from loci.store.base import Scored, SearchFilters, Vectors
from loci.store.postgres.base import PostgresBase
from loci.store.postgres.keywords import rank_index, terms_table
from loci.store.postgres.rows import KINDS, filter_sql
from loci.store.postgres.schema import FTS_INDEXES
from loci.store.rows import EMBED_CHARS, event_embedding_text

#: Where index creation takes turns across processes.
INDEX_LOCK = 0x10C1_0002
#: HNSW candidate list size: recall at a million rows, still a few ms per query.
EF_SEARCH = 100
#: Filters that leave at most this many rows are served by ordering just those. More
#: rows cost more that way than the graph's filtered walk (``benchmarks/RESULTS.md``).
EXACT_ALLOWED = 500


class PostgresVectors(PostgresBase):
    """Mixed into :class:`PostgresStore`."""

    _indexed: set[tuple[str, int]]
    _vector_lock: threading.Lock

    def unembedded(
        self, kind: str, limit: int, scope: Scope | None = None
    ) -> list[tuple[Scope, str, str]]:
        k = KINDS[kind]
        where, params = "", list[Any]()
        if scope is not None:
            where, params = " AND tenant = %s AND agent = %s", [scope.tenant, scope.agent]
        extra = ", metadata::text, search_context" if kind == "event" else ""
        rows = self._query(
            f"SELECT tenant, agent, {k.key}, left({k.text}, {EMBED_CHARS}){extra} "
            f"FROM {k.table} WHERE embedding IS NULL{where} ORDER BY {k.order} LIMIT %s",
            (*params, limit),
        )
        if kind == "event":
            return [(Scope(r[0], r[1]), str(r[2]), event_embedding_text(r[3], r[4], r[5]))
                    for r in rows]
        return [(Scope(r[0], r[1]), str(r[2]), r[3]) for r in rows]

    def count_unembedded(self, kind: str) -> int:
        k = KINDS[kind]
        rows = self._query(f"SELECT COUNT(*) FROM {k.table} WHERE embedding IS NULL")
        return int(rows[0][0])

    def set_embeddings(
        self, scope: Scope, kind: str, ids: Sequence[str], vectors: Vectors
    ) -> None:
        if not len(ids):
            return
        k = KINDS[kind]
        self._ensure_vector_index(kind, int(vectors.shape[1]))
        keys: list[Any] = [int(i) for i in ids] if kind == "event" else list(ids)
        with self._write() as cur:
            # executemany pipelines the updates: one round trip for the whole batch.
            cur.executemany(
                f"UPDATE {k.table} SET embedding = %s WHERE {k.key} = %s AND tenant = %s "
                "AND agent = %s",
                [(np.ascontiguousarray(vectors[i], np.float32), key, scope.tenant,
                  scope.agent) for i, key in enumerate(keys)],
            )
        self._grew(k.table, len(keys))  # (the planner's share of rows with a vector)

    def clear_embeddings(self) -> None:
        with self._write() as cur:
            self._drop_vector_indexes(cur)
            for k in KINDS.values():
                cur.execute(f"UPDATE {k.table} SET embedding = NULL "
                            "WHERE embedding IS NOT NULL")
        with self._vector_lock:
            self._indexed.clear()

    def vector_candidates(
        self, scope: Scope, kind: str, query: Vectors, *, limit: int, filters: SearchFilters
    ) -> list[Scored]:
        k, a = KINDS[kind], KINDS[kind].alias
        dim = int(query.shape[0])
        where, params = filter_sql(kind, filters)
        distance = _distance(a, dim)
        vector = np.ascontiguousarray(query, np.float32)
        with self._write() as cur:
            few = self._few_keys(cur, kind, scope, filters) if filters.narrowing() else None
            if few is not None:  # few rows may pass: order just those, exactly
                # ``+ 0``: an order the HNSW index cannot serve, so the few rows are read
                # by key and sorted, not found by walking the graph.
                cur.execute(
                    f"SELECT {a}.{k.order}, 1 - ({distance}) FROM {k.table} {a} "
                    f"WHERE {a}.{k.order} = ANY(%s) AND {a}.embedding IS NOT NULL{where} "
                    f"ORDER BY ({distance}) + 0 LIMIT %s",
                    (vector, few, *params, vector, limit))
            else:
                # SET LOCAL lasts for this transaction only. Iterative scans keep walking
                # the graph until enough rows pass the scope and filters. No bitmap
                # scans: the planner once served a tag of 25% of the rows from the tags'
                # index and sorted 25k vectors (267 ms; ``benchmarks/RESULTS.md``).
                # (One statement for all: a round trip less per search.)
                cur.execute("SELECT set_config('hnsw.ef_search', %s, true), "
                            "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                            "set_config('enable_bitmapscan', 'off', true)",
                            (str(max(EF_SEARCH, 2 * limit)),))
                cur.execute(f"SELECT {a}.{k.order}, 1 - ({distance}) FROM {k.table} {a} "
                            f"WHERE {a}.tenant = %s AND {a}.agent = %s "
                            f"AND {a}.embedding IS NOT NULL{where} ORDER BY {distance} LIMIT %s",
                            (vector, scope.tenant, scope.agent, *params, vector, limit))
            rows = cur.fetchall()
        # A zero vector ("nothing to embed") has no cosine: NaN fails ``> 0``.
        found = [(int(key), min(1.0, float(score))) for key, score in rows if score > 0]
        return sorted(found, key=lambda c: c[1], reverse=True)

    def vector_scores(
        self, scope: Scope, kind: str, query: Vectors, keys: Sequence[int]
    ) -> list[Scored]:
        if not keys:
            return []
        k, a = KINDS[kind], KINDS[kind].alias
        rows = self._query(
            f"SELECT {a}.{k.order}, 1 - ({_distance(a, int(query.shape[0]))}) "
            f"FROM {k.table} {a} WHERE {a}.{k.order} = ANY(%s) AND {a}.tenant = %s "
            f"AND {a}.agent = %s AND {a}.embedding IS NOT NULL",
            (np.ascontiguousarray(query, np.float32), list(keys), scope.tenant, scope.agent))
        # A zero vector ("nothing to embed") has no cosine (NaN): it scores 0.
        found = [(int(key), min(1.0, float(score)) if score > 0 else 0.0) for key, score in rows]
        return sorted(found, key=lambda c: c[1], reverse=True)

    def _few_keys(self, cur: Any, kind: str, scope: Scope, filters: SearchFilters
                  ) -> list[int] | None:
        """The keys of at most ``EXACT_ALLOWED`` rows among which are all those that
        pass the filters, found by the filters' indexes (vectors and expiry are not
        tested); None if there are more."""
        k, a = KINDS[kind], KINDS[kind].alias
        where, params = filter_sql(kind, replace(filters, now=None))
        cur.execute(f"SELECT {a}.{k.order} FROM {k.table} {a} WHERE {a}.tenant = %s "
                    f"AND {a}.agent = %s{where} LIMIT %s",
                    (scope.tenant, scope.agent, *params, EXACT_ALLOWED + 1))
        found = [row[0] for row in cur.fetchall()]
        return found if len(found) <= EXACT_ALLOWED else None

    # -- indexes ------------------------------------------------------------------
    def _ensure_vector_index(self, kind: str, dim: int) -> None:
        """Create the HNSW index of ``kind`` for ``dim`` unless it exists (or a bulk load
        is running); cached, so the common case costs nothing."""
        if self._bulk or (kind, dim) in self._indexed:
            return
        with self._vector_lock:
            self._create_index(kind, dim)
            self._indexed.add((kind, dim))

    def _create_index(self, kind: str, dim: int) -> None:
        table = KINDS[kind].table
        with self._write() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (INDEX_LOCK,))
            # The graph of a million 384-d vectors is built in memory far faster.
            cur.execute("SET LOCAL maintenance_work_mem = '2GB'")
            cur.execute(
                f"CREATE INDEX IF NOT EXISTS {table}_hnsw_{dim} ON {table} USING hnsw "
                f"((embedding::vector({dim})) vector_cosine_ops)"
            )

    def _drop_vector_indexes(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (INDEX_LOCK,))
        cur.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexname ~ '^(events|memories|documents)_hnsw_[0-9]+$'"
        )
        for (name,) in cur.fetchall():
            cur.execute(f'DROP INDEX IF EXISTS "{name}"')

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Write many rows without maintaining HNSW, GIN and postings-rank indexes,
        then build them once (HNSW and GIN inserts row by row cost many times a plain
        insert)."""
        with self._write() as cur:
            self._drop_vector_indexes(cur)
            for table in FTS_INDEXES:
                cur.execute(f"DROP INDEX IF EXISTS {table}_fts")
            for kind in KINDS:
                cur.execute(f"DROP INDEX IF EXISTS {terms_table(kind)}_rank")
        with self._vector_lock:
            self._indexed.clear()
            self._bulk += 1
        try:
            yield
        finally:
            with self._vector_lock:
                self._bulk -= 1
            self.build_vector_indexes()

    def build_vector_indexes(self) -> None:
        """Create the full-text indexes if missing and the HNSW index of every table for
        the dimension its vectors have, and refresh the planner's statistics (after a
        bulk load they still describe the empty tables, and the planner would scan the
        scope instead of the index)."""
        for statement in FTS_INDEXES.values():
            self._run(statement)
        for kind in KINDS:
            self._run(rank_index(kind))
            # VACUUM sets the visibility map: df counts are then index-only scans.
            self._run(f"VACUUM ANALYZE {terms_table(kind)}")
        for kind, k in KINDS.items():
            self._run(f"ANALYZE {k.table}")
            rows = self._query(f"SELECT vector_dims(embedding) FROM {k.table} "
                               "WHERE embedding IS NOT NULL LIMIT 1")
            if rows:
                self._ensure_vector_index(kind, int(rows[0][0]))


def _distance(alias: str, dim: int) -> str:
    """The cosine distance of a row's vector to the query vector (one parameter)."""
    return f"{alias}.embedding::vector({dim}) <=> %s::vector({dim})"
