"""What every part of the SQLite backend shares: the connection, its lock, the write
transaction, plain queries and ranked keyword search of any searchable kind (BM25 by
FTS5; at scale, over the query's rarest words)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from loci.models import Scope, SearchHit
from loci.search import bm25_to_score, query_terms
from loci.store.base import Scored, SearchFilters
from loci.store.rows import ordered_hits
from loci.store.sqlite_fts import FULL_TEXT, KEY_MASK, SCOPE_SHIFT
from loci.store.sqlite_rows import KINDS, filter_sql

#: Rows an OR query may match before only its rarest words search (``_rare_terms``).
MATCH_BUDGET = 4_000
#: Full-text tables by content table. Every write transaction adds segments to their
#: indexes, and a query reads each segment, so searches slow down as writes pile up
#: (``benchmarks/fts_merge.py``) until the index is merged into one segment. So an
#: index is merged whenever its table has grown by ``FTS_REGROW`` (at least
#: ``FTS_MIN_GROWTH`` rows) since the last time: the cost stays proportional to what is
#: written.
FTS_TABLES = {ft.table: f"{ft.table}_fts" for ft in FULL_TEXT}
FTS_REGROW = 0.2
FTS_MIN_GROWTH = 500
# Growth is read from the content tables: full-text rowids carry their scope's number.
_FTS_SIZES = "SELECT " + ", ".join(f"(SELECT max({ft.key}) FROM {ft.table})"
                                   for ft in FULL_TEXT)


class SQLiteBase:
    """The connection (shared by threads under ``_lock``) and how to use it."""

    _db: sqlite3.Connection
    _lock: threading.RLock
    #: Per content table, the size (highest rowid) at which its index is merged next.
    _fts_due: dict[str, int]
    #: Scopes' lowest full-text rowids (``sqlite_fts``), by scope.
    _scope_bases: dict[Scope, int]

    def local_lock(self) -> threading.RLock:
        return self._lock

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed on success, rolled back on any error."""
        with self._lock, self._transaction():
            yield self._db
        self._merge_grown_indexes()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _merge_grown_indexes(self) -> None:
        """Merge each full-text index whose table grew enough (see ``FTS_TABLES``). The
        last merge's size is kept in ``meta``, so processes sharing the file (and the
        next run) merge once between them."""
        with self._lock:
            sizes = self._db.execute(_FTS_SIZES).fetchone()
            grown = [(table, size or 0) for table, size in zip(FTS_TABLES, sizes, strict=True)
                     if (size or 0) >= self._fts_due.get(table, 0)]
            if not grown:
                return
            with self._transaction():
                for table, size in grown:
                    self._fts_due[table] = _next_merge(self._merge_index(table, size))

    def _merge_index(self, table: str, size: int) -> int:
        """Merge ``table``'s index if it grew enough by ``meta``; the size it was last
        merged at (inside a write transaction)."""
        key = f"fts_merged:{table}"
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        merged = int(row[0]) if row else 0
        if size < _next_merge(merged):
            return merged
        fts = FTS_TABLES[table]
        self._db.execute(f"INSERT INTO {fts} ({fts}) VALUES ('optimize')")
        self._db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) "
                         "DO UPDATE SET value = excluded.value", (key, str(size)))
        return size

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def keyword_candidates(
        self, scope: Scope, kind: str, query: str, *, limit: int, filters: SearchFilters
    ) -> list[Scored]:
        terms = query_terms(query)
        rowids = self._scope_rowids(scope)
        if not terms or rowids is None:
            return []
        k = KINDS[kind]
        where, params = filter_sql(kind, filters)
        # The rowid range confines ranking to the scope (``sqlite_fts``).
        sql = (
            f"SELECT f.rowid & {KEY_MASK}, f.rank FROM {k.fts} f "
            f"JOIN {k.table} {k.alias} ON {k.alias}.{k.key} = (f.rowid & {KEY_MASK}) "
            f"WHERE {k.fts} MATCH ? AND f.rowid BETWEEN ? AND ? "
            f"AND {k.alias}.tenant = ? AND {k.alias}.agent = ?{where} ORDER BY f.rank LIMIT ?"
        )
        full = _match(terms)
        rare = self._rare_terms(k.fts, terms, full, rowids)
        rows = []
        scoped = (*rowids, scope.tenant, scope.agent, *params, limit)
        if rare is not None:
            rows = self._query(sql, (_match(rare), *scoped))
        if rare is None or len(rows) < limit:  # the filters wanted rows of common words
            rows = self._query(sql, (full, *scoped))
        return [(int(key), bm25_to_score(rank)) for key, rank in rows]

    def _scope_rowids(self, scope: Scope) -> tuple[int, int] | None:
        """The scope's range of full-text rowids, or None while it has no rows. A
        scope's number never changes once written, so it is remembered."""
        base = self._scope_bases.get(scope)
        if base is None:
            rows = self._query("SELECT no FROM scopes WHERE tenant = ? AND agent = ?",
                               (scope.tenant, scope.agent))
            if not rows:
                return None
            base = self._scope_bases[scope] = int(rows[0][0]) << SCOPE_SHIFT
        return base, base | KEY_MASK

    def hits(self, scope: Scope, kind: str, scored: Sequence[Scored]) -> list[SearchHit]:
        if not scored:
            return []
        k = KINDS[kind]
        rows = self._query(
            # NOT INDEXED: look rows up by key, never by scanning the scope's index.
            f"SELECT {k.hit_columns}, {k.alias}.{k.key} FROM {k.table} {k.alias} NOT INDEXED "
            f"WHERE {k.alias}.{k.key} IN ({', '.join('?' * len(scored))}) "
            f"AND {k.alias}.tenant = ? AND {k.alias}.agent = ?",
            (*(key for key, _ in scored), scope.tenant, scope.agent),
        )
        return ordered_hits(kind, rows, scored)

    def _rare_terms(self, fts: str, terms: list[str], full: str, rowids: tuple[int, int]
                    ) -> list[str] | None:
        """The rarest of ``terms`` whose rows together stay within ``MATCH_BUDGET``, or
        None to search with all of them.

        FTS5 computes BM25 for every matching row; a four-word query whose words are
        common matches tens of thousands. Common words add little to BM25 (their IDF is
        low), so past the budget only the rare ones choose and rank the rows. Stores where
        the query matches fewer rows (every test, the LoCoMo benchmark) are ranked
        exactly as before: one capped count decides.
        """
        if len(terms) < 2 or self._capped_count(fts, full, rowids) <= MATCH_BUDGET:
            return None
        counts = sorted((self._capped_count(fts, _match([t]), rowids), i)
                        for i, t in enumerate(terms))
        kept: list[str] = []
        total = 0
        for count, i in counts:
            if kept and total + count > MATCH_BUDGET:
                break
            kept.append(terms[i])
            total += count
        return kept if len(kept) < len(terms) else None

    def _capped_count(self, fts: str, match: str, rowids: tuple[int, int]) -> int:
        """The scope's rows matching ``match``, counted up to ``MATCH_BUDGET + 1``
        (FTS5 walks the doclists only, without ranking)."""
        rows = self._query(f"SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? "
                           "AND rowid BETWEEN ? AND ? LIMIT ?)",
                           (match, *rowids, MATCH_BUDGET + 1))
        return int(rows[0][0])


def _next_merge(merged: int) -> int:
    """The table size at which an index last merged at size ``merged`` merges again."""
    return max(merged + FTS_MIN_GROWTH, int(merged * (1 + FTS_REGROW)))


def _match(terms: list[str]) -> str:
    """An FTS5 OR query of quoted terms (``search.fts_query`` for terms already split)."""
    return " OR ".join(f'"{term}"' for term in terms)
