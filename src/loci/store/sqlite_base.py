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
from loci.store.base import SearchFilters
from loci.store.rows import to_hit
from loci.store.sqlite_rows import KINDS, filter_sql

#: Rows an OR query may match before only its rarest words search (``_rare_terms``).
MATCH_BUDGET = 4_000


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
        terms = query_terms(query)
        if not terms:
            return []
        k = KINDS[kind]
        where, params = filter_sql(kind, filters)
        # Rank on keys only, then read the top hits: reading every matching row's
        # content before sorting costs about twice as much.
        sql = (
            f"SELECT {k.hit_columns}, r.rank FROM ("
            f"SELECT f.rowid AS key, f.rank AS rank FROM {k.fts} f "
            f"JOIN {k.table} {k.alias} ON {k.alias}.{k.key} = f.rowid "
            f"WHERE {k.fts} MATCH ? AND {k.alias}.tenant = ? AND {k.alias}.agent = ?{where} "
            f"ORDER BY f.rank LIMIT ?) r JOIN {k.table} {k.alias} ON {k.alias}.{k.key} = r.key "
            "ORDER BY r.rank"
        )
        full = _match(terms)
        rare = self._rare_terms(k.fts, terms, full)
        rows = []
        if rare is not None:
            rows = self._query(sql, (_match(rare), scope.tenant, scope.agent, *params, limit))
        if rare is None or len(rows) < limit:  # the filters wanted rows of common words
            rows = self._query(sql, (full, scope.tenant, scope.agent, *params, limit))
        return [to_hit(kind, r[:-1], bm25_to_score(r[-1])) for r in rows]

    def _rare_terms(self, fts: str, terms: list[str], full: str) -> list[str] | None:
        """The rarest of ``terms`` whose rows together stay within ``MATCH_BUDGET``, or
        None to search with all of them.

        FTS5 computes BM25 for every matching row (~1.5 µs each at a million rows); a
        four-word query whose words are common matches tens of thousands. Common words
        add little to BM25 (their IDF is low), so past the budget only the rare ones
        choose and rank the rows. Stores where the query matches fewer rows (every test,
        the LoCoMo benchmark) are ranked exactly as before: one capped count decides.
        """
        if len(terms) < 2 or self._capped_count(fts, full) <= MATCH_BUDGET:
            return None
        counts = sorted((self._capped_count(fts, _match([t])), i) for i, t in enumerate(terms))
        kept: list[str] = []
        total = 0
        for count, i in counts:
            if kept and total + count > MATCH_BUDGET:
                break
            kept.append(terms[i])
            total += count
        return kept if len(kept) < len(terms) else None

    def _capped_count(self, fts: str, match: str) -> int:
        """Rows matching ``match``, counted up to ``MATCH_BUDGET + 1`` (FTS5 walks the
        doclists only, without ranking)."""
        rows = self._query(f"SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? "
                           "LIMIT ?)", (match, MATCH_BUDGET + 1))
        return int(rows[0][0])


def _match(terms: list[str]) -> str:
    """An FTS5 OR query of quoted terms (``search.fts_query`` for terms already split)."""
    return " OR ".join(f'"{term}"' for term in terms)
