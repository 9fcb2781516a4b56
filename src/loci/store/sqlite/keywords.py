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
- ``fts_stats`` counts each scope's rows and tokens (kept by the triggers that index
  rows, and by ``rows.index_events``); a term's document frequency is the count of its
  matches in the scope's range;
- a row's term frequency is read back from FTS5's own ``bm25()`` (its tokenizer and
  stemmer decide what matches), and the score is BM25 again as FTS5 computes it (k1 =
  1.2, b = 0.75, idf ln((N - df + 0.5) / (df + 0.5)), at least 1e-6), over the scope's
  N, df and average length: in a store of one scope, exactly FTS5's own scores.

The full-text tables read their content through views that compute these rowids (only
``rebuild`` reads them); triggers, and ``index_events`` for events, write them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from loci.models import Scope, SearchHit
from loci.search import bm25_to_score, query_terms
from loci.store.base import Scored, SearchFilters
from loci.store.rows import ordered_hits
from loci.store.sqlite.base import SQLiteBase
from loci.store.sqlite.rows import (
    FULL_TEXT_OF,
    KEY_MASK,
    KINDS,
    SCOPE_SHIFT,
    Kind,
    filter_sql,
    varints,
)

#: Rows an OR query may match before only its rarest words, and its newest rows, are
#: ranked (``_rare_terms``, ``_recent``).
MATCH_BUDGET = 2_000
#: The newest rows matching any word that are ranked when the rare words' rows leave
#: room (``_recent``).
RECENT_ROWS = 500
#: BM25's parameters, as FTS5's.
K1, B = 1.2, 0.75


