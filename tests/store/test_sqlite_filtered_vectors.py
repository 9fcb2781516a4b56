"""SQLite vector search under filters: a filter that leaves few rows is served by exact
search over them, found in indexes alone (tags through the full-text index of tags),
and the filters' exact test still decides what is returned."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from loci import Memory, Scope, SearchFilters
from loci.store.sqlite import SQLiteStore
from loci.store.sqlite import vectors as sqlite_vectors

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Scope("alice", "helper")
BOB = Scope("bob", "helper")
DIM = 16
pytestmark = pytest.mark.backends("sqlite")


def _unit(n: int, seed: int) -> np.ndarray:
    m = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _tags(i: int) -> tuple[str, ...]:
    if i % 50 == 0:
        return ("release",)
    if i % 50 == 1:
        return ("releases",)  # the same stem: found by the full-text index, not wanted
    if i % 50 == 2:
        return ("v1.2-release",)  # the same words: found, not wanted either
    if i % 50 == 3:
        return ("!!!",)  # no word to look up
    return ("backend",) if i % 2 else ()


@pytest.fixture(autouse=True)
def tagged_memories(store: SQLiteStore) -> None:
    """600 memories of Alice's and 600 of Bob's, with vectors, tagged by ``_tags``."""
    vectors = _unit(600, 1)
    for scope in (ALICE, BOB):
        # (Bob's rows carry the same tags: the full-text index holds both scopes.)
        prefix = "m" if scope == ALICE else "b"
        memories = [Memory(f"{prefix}{i:03d}", "decision" if i % 60 == 0 else "project_context",
                           f"memory number {i}", _tags(i), T0, T0,
                           T0 + timedelta(days=1) if i == 100 else None)
                    for i in range(600)]
        store.put_memories(scope, memories, vectors)


def _ids(store: SQLiteStore, query: np.ndarray, filters: SearchFilters,
         limit: int = 5) -> list[str]:
    scored = store.vector_candidates(ALICE, "memory", query, limit=limit, filters=filters)
    return [hit.id for hit in store.hits(ALICE, "memory", scored)]


def _exact(query: np.ndarray, keep: list[int], limit: int = 5) -> list[str]:
    """The best ``limit`` of ``keep`` by cosine (a search returns positive ones only)."""
    scores = _unit(600, 1) @ query
    best = sorted((i for i in keep if scores[i] > 0), key=lambda i: -scores[i])
    return [f"m{i:03d}" for i in best[:limit]]


def test_a_rare_tag_is_found_through_the_full_text_index(store: SQLiteStore) -> None:
    query = _unit(1, 2)[0]
    filters = SearchFilters(tags=("release",), now=T0)
    assert store._roughly_allowed("memory", ALICE, filters) is not None  # the exact path
    # The index also finds "releases" and "v1.2-release"; the exact test drops them.
    assert _ids(store, query, filters) == _exact(query, [i for i in range(600)
                                                          if i % 50 == 0 and i != 100])


def test_a_tag_without_words_and_a_type_are_exact_too(store: SQLiteStore) -> None:
    query = _unit(1, 3)[0]
    assert _ids(store, query, SearchFilters(tags=("!!!",), now=T0)) == _exact(
        query, [i for i in range(600) if i % 50 == 3])
    assert _ids(store, query, SearchFilters(types=("decision",), now=T0)) == _exact(
        query, [i for i in range(600) if i % 60 == 0])


def test_expired_rows_among_the_best_are_replaced(store: SQLiteStore) -> None:
    # m100 (tagged "release", expired on day 2) is the query itself: the best row of
    # the index's few, dropped by the exact test, and the next ones fill its place.
    query = _unit(600, 1)[100]
    later = T0 + timedelta(days=2)
    found = _ids(store, query, SearchFilters(tags=("release",), now=later), limit=11)
    assert "m100" not in found and len(found) > 1
    assert found == _exact(query, [i for i in range(600) if i % 50 == 0 and i != 100], 11)
    assert _ids(store, query, SearchFilters(tags=("release",), now=T0), 1) == ["m100"]


def test_a_common_filter_goes_through_the_index_of_all_rows(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_vectors, "EXACT_ALLOWED", 100)
    query = _unit(1, 4)[0]
    filters = SearchFilters(tags=("backend",), now=T0)
    assert store._roughly_allowed("memory", ALICE, filters) is None  # 300 rows: too many
    backend = [i for i in range(600) if _tags(i) == ("backend",)]
    assert _ids(store, query, filters) == _exact(query, backend)
