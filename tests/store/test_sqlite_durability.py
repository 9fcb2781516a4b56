"""SQLite under real processes: concurrent writers and a writer killed mid-write."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from loci import Loci, Memory, Scope, StoreError, open_store
from loci.store.base import NO_FILTERS
from loci.store.sqlite import SQLiteStore
from loci.store.sqlite.schema import MIGRATIONS

WRITER = """
import sys
from datetime import datetime, UTC
from loci import Scope, open_store
from loci.models import NewEvent
store = open_store(sys.argv[1])
name, count, batch = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for i in range(count):
    events = [NewEvent(type="message", role="user", content=f"{name} {i} {j}",
                       timestamp=datetime.now(UTC), tokens=3) for j in range(batch)]
    store.append_events(Scope("t", "a"), "shared", events)
    if i == 0:
        print("started", flush=True)
"""


def _writer(url: str, name: str, count: int, batch: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WRITER, url, name, str(count), str(batch)],
                            stdout=subprocess.PIPE, text=True)


def test_two_processes_write_concurrently_without_loss(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'multi.db'}"
    open_store(url).close()
    procs = [_writer(url, f"p{n}", 100, 3) for n in range(2)]
    for p in procs:
        p.communicate(timeout=120)
    assert [p.returncode for p in procs] == [0, 0]
    store = open_store(url)
    events = store.list_events(Scope("t", "a"), "shared")
    assert len(events) == 600
    assert len({e.content for e in events}) == 600
    # Each batch stays contiguous: appends are atomic even under contention.
    for start in range(0, 600, 3):
        names = {e.content.rsplit(" ", 1)[0] for e in events[start:start + 3]}
        assert len(names) == 1
    store.close()


def test_killed_writer_leaves_only_whole_batches(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    proc = _writer(url, "k", 100_000, 50)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    db = sqlite3.connect(tmp_path / "killed.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    store = open_store(url)
    events = store.list_events(Scope("t", "a"), "shared")
    assert len(events) >= 50 and len(events) % 50 == 0
    assert store.search_events(Scope("t", "a"), "k")  # the FTS index is consistent too
    store.close()


def test_stores_opened_at_once_migrate_once(tmp_path: Path) -> None:
    """Server workers open a new store together: each migration runs once."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def open_store() -> None:
        barrier.wait()
        try:
            SQLiteStore(url).close()
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    store = SQLiteStore(url)
    versions = [r[0] for r in store._query("SELECT version FROM migrations")]
    store.close()
    assert sorted(versions) == sorted(MIGRATIONS)


