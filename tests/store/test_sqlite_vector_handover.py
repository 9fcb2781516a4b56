"""A write of this process hands the vectors it committed to the scope's loaded vector
index, so searches do not read them back from the database; rows another process
committed before them are never skipped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from loci import Memory, Scope, SearchFilters
from loci.store.sqlite import SQLiteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCOPE = Scope("alice", "helper")
DIM = 16
ANY = SearchFilters()


def _unit(n: int, seed: int) -> np.ndarray:
    m = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _memories(prefix: str, n: int) -> list[Memory]:
    return [Memory(f"{prefix}{i:03d}", "project_context", f"memory {prefix} {i}", (), T0,
                   T0, None) for i in range(n)]


def _top(store: SQLiteStore, query: np.ndarray) -> str:
    scored = store.vector_candidates(SCOPE, "memory", query, limit=1, filters=ANY)
    return store.hits(SCOPE, "memory", scored)[0].id


def _reads(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the rows searches read back from the database."""
    read: list[int] = []
    rows = store._vector_rows

    def counted(*args: Any) -> Iterator[tuple[int, bytes, int]]:
        found = list(rows(*args))
        read.append(len(found))
        return iter(found)

    monkeypatch.setattr(store, "_vector_rows", counted)
    return read


def test_a_write_hands_its_vectors_to_the_loaded_index(
        db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SQLiteStore(db)
    try:
        first, more = _unit(50, 1), _unit(30, 2)
        store.put_memories(SCOPE, _memories("a", 50), first)
        assert _top(store, first[7]) == "a007"  # loads the index
        read = _reads(store, monkeypatch)
        store.put_memories(SCOPE, _memories("b", 30), more)
        assert _top(store, more[12]) == "b012"
        # Re-embedding a row replaces its vector in the index too.
        store.set_embeddings(SCOPE, "memory", ["a007"], more[20:21])
        assert _top(store, first[7]) != "a007"
        assert sum(read) == 0  # nothing was read back
    finally:
        store.close()


def test_rows_another_process_committed_first_are_read_from_the_database(
        db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs = SQLiteStore(db), SQLiteStore(db)
    try:
        vectors = _unit(90, 3)
        ours.put_memories(SCOPE, _memories("a", 30), vectors[:30])
        assert _top(ours, vectors[3]) == "a003"
        read = _reads(ours, monkeypatch)
        theirs.put_memories(SCOPE, _memories("b", 30), vectors[30:60])
        ours.put_memories(SCOPE, _memories("c", 30), vectors[60:])  # not handed over
        assert _top(ours, vectors[45]) == "b015" and _top(ours, vectors[75]) == "c015"
        assert sum(read) == 60  # theirs and ours, read once from the database
    finally:
        ours.close()
        theirs.close()


def test_another_processs_vectors_are_seen_once_the_last_look_is_old_enough(
        db: str) -> None:
    """A search looks for newer rows unless one looked less than ``FRESH_FOR`` ago."""
    from loci.store.indexed_vectors import FRESH_FOR

    ours, theirs = SQLiteStore(db), SQLiteStore(db)
    try:
        vectors = _unit(60, 4)
        ours.put_memories(SCOPE, _memories("a", 30), vectors[:30])
        assert _top(ours, vectors[3]) == "a003"
        theirs.put_memories(SCOPE, _memories("b", 30), vectors[30:])
        time.sleep(FRESH_FOR)
        assert _top(ours, vectors[45]) == "b015"
    finally:
        ours.close()
        theirs.close()
