"""What every part of the SQLite backend shares: the connection, its lock, the write
transaction, plain queries and ranked keyword search of any searchable kind."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from loci.models import Scope, SearchHit
from loci.search import bm25_to_score, fts_query
from loci.store.base import SearchFilters
from loci.store.rows import to_hit
from loci.store.sqlite_rows import KINDS, filter_sql


class SQLiteBase:
    """The connection (shared by threads under ``_lock``) and how to use it."""

    _db: sqlite3.Connection
    _lock: threading.RLock

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
