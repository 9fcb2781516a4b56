"""SQLite keyword search at scale: past ``MATCH_BUDGET`` matching rows only the query's
rarest words choose and rank the rows; below it (every small store) ranking is FTS5's
BM25 over all the words, exactly as a plain OR query."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loci import Memory, Scope, SearchFilters
from loci.search import bm25_to_score, fts_query
from loci.store.sqlite import SQLiteStore
from loci.store.sqlite import keywords as sqlite_keywords
from loci.store.sqlite.rows import KEY_MASK

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Scope("alice", "helper")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(f"sqlite:///{tmp_path / 'loci.db'}")
    memories = [Memory(f"c{i:02d}", "project_context", f"kettle warm {i}", (), T0, T0)
                for i in range(40)]
    memories += [Memory("r1", "project_context", "kettle zeppelin", (), T0, T0),
                 Memory("r2", "preference", "zeppelin airship kettle kettle", (), T0, T0),
                 Memory("p", "preference", "warm kettle only", (), T0, T0)]
    s.put_memories(ALICE, memories)
    yield s
    s.close()


def plain(store: SQLiteStore, query: str, limit: int) -> list[tuple[str, float]]:
    """The ranking of a plain FTS5 OR query of all the words."""
    rows = store._query(
        "SELECT m.id, f.rank FROM memories_fts f "
        f"JOIN memories m ON m.rowid = (f.rowid & {KEY_MASK}) "
        "WHERE memories_fts MATCH ? ORDER BY f.rank LIMIT ?", (fts_query(query), limit))
    return [(r[0], bm25_to_score(r[1])) for r in rows]


def test_small_stores_rank_exactly_as_a_plain_or_query(store: SQLiteStore) -> None:
    hits = store.search_memories(ALICE, "kettle zeppelin warm", limit=10)
    assert [(h.id, h.score) for h in hits] == plain(store, "kettle zeppelin warm", 10)


def test_past_the_budget_the_rarest_words_rank(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_keywords, "MATCH_BUDGET", 10)
    hits = store.search_memories(ALICE, "kettle zeppelin", limit=2)
    assert {h.id for h in hits} == {"r1", "r2"}
    # Ranked by "zeppelin" alone: the shorter row first, scores of that word only.
    assert [(h.id, h.score) for h in hits] == plain(store, "zeppelin", 2)
    # More rows wanted than the rare words match: all words search, as before.
    hits = store.search_memories(ALICE, "kettle zeppelin", limit=5)
    assert [(h.id, h.score) for h in hits] == plain(store, "kettle zeppelin", 5)


def test_filters_that_the_rare_words_cannot_satisfy_fall_back(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_keywords, "MATCH_BUDGET", 10)
    only = SearchFilters(types=("preference",))
    hits = store.search_memories(ALICE, "warm zeppelin", limit=2, filters=only)
    assert {h.id for h in hits} == {"r2", "p"}
