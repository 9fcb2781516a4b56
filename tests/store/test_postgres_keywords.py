"""PostgreSQL keyword ranking: BM25 over postings kept by triggers (postgres_keywords).

The postings must follow every write (insert, upsert, supersede, delete, purge, event
updates), the per-scope statistics must equal what is stored, ranking must weigh rare
words above common ones, and cutting the candidate lists must not change the results
of a store small enough to rank exhaustively.
"""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from loci import Memory, Scope, SearchFilters
from loci.models import NewEvent
from loci.store import indexed_vectors
from loci.store.postgres import PostgresStore
from loci.store.postgres import keywords as postgres_keywords

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE, BOB = Scope("alice", "helper"), Scope("bob", "helper")


def mem(mid: str, content: str, kind: str = "project_context", **kw: object) -> Memory:
    return Memory(id=mid, type=kind, content=content, tags=(), created_at=T0,
                  updated_at=T0, **kw)  # type: ignore[arg-type]


def stats(url: str, kind: str, scope: Scope) -> tuple[int, int]:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT COALESCE(sum(docs), 0), COALESCE(sum(tokens), 0) FROM fts_stats "
            "WHERE kind = %s AND tenant = %s AND agent = %s",
            (kind, scope.tenant, scope.agent)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def truth(url: str, table: str, scope: Scope) -> tuple[int, int]:
    """Rows and tokens (tsvector positions) as stored, counted the slow way."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*), COALESCE(sum((SELECT COALESCE(sum(cardinality(u.positions)), 0) "
            f"FROM unnest(fts) u)), 0) FROM {table} WHERE tenant = %s AND agent = %s",
            (scope.tenant, scope.agent)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_rare_words_outrank_common_ones(pg: PostgresStore) -> None:
    pg.put_memories(ALICE, [mem(f"c{i}", f"the kettle is warm note {i}") for i in range(30)]
                    + [mem("rare", "the zeppelin note")])
    hits = pg.search_memories(ALICE, "kettle zeppelin", limit=5)
    assert hits[0].id == "rare"
    assert all(0 < h.score < 1 for h in hits)
    # ts_rank (no IDF) scored one kettle match like the one zeppelin match.
    assert hits[0].score > hits[1].score


def test_scores_are_fts5_bm25(pg: PostgresStore) -> None:
    pg.put_memories(ALICE, [mem("a", "apple banana"), mem("b", "banana cherry date"),
                            mem("c", "cherry")])
    (hit,) = pg.search_memories(ALICE, "apple", limit=5)
    n, avgdl, dl, tf = 3, 6 / 3, 2, 1.0
    idf = math.log((n - 1 + 0.5) / (1 + 0.5))
    relevance = idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))
    assert hit.score == pytest.approx(relevance / (1 + relevance), rel=1e-5)


def test_postings_and_statistics_follow_every_write(pg: PostgresStore, pg_url: str) -> None:
    pg.put_memories(ALICE, [mem("m1", "walrus tusk"), mem("m2", "otter whisker long")])
    pg.put_memories(BOB, [mem("b1", "walrus elsewhere")])
    pg.put_memories(ALICE, [mem("m1", "penguin flipper")])  # upsert changes the text
    assert [h.id for h in pg.search_memories(ALICE, "penguin", limit=5)] == ["m1"]
    assert pg.search_memories(ALICE, "walrus", limit=5) == []  # old words are gone
    assert [h.id for h in pg.search_memories(BOB, "walrus", limit=5)] == ["b1"]
    pg.supersede_memory(ALICE, mem("m2", "otter paw"), "update", T0)
    assert pg.search_memories(ALICE, "whisker", limit=5) == []
    assert [h.id for h in pg.search_memories(ALICE, "paw", limit=5)] == ["m2"]
    pg.put_memories(ALICE, [mem("old", "expired puffin", expires_at=T0)])
    assert pg.purge_expired(ALICE, T0 + timedelta(days=1)) == 1
    assert pg.search_memories(ALICE, "puffin", limit=5) == []
    assert pg.delete_memory(ALICE, "m2")
    assert pg.search_memories(ALICE, "paw", limit=5) == []
    events = pg.append_events(ALICE, "s", [
        NewEvent(type="message", role="user", content=f"narwhal horn {i}", timestamp=T0,
                 tokens=2) for i in range(3)])
    pg.set_archived(ALICE, "s", [events[0].id])  # no text change: postings stay
    hits = pg.search_events(ALICE, "narwhal", limit=5,
                            filters=SearchFilters(include_archived=True))
    assert len(hits) == 3
    for kind, table, scope in [("memory", "memories", ALICE), ("memory", "memories", BOB),
                               ("event", "events", ALICE)]:
        assert stats(pg_url, kind, scope) == truth(pg_url, table, scope)
    with psycopg.connect(pg_url) as conn:
        orphans = conn.execute("SELECT count(*) FROM memories_terms t WHERE NOT EXISTS "
                               "(SELECT 1 FROM memories m WHERE m.seq = t.key)").fetchone()
    assert orphans == (0,)


def test_searches_of_one_query_share_statistics_until_this_process_writes(
    pg: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexed_vectors, "FRESH_FOR", 60.0)  # (no race with the clock)
    pg.put_memories(ALICE, [mem("a", "apple banana"), mem("b", "banana cherry", "decision"),
                            *(mem(f"f{i}", f"filler line {i}") for i in range(8))])
    (first, _) = pg.search_memories(ALICE, "banana", limit=5)
    other = PostgresStore(pg_url)  # another process, as far as statistics go
    try:
        other.put_memory(ALICE, mem("c", "banana split"))
        # The same words under a filter: the first search's statistics serve.
        narrowed = pg.search_memories(ALICE, "banana", limit=5,
                                      filters=SearchFilters(types=("project_context",)))
        assert {h.id: h.score for h in narrowed}[first.id] == first.score
        pg.put_memory(ALICE, mem("d", "banana bread"))  # this process wrote: read again
        mine = {h.id: h.score for h in pg.search_memories(ALICE, "banana", limit=5)}
        theirs = {h.id: h.score for h in other.search_memories(ALICE, "banana", limit=5)}
        assert mine == theirs and mine[first.id] != first.score
    finally:
        other.close()


def test_statistics_fold_without_changing(
    pg: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_keywords, "FOLD_AT", 3)
    for i in range(8):
        pg.put_memories(ALICE, [mem(f"m{i}", f"heron {i} wading")])
    before = stats(pg_url, "memory", ALICE)
    pg.search_memories(ALICE, "heron", limit=3)  # folds the 8 rows into one
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT count(*) FROM fts_stats WHERE kind = 'memory' "
                            "AND tenant = 'alice'").fetchone()
    assert rows == (1,)
    assert stats(pg_url, "memory", ALICE) == before == truth(pg_url, "memories", ALICE)


def test_concurrent_writers_keep_statistics_exact(pg: PostgresStore, pg_url: str) -> None:
    def write(worker: int) -> None:
        for batch in range(10):
            pg.put_memories(ALICE, [mem("shared", f"w{worker} b{batch} gull"),
                                    mem(f"own-{worker}-{batch}", "tern tern")])
            pg.search_memories(ALICE, "gull tern", limit=3)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stats(pg_url, "memory", ALICE) == truth(pg_url, "memories", ALICE) == (61, 123)


def test_cut_candidate_lists_find_what_exhaustive_ranking_finds(
    pg: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    memories = [mem(f"m{i:02d}", " ".join(["owl"] * (1 + i % 3)) + f" barn {i}"
                    + (" moth" if i % 15 == 0 else "")) for i in range(60)]
    memories += [mem("fresh", "owl moth barn", kind="preference")]
    pg.put_memories(ALICE, memories)
    exact = [h.id for h in pg.search_memories(ALICE, "owl moth barn", limit=8)]
    monkeypatch.setattr(postgres_keywords, "DEPTH", 5)
    monkeypatch.setattr(postgres_keywords, "REFINE_MIN", 10)
    assert [h.id for h in pg.search_memories(ALICE, "owl moth barn", limit=8)] == exact
    # A filter the cut lists cannot satisfy: every posting of the words is scored (as
    # if the filter left many rows: few are scored alone, before that).
    monkeypatch.setattr(postgres_keywords, "FEW_ROWS", 0)
    only = SearchFilters(types=("preference",))
    assert [h.id for h in pg.search_memories(ALICE, "owl barn", limit=3,
                                             filters=only)] == ["fresh"]


def test_common_words_past_the_count_cap_get_estimated_df(
    pg: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg.put_memories(ALICE, [mem(f"m{i:03d}", f"lark {'finch' if i % 4 == 0 else 'wren'}")
                            for i in range(200)])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ANALYZE memories_terms")
        conn.execute("ANALYZE memories")
    monkeypatch.setattr(postgres_keywords, "DF_CAP", 10)
    estimated = pg._estimate_df("memory", ["lark", "finch", "absent"], 200)
    assert estimated["lark"] == pytest.approx(200, rel=0.05)
    assert estimated["finch"] == pytest.approx(50, rel=0.1)
    assert "absent" not in estimated  # not in the statistics: keeps the cap
    # Ranking with estimated df: finch (rarer) still outweighs lark.
    hits = pg.search_memories(ALICE, "lark finch", limit=3)
    assert [h.text for h in hits] == ["lark finch"] * 3, hits


def test_estimated_df_reads_the_planner_statistics_once_in_a_while(
    pg: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg.put_memories(ALICE, [mem(f"m{i:03d}", f"lark {'finch' if i % 4 == 0 else 'wren'}")
                            for i in range(200)])

    def analyze() -> None:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ANALYZE memories_terms")
            conn.execute("ANALYZE memories")

    analyze()
    monkeypatch.setattr(postgres_keywords, "DF_CAP", 10)
    first = pg._estimate_df("memory", ["finch"], 200)
    # Another process makes finch twice as common and analyzes: a common word's share
    # is trusted for a while, then read again.
    pg.put_memories(ALICE, [mem(f"n{i:03d}", "finch") for i in range(200)])
    analyze()
    assert pg._estimate_df("memory", ["finch"], 200) == first
    monkeypatch.setattr(postgres_keywords, "ESTIMATES_FRESH_FOR", 0.0)
    assert pg._estimate_df("memory", ["finch"], 200)["finch"] > first["finch"] * 1.5
