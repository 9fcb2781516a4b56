"""Keyword ranking in the PostgreSQL backend: BM25 over impact-ordered postings.

``ts_rank`` over an OR query reads every matching row (~7 µs each: a heap fetch of a
wide row with its embedding) and knows no IDF; at a million memories a four-word query
matches tens of thousands of rows. So each searchable table has a narrow postings table
derived from its ``tsvector`` (``<table>_terms``: scope, lexeme, weighted term frequency,
document length, an impact that orders a term's postings), kept in step by
statement-level triggers in the same transaction as the row, and ``fts_stats``, an
insert-only log of (documents, tokens) per scope from which N and the average length
come. The postings answer every keyword search, filtered ones too (below): the table's
GIN index served none and cost every write, so version 9 dropped it.

A search is BM25 as SQLite's FTS5 computes it (k1 = 1.2, b = 0.75, idf =
ln((N - df + 0.5) / (df + 0.5)), at least 1e-6; positions weighted as ``setweight``
marked them: A 1, D 0.3), with N, the average length and df per scope:

1. df of each query lexeme: an index-only count, capped at ``DF_CAP`` (past it,
   estimated from ANALYZE's statistics of the postings);
2. when no lexeme has more than ``DEPTH`` postings, every posting is summed per row:
   the scores are exact. Otherwise candidates: per lexeme, its ``DEPTH`` postings of
   highest impact, summed per row; the best ``refine`` are rescored exactly from all
   their postings (a row may have been missing from a common lexeme's top list);
3. the rows themselves (scope and filters checked on the real row), best first; scores
   are compared to 9 decimals, so that rows scoring alike are ordered by age whichever
   order the sums were added in.

Filters that leave few rows (``FEW_ROWS``, as the vector half finds them) have just
those rows scored from their postings. When filters pass fewer of the rescored
candidates than asked, every posting of the query's lexemes is scored and the rows read
best first until enough pass.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from loci.models import Scope, SearchHit
from loci.search import bm25_to_score, query_terms
from loci.store.base import Scored, SearchFilters
from loci.store.postgres.base import PostgresBase
from loci.store.postgres.rows import KINDS, filter_sql
from loci.store.rows import ordered_hits

#: BM25 parameters, as FTS5's (float8 literals: numeric arithmetic is slower).
K1, B = "1.2::float8", "0.75::float8"
#: Postings read per query lexeme, best impact first.
DEPTH = 400
#: df counts stop here (counting costs per posting, and a common word is in a large
#: share of the rows). Past it, df is estimated from the planner's statistics
#: of the postings (``_estimate_df``).
DF_CAP = 2_000
#: Statistics target of the postings' ``term`` column: ANALYZE keeps this many most
#: common lexemes with their frequencies (by a Zipf estimate, every lexeme past DF_CAP
#: in the benchmark's million memories; not checked lexeme by lexeme).
TERM_STATISTICS = 1000
#: How long the planner's frequencies of common lexemes (``_estimate_df``) are trusted:
#: they change only when the postings are analyzed, and move little then.
ESTIMATES_FRESH_FOR = 60.0
#: Candidates rescored exactly: this many per hit asked for, at least REFINE_MIN.
REFINE_FACTOR, REFINE_MIN = 4, 100
#: Filters that leave at most this many rows (``_few_allowed``) are served by scoring
#: those rows' postings alone.
FEW_ROWS = 2_000
#: fts_stats rows of one scope beyond which a search folds them into one.
FOLD_AT = 64
#: Typical indexed length per kind: orders postings by impact (the BM25 term-frequency
#: factor at this average length); scores use the scope's real average.
REFERENCE_LENGTH = {"event": 40, "memory": 20, "document": 400}


def _squashed(found: Sequence[tuple[Any, ...]]) -> list[Scored]:
    """Same squash as SQLite's BM25 (score = r / (1 + r)), so fusion, which unsquashes
    and divides by the best keyword hit, treats both backends alike."""
    return [(int(key), bm25_to_score(-float(score))) for key, score in found]


def terms_table(kind: str) -> str:
    return f"{KINDS[kind].table}_terms"


def rank_index(kind: str) -> str:
    """The (scope, term, impact) index: dropped during bulk loads, built once after."""
    t = terms_table(kind)
    return (f"CREATE INDEX IF NOT EXISTS {t}_rank ON {t} "
            "(tenant, agent, term, impact DESC, key) INCLUDE (tf, dl)")


def schema_sql() -> list[str]:
    """Migration 2: postings tables, their triggers, and the postings of existing rows."""
    statements = [
        "CREATE TABLE fts_stats (kind text NOT NULL, tenant text NOT NULL, "
        "agent text NOT NULL, docs bigint NOT NULL, tokens bigint NOT NULL)",
        "CREATE INDEX fts_stats_by_scope ON fts_stats (kind, tenant, agent)",
    ]
    for kind in KINDS:
        statements.extend(_kind_sql(kind))
    return statements


def _write_postings(kind: str, source: str, only: str = "") -> str:
    """Postings and statistics of the rows of ``source`` (a table or a transition table),
    in one statement. One pass over ``unnest(fts)`` with a window for the document
    length: per-lexeme subqueries cost several times more (ingest fell to 1.3k rows/s)."""
    key, t = KINDS[kind].order, terms_table(kind)
    ref = REFERENCE_LENGTH[kind]
    # Weighted term frequency: every position counts 1, less for B/C/D positions.
    tf = ("COALESCE(cardinality(u.weights) - 0.6 * cardinality(array_positions(u.weights, "
          "'B')) - 0.8 * cardinality(array_positions(u.weights, 'C')) - 0.7 * "
          "cardinality(array_positions(u.weights, 'D')), 1)")
    return (
        f"WITH p AS (SELECT n.tenant, n.agent, n.{key} AS key, u.lexeme, ({tf})::real AS tf, "
        "COALESCE(cardinality(u.weights), 1) AS positions FROM "
        f"{source} n CROSS JOIN LATERAL unnest(n.fts) u{only}), "
        "d AS (SELECT *, sum(positions) OVER (PARTITION BY key)::integer AS dl FROM p), "
        f"ins AS (INSERT INTO {t} (tenant, agent, term, impact, key, tf, dl) "
        f"SELECT tenant, agent, lexeme, (tf / (tf + {K1} * (1 - {B} + {B} * dl / {ref}.0)))"
        "::real, key, tf, dl FROM d) "
        "INSERT INTO fts_stats (kind, tenant, agent, docs, tokens) "
        f"SELECT '{kind}', n.tenant, n.agent, count(*), COALESCE(sum(l.dl), 0) FROM {source} n "
        "LEFT JOIN (SELECT key, sum(positions) AS dl FROM p GROUP BY key) l "
        f"ON l.key = n.{key}{only} GROUP BY n.tenant, n.agent"
    )


def _kind_sql(kind: str) -> list[str]:
    table, key, t = KINDS[kind].table, KINDS[kind].order, terms_table(kind)
    changed = f" WHERE n.{key} = ANY(keys)"
    # Arrays of keys, not joins on transition tables: the planner cannot know their size
    # and might scan the whole postings table for a one-row delete. An update removes the
    # old postings and statistics (a negative row) and writes the new ones.
    function = f"""
        CREATE FUNCTION loci_{table}_terms() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE keys bigint[];
        BEGIN
            IF TG_OP = 'INSERT' THEN
                {_write_postings(kind, "new_rows")};
                RETURN NULL;
            ELSIF TG_OP = 'DELETE' THEN
                SELECT array_agg({key}) INTO keys FROM old_rows;
            ELSE
                SELECT array_agg(o.{key}) INTO keys FROM old_rows o
                    JOIN new_rows n ON n.{key} = o.{key} WHERE n.fts IS DISTINCT FROM o.fts;
            END IF;
            IF keys IS NULL THEN
                RETURN NULL;
            END IF;
            INSERT INTO fts_stats (kind, tenant, agent, docs, tokens)
                SELECT '{kind}', o.tenant, o.agent, -count(*), -COALESCE(sum(l.dl), 0)
                FROM old_rows o LEFT JOIN (SELECT key, max(dl) AS dl FROM {t}
                WHERE key = ANY(keys) GROUP BY key) l ON l.key = o.{key}
                WHERE o.{key} = ANY(keys) GROUP BY o.tenant, o.agent;
            DELETE FROM {t} WHERE key = ANY(keys);
            IF TG_OP = 'UPDATE' THEN
                {_write_postings(kind, "new_rows", changed)};
            END IF;
            RETURN NULL;
        END $$"""
    trigger = f"CREATE TRIGGER {table}_terms_%s AFTER %s ON {table} REFERENCING %s " \
              f"FOR EACH STATEMENT EXECUTE FUNCTION loci_{table}_terms()"
    return [
        f"CREATE TABLE {t} (tenant text NOT NULL, agent text NOT NULL, term text NOT NULL, "
        "impact real NOT NULL, key bigint NOT NULL, tf real NOT NULL, dl integer NOT NULL)",
        rank_index(kind),
        # Deletes, and rescoring candidates index-only (tf and dl included).
        f"CREATE INDEX {t}_key ON {t} (key, term) INCLUDE (tf, dl)",
        f"ALTER TABLE {t} ALTER COLUMN term SET STATISTICS {TERM_STATISTICS}",
        function,
        trigger % ("insert", "INSERT", "NEW TABLE AS new_rows"),
        trigger % ("update", "UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
        trigger % ("delete", "DELETE", "OLD TABLE AS old_rows"),
        _write_postings(kind, table),  # rows stored before this migration
    ]


def _bm25(alias: str) -> str:
    """One posting's BM25 contribution: ``w.idf`` from the query's lexemes, the average
    length from the ``a(avgdl)`` parameter row (a parameter keeps the text, and so
    psycopg's prepared statement, the same from query to query)."""
    return (f"w.idf * {alias}.tf * (1 + {K1}) / ({alias}.tf + {K1} * "
            f"(1 - {B} + {B} * {alias}.dl / a.avgdl))")


def _rounded(score: str) -> str:
    """A score to 9 decimals, so that rows scoring alike are ordered by age whichever
    order their sums were added in (in float8: rounding as numeric cost 1 ms per
    thousand rows)."""
    return f"round(({score}) * 1e9::float8) / 1e9::float8"


#: A row's score from its postings ``t`` (grouped by row).
_SUMMED = _rounded(f"sum({_bm25('t')})")


#: The query's lexemes with their idf, and the scope's average length.
_WEIGHTS = ("WITH w(term, idf) AS (SELECT * FROM unnest(%s::text[], %s::float8[])), "
            "a(avgdl) AS (SELECT %s::float8) ")


class PostgresKeywords(PostgresBase):
    """Mixed into :class:`PostgresStore`."""

    def hits(self, scope: Scope, kind: str, scored: Sequence[Scored]) -> list[SearchHit]:
        if not scored:
            return []
        k = KINDS[kind]
        rows = self._query(
            f"SELECT {k.hit_columns}, {k.alias}.{k.order} FROM {k.table} {k.alias} "
            f"WHERE {k.alias}.{k.order} = ANY(%s) AND {k.alias}.tenant = %s "
            f"AND {k.alias}.agent = %s",
            ([key for key, _ in scored], scope.tenant, scope.agent),
        )
        return ordered_hits(kind, rows, scored)

    def keyword_candidates(
        self, scope: Scope, kind: str, query: str, *, limit: int, filters: SearchFilters
    ) -> list[Scored]:
        terms = query_terms(query)  # words only: user text is never syntax
        if not terms or limit <= 0:
            return []
        docs, tokens, dfs = self._statistics(kind, scope, terms)
        if not dfs:
            return []
        n = max(docs, max(dfs.values()))
        avgdl = max(tokens / max(docs, 1), 1.0)
        idfs = {term: max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)
                for term, df in dfs.items()}
        weights = (list(idfs), list(idfs.values()))
        few = self._few_allowed(kind, scope, filters)
        if few is not None and len(few) <= FEW_ROWS:
            # Filters that leave few rows (a day, a session): score just those.
            return _squashed(self._scored(kind, scope, filters, limit, weights, avgdl, few))
        if max(dfs.values()) > DEPTH:  # a top list would be cut: candidates, rescored
            refine = max(limit * REFINE_FACTOR, REFINE_MIN)
            found = self._refined(kind, scope, filters, limit, weights, avgdl, refine)
            if len(found) >= limit:
                return _squashed(found)
        # Every posting fits in the top lists (they would be read whole, and rescoring
        # would change no score), or the filters passed too few of the candidates.
        return _squashed(self._scored(kind, scope, filters, limit, weights, avgdl, None))

    def _statistics(self, kind: str, scope: Scope, terms: list[str]
                    ) -> tuple[int, int, dict[str, int]]:
        """The scope's rows and tokens, and the df of each lexeme of ``terms`` found
        there. A retrieval searches one query under several filters (the periods and
        the people it names): the figures of the first search serve the others
        (``_recently``)."""
        return self._recently(("statistics", kind, scope, " ".join(terms)),
                              lambda: self._read_statistics(kind, scope, terms))

    def _read_statistics(self, kind: str, scope: Scope, terms: list[str]
                         ) -> tuple[int, int, dict[str, int]]:
        t = terms_table(kind)
        rows = self._query(
            "SELECT s.docs, s.tokens, s.n, q.term, (SELECT count(*) FROM (SELECT 1 "
            f"FROM {t} t WHERE t.tenant = %s AND t.agent = %s AND t.term = q.term "
            "LIMIT %s) c) FROM (SELECT COALESCE(sum(docs), 0), COALESCE(sum(tokens), 0), "
            "count(*) FROM fts_stats WHERE kind = %s AND tenant = %s AND agent = %s) "
            "s(docs, tokens, n) LEFT JOIN (SELECT DISTINCT lexeme AS term "
            "FROM unnest(to_tsvector('loci', %s))) q ON true",
            (scope.tenant, scope.agent, DF_CAP, kind, scope.tenant, scope.agent,
             " ".join(terms)),
        )
        docs, tokens, pieces = int(rows[0][0]), int(rows[0][1]), int(rows[0][2])
        if pieces > FOLD_AT:
            self._fold_stats(kind, scope)
        dfs = {str(r[3]): int(r[4]) for r in rows if r[3] is not None and r[4]}
        capped = [term for term, df in dfs.items() if df >= DF_CAP]
        if capped:
            dfs.update(self._estimate_df(kind, capped, docs))
        return docs, tokens, dfs

    def _refined(
        self, kind: str, scope: Scope, filters: SearchFilters, limit: int,
        weights: tuple[list[str], list[float]], avgdl: float, refine: int,
    ) -> list[tuple[Any, ...]]:
        """The best ``refine`` rows of the terms' top postings, rescored from all their
        postings; of those, the best ``limit`` that pass the filters."""
        k, t = KINDS[kind], terms_table(kind)
        where, params = filter_sql(kind, filters)
        scope_params = (scope.tenant, scope.agent)
        return self._query(
            f"{_WEIGHTS}, c AS (SELECT p.key, sum({_bm25('p')}) AS s FROM a, w "
            f"CROSS JOIN LATERAL (SELECT key, tf, dl FROM {t} t WHERE t.tenant = %s "
            "AND t.agent = %s AND t.term = w.term ORDER BY impact DESC, key LIMIT %s) p "
            "GROUP BY p.key ORDER BY s DESC, p.key LIMIT %s) "
            # Rescored from all their postings (the (key, term) index), best first; the
            # rows are then read in that order, only until ``limit`` pass the filters
            # (each is a heap fetch of a wide row).
            f"SELECT x.key, x.s FROM (SELECT c.key, {_rounded('x.s')} AS s FROM c "
            f"CROSS JOIN LATERAL (SELECT sum({_bm25('t')}) AS s FROM a, {t} t JOIN w "
            "ON w.term = t.term WHERE t.key = c.key AND t.term = ANY(%s::text[])) x "
            "ORDER BY 2 DESC, 1) x CROSS JOIN LATERAL "
            f"(SELECT 1 FROM {k.table} {k.alias} WHERE {k.alias}.{k.order} = x.key "
            f"AND {k.alias}.tenant = %s AND {k.alias}.agent = %s{where}) r "
            "ORDER BY x.s DESC, x.key LIMIT %s",
            (*weights, avgdl, *scope_params, DEPTH, refine, weights[0], *scope_params,
             *params, limit),
        )

    def _scored(
        self, kind: str, scope: Scope, filters: SearchFilters, limit: int,
        weights: tuple[list[str], list[float]], avgdl: float, keys: list[int] | None,
    ) -> list[tuple[Any, ...]]:
        """Every posting of the query's lexemes in the scope (or only those of the rows
        ``keys``, a superset of the rows that pass the filters) summed per row, and the
        rows read best first until ``limit`` pass the filters: for filters that leave
        few rows, or that pass too few of the best candidates. (Finding the matching
        rows through GIN instead read and filtered every one of them.)"""
        k, t = KINDS[kind], terms_table(kind)
        where, params = filter_sql(kind, filters)
        postings, narrowed = ((f"{t} t ON t.tenant = %s AND t.agent = %s", (scope.tenant,
                                                                             scope.agent))
                              if keys is None else (f"{t} t ON t.key = ANY(%s)", (keys,)))
        return self._query(
            f"{_WEIGHTS}SELECT x.key, x.s FROM (SELECT t.key, {_SUMMED} AS s FROM a, w "
            f"JOIN {postings} AND t.term = w.term GROUP BY t.key ORDER BY 2 DESC, 1) x "
            f"CROSS JOIN LATERAL (SELECT 1 FROM {k.table} {k.alias} WHERE "
            f"{k.alias}.{k.order} = x.key AND {k.alias}.tenant = %s "
            f"AND {k.alias}.agent = %s{where}) r ORDER BY x.s DESC, x.key LIMIT %s",
            (*weights, avgdl, *narrowed, scope.tenant, scope.agent, *params, limit),
        )

    def _estimate_df(self, kind: str, terms: list[str], docs: int) -> dict[str, int]:
        """df of lexemes too common to count: the share of postings ANALYZE found for
        each (``most_common_freqs``) times postings per row, times the scope's rows. A
        lexeme missing from the statistics keeps DF_CAP (a lower bound: its idf, small
        anyway, is then somewhat overrated). The shares are read at most every
        ``ESTIMATES_FRESH_FOR`` (a common word is in most questions)."""
        now, cache = time.monotonic(), self._df_shares  # (cleared by other threads)
        known = {term: cache.get((kind, term), (-math.inf, None)) for term in terms}
        stale = [term for term, (read, _) in known.items() if now - read > ESTIMATES_FRESH_FOR]
        if stale:
            if len(cache) > 10 * TERM_STATISTICS:  # (lexemes past DF_CAP: few)
                cache.clear()
            found = self._df_shares_read(kind, stale)
            known.update({term: (now, found.get(term)) for term in stale})
            cache.update({(kind, term): known[term] for term in stale})
        return {term: max(DF_CAP, min(docs, round(share * docs)))
                for term, (_, share) in known.items() if share is not None}

    def _df_shares_read(self, kind: str, terms: list[str]) -> dict[str, float]:
        """Per lexeme of ``terms`` in ANALYZE's most common ones: its postings per row."""
        t, table = terms_table(kind), KINDS[kind].table
        rows = self._query(
            "SELECT m.v, m.f * GREATEST(ct.reltuples, 0) / GREATEST(cm.reltuples, 1) "
            "FROM pg_stats s CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[], "
            "s.most_common_freqs) m(v, f), pg_class ct, pg_class cm "
            "WHERE s.schemaname = current_schema() AND s.tablename = %s "
            "AND s.attname = 'term' AND m.v = ANY(%s) AND ct.oid = %s::regclass "
            "AND cm.oid = %s::regclass", (t, terms, t, table))
        return {str(r[0]): float(r[1]) for r in rows}

    def _fold_stats(self, kind: str, scope: Scope) -> None:
        """Fold a scope's fts_stats rows into one. Writers only ever insert rows there
        (no lock contention on hot scopes); one folder at a time per scope (a try-lock:
        others skip), and rows committed meanwhile are simply left for the next fold."""
        key = f"fts_stats\x1f{kind}\x1f{scope.tenant}\x1f{scope.agent}"
        with self._write() as cur:
            cur.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
            row = cur.fetchone()
            if not (row and row[0]):
                return
            cur.execute(
                "WITH gone AS (DELETE FROM fts_stats WHERE kind = %s AND tenant = %s "
                "AND agent = %s RETURNING docs, tokens) INSERT INTO fts_stats "
                "(kind, tenant, agent, docs, tokens) SELECT %s, %s, %s, sum(docs), "
                "sum(tokens) FROM gone HAVING count(*) > 0",
                (kind, scope.tenant, scope.agent) * 2,
            )
