"""Keyword search in the SQLite backend: BM25 with every statistic taken from the
caller's own scope.

FTS5 keeps one index per table, and its ``bm25()`` counts the whole table: one tenant's
IDF and average length moved when another tenant wrote a word (a score fell from 0.681
to 0.517 after someone else stored the query's word), and ``ORDER BY rank`` ranked every
tenant's matching rows before a join dropped the others'. So:

- each full-text row's rowid carries its scope (``scope number << SCOPE_SHIFT | key``,
  ``scopes`` numbering each (tenant, agent) once). A doclist is sorted by rowid, so FTS5
  seeks straight to one scope's ``rowid BETWEEN`` range: matching and counting touch
  the caller's rows only;
- ``fts_stats`` counts each scope's rows and indexed characters (kept by the triggers
  that index rows, and by ``rows.index_events``); a term's document frequency is the
  count of its matches in the scope's range;
- a row's term frequency is read back from FTS5's own ``bm25()`` (its tokenizer and
  stemmer decide what matches), and the score is BM25 again (k1 = 1.2, b = 0.75, idf
  ln((N - df + 0.5) / (df + 0.5)), at least 1e-6, as FTS5's) over the scope's N and df,
  with the length measured in indexed characters against the scope's average.

The full-text tables read their content through views that compute these rowids (only
``rebuild`` reads them); triggers, and ``index_events`` for events, write them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence

from loci.models import Scope, SearchHit
from loci.search import bm25_to_score, query_terms
from loci.store.base import Scored, SearchFilters
from loci.store.rows import ordered_hits
from loci.store.sqlite.base import SQLiteBase
from loci.store.sqlite.rows import FULL_TEXT_OF, KEY_MASK, KINDS, SCOPE_SHIFT, filter_sql

#: Rows an OR query may match before only its rarest words search (``_rare_terms``).
MATCH_BUDGET = 4_000
#: BM25's parameters, as FTS5's.
K1, B = 1.2, 0.75


class SQLiteKeywords(SQLiteBase):
    """Ranked keyword search of any searchable kind (BM25 over the scope's statistics;
    at scale, over the query's rarest words) and reading hits by key."""

    def keyword_candidates(
        self, scope: Scope, kind: str, query: str, *, limit: int, filters: SearchFilters
    ) -> list[Scored]:
        terms = query_terms(query)
        rowids = self._scope_rowids(scope)
        if not terms or rowids is None or limit <= 0:
            return []
        fts = KINDS[kind].fts
        with self._snapshot():
            counts = {t: self._count(fts, t, rowids, MATCH_BUDGET + 1) for t in terms}
            rare = self._rare_terms(fts, counts, rowids)
            scored: list[Scored] = []
            if rare is not None:
                scored = self._ranked(scope, kind, rare, counts, rowids, filters, limit)
            if rare is None or len(scored) < limit:  # the filters wanted common words' rows
                scored = self._ranked(scope, kind, terms, counts, rowids, filters, limit)
        return scored

    def _ranked(self, scope: Scope, kind: str, terms: list[str], counts: dict[str, int],
                rowids: tuple[int, int], filters: SearchFilters, limit: int
                ) -> list[Scored]:
        """The best ``limit`` rows matching any of ``terms`` and the filters, by BM25
        over the scope's statistics (see the module docstring)."""
        k = KINDS[kind]
        ft = FULL_TEXT_OF[k.table]
        docs, chars = self._scope_stats(k.table, rowids[0] >> SCOPE_SHIFT)
        table_length = self._average_tokens(k.fts)
        where, params = filter_sql(kind, filters)
        weights = ft.column_weights()
        sql = (
            f"SELECT f.rowid & {KEY_MASK}, bm25({k.fts}, {_list(weights)}), "
            f"bm25({k.fts}, {_list(2 * w for w in weights)}), d.sz, "
            f"{ft.length_sql(k.alias)} FROM {k.fts} f "
            f"JOIN {k.fts}_docsize d ON d.id = f.rowid "
            f"JOIN {k.table} {k.alias} ON {k.alias}.{k.key} = (f.rowid & {KEY_MASK}) "
            f"WHERE {k.fts} MATCH ? AND f.rowid BETWEEN ? AND ? "
            f"AND {k.alias}.tenant = ? AND {k.alias}.agent = ?{where}"
        )
        totals: dict[int, float] = {}
        for term in terms:
            df = counts[term]
            if df > MATCH_BUDGET:
                df = self._count(k.fts, term, rowids, None)
            if not df:
                continue
            n = max(docs, df)
            idf = max(1e-6, math.log((n - df + 0.5) / (df + 0.5)))
            rows = self._query(sql, (_match([term]), *rowids, scope.tenant, scope.agent,
                                     *params))
            for key, once, twice, sizes, length in rows:
                freq = _frequency(once, twice, sum(_varints(sizes)), table_length)
                norm = K1 * (1 - B + B * length * docs / chars) if chars > 0 else K1
                totals[key] = totals.get(key, 0.0) + idf * freq * (K1 + 1) / (freq + norm)
        # Compared to 9 decimals, so that rows scoring alike keep the order of their keys
        # whichever order the terms were added in.
        best = sorted(totals.items(), key=lambda item: (-round(item[1], 9), item[0]))
        return [(int(key), bm25_to_score(-score)) for key, score in best[:limit]]

    def _scope_stats(self, table: str, number: int) -> tuple[int, int]:
        """The scope's (rows, indexed characters) in ``table``'s index."""
        rows = self._query("SELECT docs, chars FROM fts_stats WHERE kind = ? AND scope = ?",
                           (table, number))
        return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)

    def _average_tokens(self, fts: str) -> float:
        """The whole index's average row length in tokens, as ``bm25()`` uses it: FTS5's
        averages record holds the row count, then each column's total tokens."""
        rows = self._query(f"SELECT block FROM {fts}_data WHERE id = 1")
        if not rows:
            return 1.0
        count, *totals = _varints(rows[0][0])
        return sum(totals) / count if count else 1.0

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

    def _rare_terms(self, fts: str, counts: dict[str, int], rowids: tuple[int, int]
                    ) -> list[str] | None:
        """The rarest terms whose rows together stay within ``MATCH_BUDGET``, or None to
        search with all of them.

        Ranking reads every matching row; a four-word query whose words are common
        matches tens of thousands. Common words add little to BM25 (their IDF is low),
        so past the budget only the rare ones choose and rank the rows. Stores where the
        query matches fewer rows (every test, the LoCoMo benchmark) are ranked exactly:
        the counts, or one capped count of the whole query, decide.
        """
        terms = list(counts)
        if (len(terms) < 2 or sum(counts.values()) <= MATCH_BUDGET
                or self._count(fts, terms, rowids, MATCH_BUDGET + 1) <= MATCH_BUDGET):
            return None
        kept: list[str] = []
        total = 0
        for term in sorted(terms, key=lambda t: (counts[t], terms.index(t))):
            if kept and total + counts[term] > MATCH_BUDGET:
                break
            kept.append(term)
            total += counts[term]
        return kept if len(kept) < len(terms) else None

    def _count(self, fts: str, terms: str | list[str], rowids: tuple[int, int],
               cap: int | None) -> int:
        """The scope's rows matching any of ``terms``, counted up to ``cap`` (FTS5 walks
        the doclists only, without ranking)."""
        match = _match([terms] if isinstance(terms, str) else terms)
        rows = self._query(f"SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? "
                           "AND rowid BETWEEN ? AND ? LIMIT ?)", (match, *rowids, cap or -1))
        return int(rows[0][0])