def test_a_search_for_one_day_reads_that_day_by_the_time_index(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from loci.store.base import SearchFilters
    from loci.store.sqlite.rows import filter_sql

    store = SQLiteStore(f"sqlite:///{tmp_path / 't.db'}")
    try:
        day = SearchFilters(since=datetime(2023, 5, 8, tzinfo=UTC),
                            until=datetime(2023, 5, 9, tzinfo=UTC))
        where, params = filter_sql("event", day)
        plan = store._db.execute(
            "EXPLAIN QUERY PLAN SELECT e.id FROM events e WHERE e.tenant = ? AND "
            f"e.agent = ? AND e.vec_seq IS NOT NULL{where}", ("a", "b", *params)).fetchall()
        assert any("events_by_time" in str(row[-1]) for row in plan), plan
    finally:
        store.close()


def test_reads_go_on_while_a_write_transaction_is_open(tmp_path: Path) -> None:
    """A long write (a bulk import) must not hold up searches and reads: they read the
    last commit on connections of their own, and never see the write's changes early."""
    store = SQLiteStore(f"sqlite:///{tmp_path / 'busy.db'}")
    scope = Scope("t", "a")
    vector = np.eye(1, 8, dtype=np.float32)
    now = datetime.now(UTC)
    store.put_memories(scope, [Memory("m1", "fact", "the kettle is in the shed", (), now, now)],
                       vector)
    inside, release = threading.Event(), threading.Event()

    def slow_import() -> None:
        with store._write() as db:
            db.execute("DELETE FROM memories WHERE id = 'm1'")
            inside.set()
            release.wait(30)
            db.execute("ROLLBACK")  # the write fails: its delete never happened
            db.execute("BEGIN")

    def search() -> list[list[str]]:
        return [[hit.id for hit in store.search_memories(scope, "kettle")],
                [str(key) for key, _ in store.vector_candidates(
                    scope, "memory", vector[0], limit=5, filters=NO_FILTERS)]]

    writer = threading.Thread(target=slow_import)
    writer.start()
    try:
        assert inside.wait(30)
        results: list[list[list[str]]] = []
        reader = threading.Thread(target=lambda: results.append(search()))
        reader.start()
        reader.join(10)
        assert not reader.is_alive(), "the search waited for the write transaction"
        assert results[0][0] == ["m1"] and len(results[0][1]) == 1
    finally:
        release.set()
        writer.join(30)
    assert search()[0] == ["m1"]
    store.close()


def test_a_file_that_refuses_a_write_is_a_store_error(tmp_path: Path) -> None:
    """Locked past the busy timeout (or read-only, or a full disk): a ``StoreError``
    naming the cause, nothing half-written, and the next write goes through."""
    db = tmp_path / "locked.db"
    with Loci.open(store=f"sqlite:///{db}", home=str(tmp_path)) as loci:
        loci.add("s", "user", "first")
        loci.store._db.execute("PRAGMA busy_timeout = 50")  # type: ignore[attr-defined]
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StoreError, match="locked"):
            loci.add("s", "user", "second")
        other.execute("ROLLBACK")
        other.close()
        loci.add("s", "user", "third")
        assert [e.content for e in loci.events("s")] == ["first", "third"]


def test_a_process_holding_the_saves_lock_holds_up_no_one_for_ever(tmp_path: Path) -> None:
    """A stopped process keeps its locks: a save waits as a write waits for the
    database, then says why."""
    import fcntl

    db = tmp_path / "saves.db"
    with Loci.open(store=f"sqlite:///{db}", home=str(tmp_path)) as loci:
        loci.remember("The user lives in Lisbon", type="sticky")
        loci.store._saves_timeout = 0.2  # type: ignore[attr-defined]
        with open(f"{db}.saves", "a+b") as other:  # as another process would hold it
            fcntl.flock(other, fcntl.LOCK_EX)
            with pytest.raises(StoreError, match="held"):
                loci.remember("The user drinks tea", type="user_preference")
        loci.remember("The user drinks tea", type="user_preference")
        assert sorted(m.content for m in loci.memories()) == [
            "The user drinks tea", "The user lives in Lisbon"]


def test_another_program_s_database_or_a_file_of_no_database_is_left_as_it_was(
        tmp_path: Path) -> None:
    """Pointing ``--store`` at the wrong file must not add Loci's tables to it, switch
    its journal or change its permissions."""
    theirs = tmp_path / "app.db"
    with closing(sqlite3.connect(theirs)) as db:
        db.execute("CREATE TABLE notes (x)")
        db.execute("INSERT INTO notes VALUES ('mine')")
        db.commit()
    garbage = tmp_path / "notes.txt"
    garbage.write_text("not a database at all\n" * 100)
    for path in (theirs, garbage):
        path.chmod(0o644)
        before = path.read_bytes()
        with pytest.raises(StoreError, match=r"another program's|not a Loci store"):
            open_store(f"sqlite:///{path}")
        assert path.read_bytes() == before and stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_store_left_readable_by_others_has_its_journal_files_made_private(
        tmp_path: Path) -> None:
    """A store file made before Loci made files private (0644): opening it makes it and
    the write-ahead log's files its owner's alone."""
    path = tmp_path / "old.db"
    open_store(f"sqlite:///{path}").close()
    path.chmod(0o644)
    store = open_store(f"sqlite:///{path}")
    try:
        for name in ("old.db", "old.db-wal", "old.db-shm"):
            if (tmp_path / name).exists():
                assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
        assert (tmp_path / "old.db-shm").exists()
    finally:
        store.close()