class SQLiteKeywords(SQLiteBase):
    """Ranked keyword search of any searchable kind (BM25 over the scope's statistics;
    at scale, of the rows of the query's rarest words and of its newest rows) and
    reading hits by key."""

    def keyword_candidates(
        self, scope: Scope, kind: str, query: str, *, limit: int, filters: SearchFilters
    ) -> list[Scored]:
        terms = query_terms(query)
        rowids = self._scope_rowids(scope)
        if not terms or rowids is None or limit <= 0:
            return []
        k = KINDS[kind]
        with self._snapshot():
            span = self._span(kind, scope, filters, rowids)
            if span is None:
                return []
            counts = self._counts(k.fts, terms, rowids)
            (docs, tokens, averages), = self._query(
                f"SELECT (SELECT docs FROM fts_stats WHERE kind = ?1 AND scope = ?2), "
                f"(SELECT tokens FROM fts_stats WHERE kind = ?1 AND scope = ?2), "
                f"(SELECT block FROM {k.fts}_data WHERE id = 1)",
                (k.table, rowids[0] >> SCOPE_SHIFT))
            table_rows, table_tokens = _totals(averages)
            stats = _Statistics(docs or 0, tokens or 0, table_rows == docs,
                                table_tokens / table_rows if table_rows else 1.0)
            ranking = _Ranking(scope, kind, counts, rowids, span, stats, filters, limit)
            if (sum(counts.values()) <= MATCH_BUDGET
                    or self._recent(k.fts, terms, span, MATCH_BUDGET) is None):
                return self._ranked(ranking, terms)  # few enough rows: all are ranked
            rare = _rare_terms(counts)
            scored = self._ranked(ranking, rare) if rare else []
            if len(scored) < limit:  # the rare words' rows (or the filters) left room
                newest = self._recent(k.fts, terms, span, RECENT_ROWS) or span
                more = self._ranked(replace(ranking, span=newest), terms)
                scored = _best(scored, more, limit)
            if len(scored) < limit:  # the filters wanted older rows: rank them all
                scored = self._ranked(ranking, terms)
        return scored

    def _span(self, kind: str, scope: Scope, filters: SearchFilters,
              rowids: tuple[int, int]) -> tuple[int, int] | None:
        """The full-text rowids that rows passing the filters can have: the scope's,
        or for events of a period or session (whose ids are near each other, events
        being written in the order they happen) those between the first and the last
        such event, found through the index of their time or session; None if no
        event passes."""
        if kind != "event" or (filters.since is None and filters.until is None
                               and filters.session is None and not filters.sessions):
            return rowids
        where, params = filter_sql(kind, filters)
        (first, last), = self._query(
            f"SELECT min(e.id), max(e.id) FROM events e WHERE e.tenant = ? AND e.agent = ?"
            f"{where}", (scope.tenant, scope.agent, *params))
        if first is None:
            return None
        return rowids[0] | int(first), rowids[0] | int(last)

    def _ranked(self, ranking: _Ranking, terms: list[str]) -> list[Scored]:
        """The best ``limit`` rows matching any of ``terms`` and the filters, by BM25
        over the scope's statistics (see the module docstring), in one statement."""
        counts, stats, limit = ranking.counts, ranking.stats, ranking.limit
        k = KINDS[ranking.kind]
        where, params = filter_sql(ranking.kind, ranking.filters)
        scoped = (*ranking.span, ranking.scope.tenant, ranking.scope.agent, *params)
        found = [t for t in terms if counts[t]]
        if not found:
            return []
        if stats.alone:  # the scope is the whole table: FTS5's own scores are the scope's
            rows = self._query(
                f"SELECT f.rowid & {KEY_MASK}, f.rank FROM {k.fts} f {_scope_join(k, where)} "
                "ORDER BY f.rank LIMIT ?", (_match(found), *scoped, limit))
            # Rounded and ordered as the statement below: a scope's scores are the same
            # whichever way they were computed.
            scores = [(int(key), round(-rank, 12)) for key, rank in rows]
            scores.sort(key=lambda item: (-round(item[1], 9), item[0]))
            return [(key, bm25_to_score(-score)) for key, score in scores]
        docs, tokens = stats.docs, stats.tokens
        blocks: list[str] = []
        values: list[object] = []
        for term in found:
            df = counts[term]
            if df > MATCH_BUDGET:
                df = self._count(k.fts, term, ranking.rowids)
            n = max(docs, df)
            idf = max(1e-6, math.log((n - df + 0.5) / (df + 0.5)))  # as FTS5's bm25()
            blocks.append(_term_sql(k.table, where))
            values += [idf, B * n / tokens if tokens else 0.0, B / stats.table_length,
                       _match([term]), *scoped]
        # Compared to 9 decimals, so that rows scoring alike keep the order of their keys
        # whichever order the terms were added in.
        rows = self._query(
            f"SELECT key, round(sum(s), 12) AS total FROM ({' UNION ALL '.join(blocks)}) "
            "GROUP BY key ORDER BY round(total, 9) DESC, key LIMIT ?", (*values, limit))
        return [(int(key), bm25_to_score(-score)) for key, score in rows]

    def _counts(self, fts: str, terms: list[str], rowids: tuple[int, int]) -> dict[str, int]:
        """Each term's rows in the scope, counted up to ``MATCH_BUDGET + 1``, at once."""
        count = (f"(SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? "
                 "AND rowid BETWEEN ? AND ? LIMIT ?))")
        (found,) = self._query("SELECT " + ", ".join([count] * len(terms)), [
            value for term in terms for value in (_match([term]), *rowids, MATCH_BUDGET + 1)])
        return dict(zip(terms, map(int, found), strict=True))

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

    def _recent(self, fts: str, terms: list[str], span: tuple[int, int], rows: int
                ) -> tuple[int, int] | None:
        """The newest part of ``span`` in which ``rows`` rows match any of ``terms``,
        or None if no more than that match in the whole span (FTS5 walks the doclists
        newest first, without ranking)."""
        found = self._query(f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? AND rowid "
                            "BETWEEN ? AND ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                            (_match(terms), *span, rows))
        return (int(found[0][0]) + 1, span[1]) if found else None

    def _count(self, fts: str, term: str, rowids: tuple[int, int]) -> int:
        """The scope's rows matching ``term`` (FTS5 walks its doclist, without
        ranking)."""
        rows = self._query(f"SELECT count(*) FROM {fts} WHERE {fts} MATCH ? "
                           "AND rowid BETWEEN ? AND ?", (_match([term]), *rowids))
        return int(rows[0][0])


def _rare_terms(counts: dict[str, int]) -> list[str]:
    """The rarest terms whose rows together stay within ``MATCH_BUDGET`` (none if the
    rarest alone has more).

    Ranking reads every matching row; a four-word query whose words are common
    matches tens of thousands. Common words add little to BM25 (their IDF is low), so
    past the budget the rare ones choose and rank the rows; if they leave room, the
    newest rows matching any word fill it (``_recent``).
    """
    kept: list[str] = []
    total = 0
    for term in sorted(counts, key=lambda t: counts[t]):  # stable: ties keep query order
        total += counts[term]
        if total > MATCH_BUDGET:
            break
        kept.append(term)
    return kept


def _best(scored: Sequence[Scored], more: Sequence[Scored], limit: int) -> list[Scored]:
    """The best ``limit`` of both, each key once at its best score (the rare words'
    ranking leaves out the common words' part of a row's score)."""
    best = dict(scored)
    for key, score in more:
        best[key] = max(score, best.get(key, score))
    return sorted(best.items(), key=lambda item: (-round(item[1], 9), item[0]))[:limit]


def _term_sql(table: str, where: str) -> str:
    """One term's BM25 contribution per matching row of the scope, as ``(key, s)``.

    Parameters: idf, b / the scope's average length, b / the whole table's average
    length (lengths in tokens), the term's MATCH, the scope's rowid range, tenant, agent,
    then the filters'. The row's weighted frequency F is read back from FTS5's
    ``bm25()`` of the term at the column weights and at twice them: bm25 is
    -idf * F (k1 + 1) / (F + c), with c = k1 (1 - b + b * tokens / the table's average),
    so their ratio r is 2 (F + c) / (2F + c), which gives F = c (2 - r) / 2 (r - 1). F
    is a sum of column weights (tenths): rounding it drops the last bits that the
    table's statistics leave, so other tenants' rows never move a score at all. The
    score is idf * (k1 + 1) / (1 + k1 (1 - b + b * tokens / the scope's average) / F).
    """
    k, ft = next(k for k in KINDS.values() if k.table == table), FULL_TEXT_OF[table]
    weights = ft.column_weights()
    once, twice = _list(weights), _list(2 * w for w in weights)
    return (
        f"SELECT key, ? * {K1 + 1} / (1 + {K1} * ({1 - B} + dl * ?) / round({K1} * "
        f"({1 - B} + dl * ?) * (2 - r) / (2 * (r - 1)), 6)) AS s "
        f"FROM (SELECT f.rowid & {KEY_MASK} AS key, {_tokens_sql('d.sz', len(ft.columns))} "
        f"AS dl, bm25({k.fts}, {twice}) / bm25({k.fts}, {once}) AS r FROM {k.fts} f "
        f"JOIN {k.fts}_docsize d ON d.id = f.rowid {_scope_join(k, where)} LIMIT -1)"
    )


def _scope_join(k: Kind, where: str) -> str:
    """The content join and conditions of a scope's full-text rows: the term's MATCH,
    the scope's rowid range, tenant, agent, then the filters' parameters. (The
    ``LIMIT -1`` after it keeps a subquery whole: flattened into the query above, it
    would leave ``bm25()`` outside the full-text scan it needs.)"""
    return (f"JOIN {k.table} {k.alias} ON {k.alias}.{k.key} = (f.rowid & {KEY_MASK}) "
            f"WHERE {k.fts} MATCH ? AND f.rowid BETWEEN ? AND ? "
            f"AND {k.alias}.tenant = ? AND {k.alias}.agent = ?{where}")


#: Bytes 0 to 127: ``instr`` of one byte in it is the byte's value plus one.
_BYTES = "X'" + bytes(range(128)).hex() + "'"


def _tokens_sql(sizes: str, columns: int) -> str:
    """SQL for a row's length in tokens from its FTS5 ``docsize`` record (a varint per
    column): in SQL while each column is under 128 tokens (one byte each), else by
    ``loci_tokens`` (``rows.tokens``)."""
    small = " + ".join(f"instr({_BYTES}, substr({sizes}, {i + 1}, 1))" for i in range(columns))
    return (f"(CASE WHEN length({sizes}) = {columns} THEN {small} - {columns} "
            f"ELSE loci_tokens({sizes}) END)")


@dataclass(frozen=True)
class _Ranking:
    """One keyword search's inputs: each term's rows in the scope (``counts``), the
    scope's full-text rowids and the part of them the filters leave (``span``)."""

    scope: Scope
    kind: str
    counts: dict[str, int]
    rowids: tuple[int, int]
    span: tuple[int, int]
    stats: _Statistics
    filters: SearchFilters
    limit: int


@dataclass(frozen=True)
class _Statistics:
    """A scope's rows and tokens, whether they are the whole table's, and the whole
    table's average length (``bm25()``'s)."""

    docs: int
    tokens: int
    alone: bool
    table_length: float


def _totals(averages: bytes | None) -> tuple[int, int]:
    """The whole index's rows and tokens, from FTS5's averages record: the row count,
    then each column's total tokens."""
    if not averages:
        return 0, 0
    count, *totals = varints(averages)
    return count, sum(totals)


def _list(values: Iterable[float]) -> str:
    return ", ".join(map(str, values))


def _match(terms: list[str]) -> str:
    """An FTS5 OR query of quoted terms (``search.fts_query`` for terms already split)."""
    return " OR ".join(f'"{term}"' for term in terms)