def _match(terms: list[str]) -> str:
    """An FTS5 OR query of quoted terms (``search.fts_query`` for terms already split)."""
    return " OR ".join(f'"{term}"' for term in terms)


def _list(values: Iterable[float]) -> str:
    return ", ".join(map(str, values))


def _varints(blob: bytes) -> Iterator[int]:
    """The integers of an FTS5 record (SQLite varints: 7 bits a byte, big-endian, the
    high bit set on all bytes but the last; a ninth byte gives all 8 bits)."""
    value = length = 0
    for byte in blob:
        if length == 8:
            yield value << 8 | byte
            value = length = 0
            continue
        value, length = value << 7 | byte & 0x7F, length + 1
        if byte < 0x80:
            yield value
            value = length = 0


def _frequency(once: float, twice: float, tokens: int, table_length: float) -> float:
    """A row's weighted frequency F of one term, read back from FTS5's ``bm25()`` of
    that term at the column weights (``once``) and at twice them (``twice``).

    bm25 is -idf * F (k1 + 1) / (F + c), with c = k1 (1 - b + b * tokens / the table's
    average length): doubling the weights doubles F, so twice / once is
    2 (F + c) / (2F + c), which gives F.
    """
    if once == 0:
        return 0.0
    ratio = min(max(twice / once, 1 + 1e-12), 2.0)
    c = K1 * (1 - B + B * tokens / table_length)
    # F is a sum of column weights (tenths): rounding drops the last bits that the
    # table's statistics leave, so other tenants' rows never move a score at all.
    return round(c * (2 - ratio) / (2 * (ratio - 1)), 6)
