"""What every part of the PostgreSQL backend shares: the connection pool, transactions,
plain queries and error translation."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from loci.errors import StoreError, ValidationError
from loci.models import Scope
from loci.store.indexed_vectors import IndexedVectors
from loci.store.planner_statistics import Growth

Cursor = psycopg.Cursor[tuple[Any, ...]]


@contextmanager
def translated_errors(what: str) -> Iterator[None]:
    """Database errors become Loci's typed errors (bad text is the caller's fault)."""
    try:
        yield
    except psycopg.DataError as exc:
        # Values the database refuses (a NUL byte in a parameter, untranslatable text).
        raise ValidationError(f"PostgreSQL cannot store or compare this value: {exc}") from exc
    except psycopg.errors.ProgramLimitExceeded as exc:
        # A text whose distinct words take over 1 MB in its full-text index.
        raise ValidationError(f"PostgreSQL cannot index this text: {exc}") from exc
    except psycopg.OperationalError as exc:
        raise StoreError(f"cannot reach PostgreSQL ({what}): {exc}") from exc
    except psycopg.Error as exc:
        raise StoreError(f"PostgreSQL failed ({what}): {exc}") from exc


#: Seconds a deduplicated save waits for another's (``saving``).
SAVES_TIMEOUT = 30.0


class PostgresBase(IndexedVectors):
    """The pool (connections shared by threads) and how to use it. Each part of the
    backend extends it, so each knows the whole contract it helps implement."""

    _pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]]
    _growth: Growth
    #: Bulk loads under way (``bulk_load``: they analyze once at the end).
    _bulk: int
    #: (kind, lexeme) → (when read, postings per row or None): see
    #: ``PostgresKeywords._estimate_df``; cleared when this process analyzes.
    _df_shares: dict[tuple[str, str], tuple[float, float | None]]
    #: Deduplicated saves of this process, one at a time (``saving``).
    _saves: threading.Lock

    @contextmanager
    def saving(self, scope: Scope) -> Iterator[None]:
        """An advisory lock on the scope, held on a connection of its own; this
        process's threads queue before taking one, so waiting never holds the pool."""
        key = f"saving\x1f{scope.tenant}\x1f{scope.agent}"
        with self._saves, translated_errors("lock"), self._pool.connection() as conn:
            # Waited for at most SAVES_TIMEOUT: a stopped process keeps its lock.
            deadline = time.monotonic() + SAVES_TIMEOUT
            while not conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))",
                                   (key,)).fetchone()[0]:  # type: ignore[index]
                if time.monotonic() > deadline:
                    raise StoreError(f"another process has held the saves of {scope} for "
                                     f"{SAVES_TIMEOUT:g} s")
                time.sleep(0.005)
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))

    @contextmanager
    def _write(self) -> Iterator[Cursor]:
        """One write transaction: committed on success, rolled back on any error."""
        with (translated_errors("write"), self._pool.connection() as conn,
              conn.transaction(), conn.cursor() as cur):
            yield cur
        self._write_generation += 1

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with translated_errors("read"), self._pool.connection() as conn:
            return conn.execute(sql, params).fetchall()

    def _grew(self, table: str, rows: int) -> None:
        """``rows`` were written to ``table``: its planner statistics may need refreshing."""
        if not self._bulk:
            self._growth.wrote(table, rows)

    def _analyzed_rows(self, table: str) -> int:
        """The rows ``table``'s statistics counted (-1: never analyzed)."""
        rows = self._query("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", (table,))
        return int(rows[0][0]) if rows else -1

    def _run(self, sql: str) -> None:
        """A statement outside any transaction (ANALYZE, maintenance)."""
        with translated_errors("maintenance"), self._pool.connection() as conn:
            conn.execute(sql)

    @staticmethod
    def _lock_session(cur: Cursor, scope: Scope, session: str) -> None:
        """Serialize writers of one session until commit (every process, every server):
        events of a session get increasing ids in commit order, and the search context
        of an appended turn sees the turns committed before it."""
        cur.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (f"{scope.tenant}\x1f{scope.agent}\x1f{session}",),
        )
