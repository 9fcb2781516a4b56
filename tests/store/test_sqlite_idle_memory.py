"""A SQLite store gives back its page caches' memory after a quiet spell: what a burst
of writes and reads filled (up to 64 MB for the writer, 16 MB a reader) is not kept
while the process idles (a server that served a burst kept its peak)."""

from __future__ import annotations

import ctypes
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loci import Scope
from loci.models import NewEvent
from loci.store import open_store

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def sqlite_memory() -> int:
    """Bytes SQLite's allocator holds in this process (its page caches among them)."""
    lib = ctypes.CDLL("libsqlite3.so.0")
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    return int(lib.sqlite3_memory_used())


def test_page_caches_are_given_back_when_writes_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("loci.store.wal_checkpoint.IDLE_SECONDS", 0.5, raising=False)
    try:
        sqlite_memory()
    except OSError:
        pytest.skip("no shared libsqlite3 to read the allocator's figure from")
    store = open_store(f"sqlite:///{tmp_path / 'loci.db'}")
    try:
        before = sqlite_memory()
        scope = Scope("maya", "default")
        for batch in range(40):
            store.append_events(scope, f"s{batch}", [
                NewEvent(type="message", role="user", content=f"line {i} " + "words " * 60,
                         timestamp=T0, tokens=60) for i in range(100)])
        busy = sqlite_memory()
        assert busy - before > 4_000_000  # the caches filled
        deadline = time.monotonic() + 10
        while sqlite_memory() > before + (busy - before) / 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sqlite_memory() < before + (busy - before) / 4
    finally:
        store.close()
