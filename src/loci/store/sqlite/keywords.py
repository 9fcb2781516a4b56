"""Full-text rows partitioned by scope, so a keyword search ranks only its own rows.

FTS5 keeps one index per table, and ``ORDER BY rank`` computes BM25 for every matching
row before a join can drop other tenants' rows: a tenant's keyword search took 0.92 ms
alone and 6.56 ms among ten tenants of the same size (``benchmarks/tenants.py``). So
each full-text row's rowid carries its scope: ``scope number << SCOPE_SHIFT | key``,
where ``scopes`` numbers each (tenant, agent) once and the key is the content row's.
A doclist is sorted by rowid, so one scope's entries sit together, and FTS5 seeks
straight to a ``rowid BETWEEN`` range: ranking (and ``_rare_terms``' counts) cover the
caller's rows only. BM25's IDF still counts the whole table, as before.

The full-text tables read their content through views that compute these rowids
(only ``rebuild`` reads them); triggers, and ``append_events`` for events, write them.
"""

from __future__ import annotations

from collections.abc import Sequence

from loci.models import Scope, SearchHit
from loci.search import bm25_to_score, query_terms
from loci.store.base import Scored, SearchFilters
from loci.store.rows import ordered_hits
from loci.store.sqlite.base import SQLiteBase
from loci.store.sqlite.rows import KEY_MASK, KINDS, SCOPE_SHIFT, filter_sql

#: Rows an OR query may match before only its rarest words search (``_rare_terms``).
MATCH_BUDGET = 4_000


class SQLiteKeywords(SQLiteBase):
    """Ranked keyword search of any searchable kind (BM25 by FTS5; at scale, over the
    query's rarest words) and reading hits by key."""

    def keyword_candidates(
        self, scope: Scope, kind: str, query: str, *, limit: int, filters: SearchFilters
    ) -> list[Scored]:
        terms = query_terms(query)
        rowids = self._scope_rowids(scope)
        if not terms or rowids is None:
            return []
        k = KINDS[kind]
        where, params = filter_sql(kind, filters)
        # The rowid range confines ranking to the scope (see the module docstring).
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


def _match(terms: list[str]) -> str:
    """An FTS5 OR query of quoted terms (``search.fts_query`` for terms already split)."""
    return " OR ".join(f'"{term}"' for term in terms)
