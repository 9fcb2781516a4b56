"""What every part of the SQLite backend shares: the writer's connection and its lock,
the write transaction (which keeps the full-text indexes merged), and reads on
connections of their own.

A file's reads never wait for its writer: in WAL mode a read transaction sees the last
commit while a write goes on, so each thread reads on a pooled read-only connection
(``Readers``) instead of queueing on the writer's lock behind a bulk import. Inside a
write transaction a thread reads on the writer's connection, which sees its own
uncommitted rows. An in-memory store has one connection, so there everything takes the
lock."""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from loci.errors import StoreError
from loci.models import Scope
from loci.store.indexed_vectors import IndexedVectors
from loci.store.sqlite.rows import FULL_TEXT, KEY_MASK, SCOPE_SHIFT, tokens
from loci.store.wal_checkpoint import Checkpointer

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


log = logging.getLogger("loci.store")
#: The ``meta`` key of a scrub an erasure still owes (see ``_mark_for_scrub``).
SCRUB_PENDING = "scrub_pending"  # in store.base.OWN_META
#: Tables whose rows get their vector after they were written (the background indexer).
GROWN_ROWS = frozenset({"events", "documents"})


def trim_heap() -> None:
    """Return the C heap's free memory to the system (glibc's ``malloc_trim``): freed
    chunks otherwise stay in the process's resident set. Elsewhere, nothing."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.malloc_trim(0)


class Readers:
    """Read-only connections to one file, lent to one thread at a time and kept for
    the next read (a thread holds one only for a statement or a snapshot)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def lend(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._closed:
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            db = self._idle.pop() if self._idle else None
        if db is None:
            db = self._open()
        try:
            yield db
        finally:
            with self._lock:
                if self._closed:
                    db.close()
                else:
                    self._idle.append(db)

    def shrink(self) -> None:
        """Free the page caches of the connections not lent out."""
        with self._lock:
            idle, self._idle = self._idle, []
        for db in idle:
            db.execute("PRAGMA shrink_memory")
        with self._lock:
            if self._closed:
                for db in idle:
                    db.close()
            else:
                self._idle.extend(idle)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for db in idle:
            db.close()

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False,
                             timeout=30.0)
        db.create_function("loci_tokens", 1, tokens, deterministic=True)
        db.execute("PRAGMA query_only=ON")
        db.execute("PRAGMA cache_size=-16384")
        db.execute("PRAGMA mmap_size=268435456")
        return db


