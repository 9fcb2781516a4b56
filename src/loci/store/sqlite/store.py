"""The SQLite backend: the embedded default.

One writer's connection per store, shared by threads under a lock, and read
connections beside it (``base``); WAL journal so readers never block; every write in an
explicit ``BEGIN IMMEDIATE`` transaction so a killed process leaves nothing
half-written. Full-text search uses FTS5 external-content tables kept in sync by
triggers.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

from loci.errors import ConfigError, StoreError
from loci.store.codec import to_micros
from loci.store.sqlite.base import Readers
from loci.store.sqlite.documents import SQLiteDocuments
from loci.store.sqlite.erasure import SQLiteErasure
from loci.store.sqlite.events import SQLiteEvents
from loci.store.sqlite.keywords import SQLiteKeywords
from loci.store.sqlite.memories import SQLiteMemories
from loci.store.sqlite.records import SQLiteRecords
from loci.store.sqlite.rows import tokens
from loci.store.sqlite.schema import migrate
from loci.store.sqlite.transfer import SQLiteTransfer
from loci.store.sqlite.vectors import SQLiteVectors
from loci.store.wal_checkpoint import Checkpointer
from loci.timeutil import utc_now


def sqlite_path(url: str) -> str:
    """The file path of a ``sqlite:///path`` URL (``sqlite:///:memory:`` for memory)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise ConfigError(f"not a SQLite URL: {url!r} (expected sqlite:///path/to/loci.db)")
    return url[len(prefix) :]


def private_file(path: Path) -> None:
    """Create ``path`` (and missing parents) readable by its owner only; SQLite gives
    its journal files the database file's permissions."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        os.chmod(path, 0o600)  # a file made before Loci made files private
        for journal in (Path(f"{path}-wal"), Path(f"{path}-shm")):
            if journal.exists():  # made with the file's old mode
                journal.chmod(0o600)
    except PermissionError:
        pass  # someone else's file that we may still read: SQLite will say


def refuse_foreign(path: Path) -> None:
    """A ``StoreError`` for a file that is not a Loci store: another program's SQLite
    database (tables, but not Loci's ``migrations``) or no database at all. Loci would
    add its tables to it, switch its journal and change its permissions."""
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                     timeout=BUSY_TIMEOUT)) as db:
            tables = {row[0] for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError):  # locked, unreadable: not its kind
            raise StoreError(f"cannot open SQLite store {path}: {exc}") from exc
        raise StoreError(f"{path} is not a Loci store ({exc}): choose another file") from exc
    except OSError as exc:
        raise StoreError(f"cannot open SQLite store {path}: {exc}") from exc
    if tables and "migrations" not in tables:
        raise StoreError(f"{path} is another program's SQLite database (tables: "
                         f"{', '.join(sorted(tables)[:5])}): Loci keeps its data in a file "
                         "of its own; choose another file")


#: Seconds a write waits for another's lock (the database's, the saves' file's).
BUSY_TIMEOUT = 30.0
#: The log's size (in pages) at which a commit checkpoints it itself.
WRITER_CHECKPOINT_PAGES = 10_000


def _wal(db: sqlite3.Connection, timeout: float = 30.0) -> None:
    """Switch to WAL. The switch of a new file takes an exclusive lock without waiting
    on the busy handler, so processes opening a new store together retry it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class SQLiteStore(SQLiteEvents, SQLiteVectors, SQLiteKeywords, SQLiteMemories, SQLiteDocuments,
                  SQLiteRecords, SQLiteErasure, SQLiteTransfer):
    """Storage in one SQLite file (or in memory for ``sqlite:///:memory:``)."""

    def __init__(self, url: str, *, vector_memory_mb: int | None = None) -> None:
        self.url = url
        path = sqlite_path(url)
        if path != ":memory:":
            refuse_foreign(Path(path))
            private_file(Path(path))
        try:
            self._db = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT
            )
            # Before migrating: the full-text triggers count tokens with it.
            self._db.create_function("loci_tokens", 1, tokens, deterministic=True)
            _wal(self._db)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            # Deleted content is overwritten with zeros, not left in free pages.
            self._db.execute("PRAGMA secure_delete=ON")
            # A 64 MB page cache and memory-mapped reads: hot rows and indexes stay in
            # memory instead of costing a system call per page.
            self._db.execute("PRAGMA cache_size=-65536")
            self._db.execute("PRAGMA mmap_size=268435456")
            # The log is checkpointed by a thread of its own (``checkpoint``); a commit
            # checkpoints only past 10,000 pages, when that thread falls far behind.
            self._db.execute(f"PRAGMA wal_autocheckpoint={WRITER_CHECKPOINT_PAGES}")
            migrate(self._db, to_micros(utc_now()))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {path}: {exc}") from exc
        self._lock = threading.RLock()
        memory = path == ":memory:"
        self._readers = None if memory else Readers(path)
        self._reading_on = threading.local()
        self._open_indexes(self._lock if memory else threading.RLock(), vector_memory_mb)
        self._fts_due = {}
        self._scope_bases = {}
        self._ann_dir = None if path == ":memory:" else Path(f"{path}.ann")
        self._saves_file = None if memory else Path(f"{path}.saves")
        self._saves_timeout = BUSY_TIMEOUT
        self._checkpointer = None if path == ":memory:" else Checkpointer(
            path, on_idle=self._release_memory)

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
        if self._readers is not None:
            self._readers.close()
        with self._lock:
            self.persist_indexes()
            self._db.close()

    # -- meta ---------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def delete_meta(self, key: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM meta WHERE key = ?", (key,))

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def claim_meta(self, key: str, value: str) -> str:
        with self._write() as db:
            db.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                       "ON CONFLICT (key) DO NOTHING", (key, value))
            return str(db.execute("SELECT value FROM meta WHERE key = ?", (key,)
                                  ).fetchone()[0])
