"""SQLite merges a full-text index into one segment as its table grows (see
``store.sqlite.base.FTS_TABLES``): writes add segments, and every query reads each one."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from loci import Memory, Scope, SearchFilters
from loci.store.sqlite import SQLiteStore
from loci.store.sqlite import base as sqlite_base

SCOPE = Scope("t", "a")
NOW = datetime(2026, 11, 22, tzinfo=UTC)


def segments(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT count(DISTINCT segid) FROM memories_fts_idx").fetchone()[0])


def write_one_by_one(store: SQLiteStore, start: int, count: int) -> None:
    for i in range(start, start + count):
        store.put_memory(SCOPE, Memory(f"m{i}", "fact", f"note {i} about tides and word{i % 7}",
                                       (), NOW, NOW, None))


def test_an_index_is_merged_each_time_its_table_grows_by_a_share(tmp_path: Path) -> None:
    path = tmp_path / "loci.db"
    store = SQLiteStore(f"sqlite:///{path}")
    first = sqlite_base.FTS_MIN_GROWTH
    write_one_by_one(store, 0, first - 1)
    assert store.get_meta("fts_merged:memories") is None
    assert segments(path) > 3  # one transaction each: many segments
    write_one_by_one(store, first - 1, 1)
    assert store.get_meta("fts_merged:memories") == str(first)
    assert segments(path) == 1
    # The next merge waits for the growth; a new process knows the last one.
    write_one_by_one(store, first, 20)
    store.close()
    store = SQLiteStore(f"sqlite:///{path}")
    write_one_by_one(store, first + 20, 1)
    assert store.get_meta("fts_merged:memories") == str(first)
    assert segments(path) > 1
    write_one_by_one(store, first + 21, first - 21)
    assert store.get_meta("fts_merged:memories") == str(2 * first)
    # Nothing was lost: every memory is still found, and the index is consistent.
    hits = store.search_memories(SCOPE, "tides", limit=1000, filters=SearchFilters())
    assert len(hits) == 2 * first
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    store.close()