class SQLiteBase(IndexedVectors):
    """The connections and how to use them. Each part of the backend extends it, so
    each knows the whole contract it helps implement."""

    #: The writer's connection, shared by threads under ``_lock``.
    _db: sqlite3.Connection
    _lock: threading.RLock
    #: Read connections (None in memory, where reads take ``_lock`` and use ``_db``).
    _readers: Readers | None
    #: Per thread, the connection it is reading on (``_db`` inside a write).
    _reading_on: threading.local
    #: (``_index_lock`` is ``_lock`` itself in memory, where reads take it too: one lock
    #: cannot be taken in two orders.)
    #: Per content table, the size (highest rowid) at which its index is merged next.
    _fts_due: dict[str, int]
    #: Scopes' lowest full-text rowids (``rows.scope_base``), by scope.
    _scope_bases: dict[Scope, int]
    #: Where the vector indexes' graphs are saved (None in memory).
    _ann_dir: Path | None
    #: Checkpoints the write-ahead log off the writers' path (None in memory).
    _checkpointer: Checkpointer | None
    #: Deduplicated saves, one at a time between processes by a lock on this file
    #: (``saving``; None in memory), waited for at most this many seconds.
    _saves_file: Path | None
    _saves_timeout: float

    def local_lock(self) -> threading.RLock:
        return self._lock

    def reads_alongside(self) -> bool:
        return self._readers is not None

    @contextmanager
    def saving(self, scope: Scope) -> Iterator[None]:
        """This process's threads take turns under the writers' lock (which the turn
        extraction's saves already hold: one order, no deadlock); processes take the
        lock file's (one for the store: saves are short)."""
        with self._lock:
            if self._saves_file is None:  # in memory: this process is all there is
                yield
                return
            try:
                handle = os.open(self._saves_file, os.O_CREAT | os.O_RDWR, 0o600)
            except OSError as exc:
                raise StoreError(f"cannot lock {self._saves_file}: {exc}") from exc
            try:
                self._take(handle)
                yield
            finally:
                os.close(handle)  # which releases the lock

    def _take(self, handle: int) -> None:
        """The saves' lock file, waited for as long as a write waits for the database
        (a process stopped while it holds the lock must not hold up every other)."""
        deadline = time.monotonic() + self._saves_timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreError(f"another process has held {self._saves_file} for "
                                     f"{self._saves_timeout:g} s") from None
                time.sleep(0.005)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed on success, rolled back on any error; a file
        that refuses it (locked past the busy timeout, read-only, a full disk) is a
        ``StoreError``."""
        try:
            with self._lock, self._transaction(), self._reading(self._db):
                yield self._db
        except sqlite3.OperationalError as exc:
            raise StoreError(f"the SQLite store could not write: {exc}") from exc
        self._write_generation += 1
        self._merge_grown_indexes()
        if self._checkpointer is not None:
            self._checkpointer.poke()

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

    def _ann_path(self, kind: str, scope: Scope) -> Path | None:
        if self._ann_dir is None:
            return None
        name = hashlib.sha256(f"{kind}\0{scope.tenant}\0{scope.agent}".encode()).hexdigest()
        return self._ann_dir / f"{kind}-{name[:24]}.usearch"

    def _release_memory(self) -> None:
        """After a quiet spell (``Checkpointer``): give back what the page caches hold
        (up to 64 MB for the writer and 16 MB a reader, filled by the pages that writes
        touch and reads find in the log) and the free pages of the C heap, so a server
        that served a burst does not keep its peak while idle. A busy writer keeps its
        cache."""
        if self._lock.acquire(blocking=False):
            try:
                self._db.execute("PRAGMA shrink_memory")
            finally:
                self._lock.release()
        if self._readers is not None:
            self._readers.shrink()
        trim_heap()

    def _mark_for_scrub(self, db: sqlite3.Connection, tables: Iterable[str],
                        scope: Scope | None = None, kinds: Iterable[str] = ()) -> None:
        """Record, in the deleting transaction, what ``_scrub`` must still purge: a
        process killed between the delete's commit and the end of the scrub left the
        rows gone and their text in the file, and nothing to find them by. The next
        ``finish_erasure`` (any later erasure does it) scrubs what is recorded."""
        row = db.execute("SELECT value FROM meta WHERE key = ?", (SCRUB_PENDING,)).fetchone()
        pending = json.loads(row[0]) if row else {"tables": [], "scopes": []}
        pending["tables"] = sorted({*pending["tables"], *tables})
        if scope is not None:
            pending["scopes"].append([scope.tenant, scope.agent, sorted(kinds)])
        db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO "
                   "UPDATE SET value = excluded.value", (SCRUB_PENDING, json.dumps(pending)))

    def finish_erasure(self) -> bool:
        """Finish the scrub an interrupted erasure recorded (vector graphs of its
        scopes, full-text segments, free pages, the log); whether there was one."""
        rows = self._query("SELECT value FROM meta WHERE key = ?", (SCRUB_PENDING,))
        if not rows:
            return False
        pending = json.loads(rows[0][0])
        for tenant, agent, kinds in pending["scopes"]:
            self._forget_vectors(Scope(tenant, agent), kinds)
        self._scrub(pending["tables"])
        return True

    def _scrub(self, tables: Iterable[str]) -> None:
        """Purge deleted rows from the full-text indexes of ``tables`` and from the
        journal. FTS5 keeps a deleted row's words in its index segments until they are
        merged, and the WAL keeps old pages until a checkpoint; with ``secure_delete``
        the pages freed are zeroed. The record of a pending scrub goes once it is done,
        unless another erasure changed it meanwhile."""
        tables = list(tables)
        with self._lock:
            marker = self._db.execute("SELECT value FROM meta WHERE key = ?",
                                      (SCRUB_PENDING,)).fetchone()
            with self._transaction():
                for table in tables:
                    fts = FTS_TABLES[table]
                    self._db.execute(f"INSERT INTO {fts} ({fts}) VALUES ('optimize')")
            if set(tables) & GROWN_ROWS:
                # Rows given their vector after the insert grew, and SQLite may move a
                # grown row within its page without zeroing the old copy: a deleted
                # row's text could outlive it there. VACUUM rewrites every page.
                self._db.execute("VACUUM")
            emptied = self._truncate_log()
            if marker is not None and emptied:  # its page holds no erased text
                with self._transaction():
                    self._db.execute("DELETE FROM meta WHERE key = ? AND value = ?",
                                     (SCRUB_PENDING, marker[0]))

    def _truncate_log(self, timeout: float = 5.0) -> bool:
        """Copy the whole log into the database and empty it; whether it was. The
        background checkpointer may hold the one checkpoint slot for a moment (the
        pragma then answers busy at once): try again while it does. A reader of
        another process may hold the log longer: the pending scrub stays recorded."""
        deadline = time.monotonic() + timeout
        while self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
            if time.monotonic() > deadline:
                log.warning("the write-ahead log is still in use: it is emptied by the "
                            "next erasure")
                return False
            time.sleep(0.01)
        return True

    @contextmanager
    def _reading(self, db: sqlite3.Connection | None = None
                 ) -> Iterator[sqlite3.Connection]:
        """The connection this thread reads on: the one it already reads on, else
        ``db``, else a read connection (the writer's under its lock in memory)."""
        current: sqlite3.Connection | None = getattr(self._reading_on, "db", None)
        if current is not None:
            yield current
            return
        with ExitStack() as stack:
            if db is None and self._readers is not None:
                db = stack.enter_context(self._readers.lend())
            elif db is None:
                stack.enter_context(self._lock)
                db = self._db
            self._reading_on.db = db
            try:
                yield db
            finally:
                self._reading_on.db = None

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """Several reads from one snapshot of the file (another process, or this one's
        writer, may write between them otherwise)."""
        with self._reading() as db:
            if db.in_transaction:
                yield
                return
            db.execute("BEGIN")
            try:
                yield
            finally:
                db.execute("COMMIT")

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._reading() as db:
                return db.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            raise StoreError(f"the SQLite store could not read: {exc}") from exc


def _next_merge(merged: int) -> int:
    """The table size at which an index last merged at size ``merged`` merges again."""
    return max(merged + FTS_MIN_GROWTH, int(merged * (1 + FTS_REGROW)))
