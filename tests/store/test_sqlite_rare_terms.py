"""SQLite keyword search: BM25 over the scope's own statistics, exactly as the textbook
formula computes it from the texts; past ``MATCH_BUDGET`` matching rows only the query's
rarest words choose and rank the rows, and the newest rows fill what room they leave."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loci import Memory, Scope, SearchFilters
from loci.search import bm25_to_score
from loci.store.sqlite import SQLiteStore
from loci.store.sqlite import keywords as sqlite_keywords

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Scope("alice", "helper")
TEXTS = {f"c{i:02d}": f"kettle warm {i}" for i in range(40)} | {
    "r1": "kettle zeppelin", "r2": "zeppelin airship kettle kettle", "p": "warm kettle only"}


pytestmark = pytest.mark.backends("sqlite")


@pytest.fixture(autouse=True)
def texts(store: SQLiteStore) -> None:
    """``TEXTS`` stored as Alice's memories."""
    store.put_memories(ALICE, [Memory(key, "preference" if key in ("r2", "p") else
                                      "project_context", text, (), T0, T0)
                               for key, text in TEXTS.items()])


def plain(store: SQLiteStore, query: str, limit: int) -> list[tuple[str, float]]:
    """BM25 as the textbook computes it over ``TEXTS`` (k1 = 1.2, b = 0.75, lengths in
    words, IDF at least 1e-6), best first: the words here need no stemming."""
    n = len(TEXTS)
    average = sum(len(text.split()) for text in TEXTS.values()) / n
    totals: dict[str, float] = {}
    for term in query.split():
        df = sum(term in text.split() for text in TEXTS.values())
        idf = max(1e-6, math.log((n - df + 0.5) / (df + 0.5)))
        for key, text in TEXTS.items():
            if tf := text.split().count(term):
                norm = 1.2 * (0.25 + 0.75 * len(text.split()) / average)
                totals[key] = totals.get(key, 0.0) + idf * tf * 2.2 / (tf + norm)
    ranked = sorted(totals.items(), key=lambda item: (-round(item[1], 9), item[0]))
    return [(key, bm25_to_score(-score)) for key, score in ranked[:limit]]


def approx(ranked: list[tuple[str, float]]) -> list[tuple[str, object]]:
    return [(key, pytest.approx(score, rel=1e-9, abs=1e-12)) for key, score in ranked]


def test_small_stores_rank_exactly_as_textbook_bm25(store: SQLiteStore) -> None:
    hits = store.search_memories(ALICE, "kettle zeppelin warm", limit=10)
    assert [(h.id, h.score) for h in hits] == approx(plain(store, "kettle zeppelin warm", 10))
    assert [h.id for h in hits][:2] == ["r1", "r2"]
    # One scope holds every row: FTS5's own scores, computed over the whole table.
    ranked = store._query(
        "SELECT m.id, f.rank FROM memories_fts f JOIN memories m "
        f"ON m.rowid = (f.rowid & {(1 << 40) - 1}) WHERE memories_fts MATCH ? "
        "ORDER BY f.rank, m.rowid LIMIT 10", ('"kettle" OR "zeppelin" OR "warm"',))
    assert [(h.id, h.score) for h in hits] == approx(
        [(key, bm25_to_score(rank)) for key, rank in ranked])


def test_past_the_budget_the_rarest_words_rank(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_keywords, "MATCH_BUDGET", 10)
    monkeypatch.setattr(sqlite_keywords, "RECENT_ROWS", 10)
    hits = store.search_memories(ALICE, "kettle zeppelin", limit=2)
    assert {h.id for h in hits} == {"r1", "r2"}
    # Ranked by "zeppelin" alone: the shorter row first, scores of that word only.
    assert [(h.id, h.score) for h in hits] == approx(plain(store, "zeppelin", 2))
    # More rows wanted than the rare words match: the newest ten rows matching any word
    # fill the room, ranked by all words (c00 scores as c33 does, but is older).
    hits = store.search_memories(ALICE, "kettle zeppelin", limit=5)
    newest = set(list(TEXTS)[-10:])
    ranked = plain(store, "kettle zeppelin", len(TEXTS))
    assert [(h.id, h.score) for h in hits] == approx(
        [item for item in ranked if item[0] in newest][:5])
    assert [h.id for h in hits] == ["r1", "r2", "c33", "c34", "c35"]


def test_filters_that_the_rare_words_cannot_satisfy_fall_back(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_keywords, "MATCH_BUDGET", 10)
    only = SearchFilters(types=("preference",))
    hits = store.search_memories(ALICE, "warm zeppelin", limit=2, filters=only)
    assert {h.id for h in hits} == {"r2", "p"}


def test_a_common_word_ranks_its_newest_rows_unless_the_filters_want_older(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_keywords, "MATCH_BUDGET", 10)
    monkeypatch.setattr(sqlite_keywords, "RECENT_ROWS", 10)
    store = SQLiteStore(f"sqlite:///{tmp_path / 'common.db'}")
    old = Memory("old", "preference", "warm tea", (), T0, T0)
    store.put_memories(ALICE, [old, *(Memory(f"n{i:02d}", "project_context", f"warm kettle {i}",
                                             (), T0, T0) for i in range(20))])
    # Twenty-one rows say "warm", all alike: only the newest ten were ranked.
    assert [h.id for h in store.search_memories(ALICE, "warm", limit=3)] == [
        "n10", "n11", "n12"]
    # None of those is a preference: the older rows are ranked too.
    only = SearchFilters(types=("preference",))
    assert [h.id for h in store.search_memories(ALICE, "warm", limit=1, filters=only)] == [
        "old"]
    store.close()
