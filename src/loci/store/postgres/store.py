"""The PostgreSQL backend: the store for teams and scale.

Many Loci processes (servers, CLIs, workers) share one database. A psycopg 3 connection
pool serves each process's threads; every write is one transaction; writers of one
session are serialized by a transaction-scoped advisory lock so that event ids grow in
commit order within a session. Full-text search uses generated ``tsvector`` columns with
GIN indexes and BM25 over postings derived from them (``keywords``), vectors are
stored with pgvector and searched in memory (``vectors``), document paths are ``ltree``
too.

Tenant isolation: every statement filters by ``tenant`` and ``agent`` (the contract
suite proves it). Row-level security is not enabled: the process connects as one role
for all tenants, so RLS would only add a ``SET LOCAL loci.tenant`` per transaction
without a second identity to enforce it against; see docs/architecture.md.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from loci.errors import ConfigError
from loci.store.codec import to_micros
from loci.store.planner_statistics import Growth
from loci.store.postgres.base import translated_errors
from loci.store.postgres.documents import PostgresDocuments
from loci.store.postgres.erasure import PostgresErasure
from loci.store.postgres.events import PostgresEvents
from loci.store.postgres.keywords import PostgresKeywords
from loci.store.postgres.memories import PostgresMemories
from loci.store.postgres.records import PostgresRecords
from loci.store.postgres.rows import check_text
from loci.store.postgres.schema import migrate
from loci.store.postgres.transfer import PostgresTransfer
from loci.timeutil import utc_now

#: Connections per process. Each thread holds one only for the length of a call.
POOL_SIZE = 8


def _configure(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)  # numpy arrays ↔ vector, in text and binary


class PostgresStore(PostgresEvents, PostgresMemories, PostgresKeywords, PostgresDocuments,
                    PostgresRecords, PostgresErasure, PostgresTransfer):
    """Storage in one PostgreSQL database (``postgresql://user@host/db``)."""

    def __init__(self, url: str, *, pool_size: int = POOL_SIZE,
                 vector_memory_mb: int | None = None) -> None:
        if not url.startswith(("postgresql:", "postgres:")):
            raise ConfigError(f"not a PostgreSQL URL: {url!r}")
        self.url = url
        with translated_errors("open"):
            with psycopg.connect(url, autocommit=True) as conn:
                migrate(conn, to_micros(utc_now()))
            self._pool = ConnectionPool(
                url, min_size=1, max_size=pool_size, kwargs={"autocommit": True},
                configure=_configure, open=True, name="loci",
            )
        self._bulk = 0
        self._df_shares = {}
        self._saves = threading.Lock()
        self._open_indexes(threading.RLock(), vector_memory_mb)
        self._growth = Growth(self._analyzed_rows, self._refresh_statistics)

    def _refresh_statistics(self, table: str) -> None:
        """Statistics of a table that grew, and of its postings. VACUUM too: it marks
        the new pages all-visible, so that the index-only scans of keyword searches
        (document frequencies, ranking) read no rows."""
        self._run(f"VACUUM (ANALYZE) {table}, {table}_terms")  # (each has postings)
        self._df_shares.clear()

    def close(self) -> None:
        self._growth.close()
        self.persist_indexes()  # (nothing is saved: this stops their segment builds)
        self._pool.close()

    # -- meta ---------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = %s", (key,))
        return str(rows[0][0]) if rows else None

    def delete_meta(self, key: str) -> None:
        with self._write() as cur:
            cur.execute("DELETE FROM meta WHERE key = %s", (key,))

    def set_meta(self, key: str, value: str) -> None:
        check_text(key, value)
        with self._write() as cur:
            cur.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def claim_meta(self, key: str, value: str) -> str:
        check_text(key, value)
        with self._write() as cur:
            cur.execute("INSERT INTO meta (key, value) VALUES (%s, %s) "
                        "ON CONFLICT (key) DO NOTHING", (key, value))
            cur.execute("SELECT value FROM meta WHERE key = %s", (key,))
            row = cur.fetchone()
            return str(row[0]) if row else value
