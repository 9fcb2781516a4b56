"""Embeddings in the PostgreSQL backend: pgvector columns, searched in memory.

Vectors are stored in an unconstrained ``vector`` column (the dimension belongs to the
embedding model) and searched in each process's memory (``store.indexed_vectors``), as
SQLite's are: pgvector's HNSW walk was most of a search's time (``benchmarks/RESULTS.md``),
and writes no longer maintain its graph. Many processes write one database, so a scope's
writers take turns (a transaction-scoped advisory lock) to number their vectors
(``vec_seq``) from the highest one committed: the numbers follow commit order, and a
search reads just the rows numbered above what its index holds.

Bulk loads go faster without indexes to maintain: inside :meth:`bulk_load` the full-text
(GIN) and postings-rank indexes do not exist, and they are built once at the end. It is
meant for offline loads (``loci migrate``, benchmarks): searches running meanwhile from
other processes are correct but slow.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np

from loci.models import Scope
from loci.store.base import Scored, SearchFilters, Vectors
from loci.store.indexed_vectors import EXACT_ALLOWED
from loci.store.postgres.base import Cursor, PostgresBase
from loci.store.postgres.keywords import rank_index, terms_table
from loci.store.postgres.rows import KINDS, filter_sql
from loci.store.rows import EMBED_CHARS, event_embedding_text

#: The highest vector number of a scope's rows of ``table`` (an index-only scan).
_LATEST = ("SELECT MAX(vec_seq) FROM {table} WHERE tenant = %s AND agent = %s "
           "AND vec_seq IS NOT NULL")


class PostgresVectors(PostgresBase):
    """Mixed into :class:`PostgresStore`."""

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
        keys: list[Any] = [int(i) for i in ids] if kind == "event" else list(ids)
        with self._write() as cur:
            before = self._number_vectors(cur, kind, scope)
            # executemany pipelines the updates: one round trip for the whole batch.
            cur.executemany(
                f"UPDATE {k.table} SET embedding = %s, vec_seq = %s WHERE {k.key} = %s "
                "AND tenant = %s AND agent = %s",
                [(np.ascontiguousarray(vectors[i], np.float32), before + 1 + i, key,
                  scope.tenant, scope.agent) for i, key in enumerate(keys)],
            )
            written: list[tuple[int, int]] = []
            if self._loaded_index(kind, scope) is not None:  # (the rows that still exist)
                cur.execute(f"SELECT {k.order}, vec_seq FROM {k.table} WHERE tenant = %s "
                            "AND agent = %s AND vec_seq > %s",
                            (scope.tenant, scope.agent, before))
                written = cur.fetchall()
        self._grew(k.table, len(keys))  # (the planner's share of rows with a vector)
        self._hand_over(scope, kind, before, written, vectors)

    def _number_vectors(self, cur: Cursor, kind: str, scope: Scope) -> int:
        """Take the scope's turn to number vectors (until commit) and return the highest
        number committed: the write numbers its vectors from the next one."""
        table = KINDS[kind].table
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (f"vec_seq\x1f{table}\x1f{scope.tenant}\x1f{scope.agent}",))
        cur.execute(_LATEST.format(table=table), (scope.tenant, scope.agent))
        row = cur.fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def clear_embeddings(self) -> None:
        with self._write() as cur:
            for k in KINDS.values():
                cur.execute(f"UPDATE {k.table} SET embedding = NULL, vec_seq = NULL "
                            "WHERE embedding IS NOT NULL")
        with self._index_lock:
            self._indexes.clear()

    # -- the hooks of ``IndexedVectors`` -----------------------------------------------
    def _latest_vec_seq(self, kind: str, scope: Scope) -> int | None:
        rows = self._query(_LATEST.format(table=KINDS[kind].table),
                           (scope.tenant, scope.agent))
        return None if rows[0][0] is None else int(rows[0][0])

    def _vector_rows(self, kind: str, scope: Scope, after: int
                     ) -> list[tuple[int, bytes, int]]:
        k = KINDS[kind]
        # vector_send: the binary form (dimension, unused, big-endian float4s).
        rows = self._query(
            f"SELECT {k.order}, vector_send(embedding), vec_seq FROM {k.table} "
            "WHERE tenant = %s AND agent = %s AND vec_seq > %s",
            (scope.tenant, scope.agent, after))
        return [(int(key), np.frombuffer(sent, ">f4", offset=4).astype(np.float32).tobytes(),
                 int(seq)) for key, sent, seq in rows]

    def _passing(
        self, kind: str, scope: Scope, candidates: list[tuple[int, float]],
        filters: SearchFilters,
    ) -> list[Scored]:
        scored = {key: min(1.0, score) for key, score in candidates if score > 0}
        if not scored:
            return []
        k, a = KINDS[kind], KINDS[kind].alias
        where, params = filter_sql(kind, filters)
        rows = self._query(
            f"SELECT {a}.{k.order} FROM {k.table} {a} WHERE {a}.{k.order} = ANY(%s) "
            f"AND {a}.tenant = %s AND {a}.agent = %s{where}",
            (list(scored), scope.tenant, scope.agent, *params))
        return sorted(((int(r[0]), scored[int(r[0])]) for r in rows), key=lambda c: c[1],
                      reverse=True)

    def _allowed_keys(self, kind: str, scope: Scope, filters: SearchFilters) -> list[int]:
        k, a = KINDS[kind], KINDS[kind].alias
        where, params = filter_sql(kind, filters)
        rows = self._query(f"SELECT {a}.{k.order} FROM {k.table} {a} WHERE {a}.tenant = %s "
                           f"AND {a}.agent = %s{where}", (scope.tenant, scope.agent, *params))
        return [int(r[0]) for r in rows]

    def _roughly_allowed(self, kind: str, scope: Scope, filters: SearchFilters
                         ) -> list[int] | None:
        # (Expiry is left out: the other filters have indexes.)
        k, a = KINDS[kind], KINDS[kind].alias
        where, params = filter_sql(kind, replace(filters, now=None))
        rows = self._query(f"SELECT {a}.{k.order} FROM {k.table} {a} WHERE {a}.tenant = %s "
                           f"AND {a}.agent = %s{where} LIMIT %s",
                           (scope.tenant, scope.agent, *params, EXACT_ALLOWED + 1))
        return [int(r[0]) for r in rows] if len(rows) <= EXACT_ALLOWED else None

    def _ann_path(self, kind: str, scope: Scope) -> None:
        return None  # each process builds its graphs: a file on one host is not the
        # database's (a process elsewhere, or a restored database, would trust it)

    # -- bulk loads -----------------------------------------------------------------
    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Write many rows without maintaining the postings-rank indexes, then build them
        once (inserted row by row, they cost more than the rows)."""
        with self._write() as cur:
            for kind in KINDS:
                cur.execute(f"DROP INDEX IF EXISTS {terms_table(kind)}_rank")
        self._bulk += 1
        try:
            yield
        finally:
            self._bulk -= 1
            self.build_indexes()

    def build_indexes(self) -> None:
        """Create the postings-rank indexes if missing, and refresh the planner's
        statistics (after a bulk load they still describe the empty tables)."""
        for kind in KINDS:
            self._run(rank_index(kind))
            # VACUUM sets the visibility map: df counts are then index-only scans.
            self._run(f"VACUUM ANALYZE {terms_table(kind)}")
        for k in KINDS.values():
            self._run(f"ANALYZE {k.table}")
        self._df_shares.clear()
