"""What only the PostgreSQL backend has to prove: several processes writing one database,
NUL characters, ltree paths, vectors numbered in commit order, migrations and connection
errors."""

from __future__ import annotations

import multiprocessing
import time
import zlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
import pytest

from loci import Document, Memory, Scope, SearchFilters
from loci.errors import StoreError, ValidationError
from loci.models import NewEvent
from loci.store.indexed_vectors import FRESH_FOR
from loci.store.postgres import PostgresStore
from loci.store.postgres import schema as postgres_schema
from loci.store.postgres.rows import path_label, path_to_ltree

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Scope("alice", "helper")
WRITERS, BATCHES = 4, 15


def ev(content: str, minutes: int = 0) -> NewEvent:
    return NewEvent(type="message", role="user", content=content,
                    timestamp=T0 + timedelta(minutes=minutes), tokens=3)


def mem(mid: str, content: str) -> Memory:
    return Memory(id=mid, type="project_context", content=content, tags=(), created_at=T0,
                  updated_at=T0)


def _writer(url: str, worker: int) -> None:
    """One process: batches of two events into one shared session, an upsert of a
    shared memory id and of its own, and a supersede of one shared memory."""
    store = PostgresStore(url, pool_size=2)
    try:
        for batch in range(BATCHES):
            store.append_events(ALICE, "shared", [ev(f"w{worker} b{batch} first"),
                                                  ev(f"w{worker} b{batch} second")])
            store.put_memories(ALICE, [mem("shared", f"from w{worker} b{batch}"),
                                       mem(f"own-{worker}-{batch}", "mine")])
            store.supersede_memory(ALICE, mem("contested", f"w{worker} b{batch}"),
                                   "update", T0)
    finally:
        store.close()


def test_processes_writing_one_database_lose_and_duplicate_nothing(
    pg: PostgresStore, pg_url: str
) -> None:
    pg.put_memory(ALICE, mem("contested", "original"))
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=_writer, args=(pg_url, w)) for w in range(WRITERS)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
    assert [p.exitcode for p in workers] == [0] * WRITERS

    events = pg.list_events(ALICE, "shared")
    assert len(events) == WRITERS * BATCHES * 2
    assert len({e.id for e in events}) == len(events)
    # Batches never interleave within a session: "second" directly follows its "first".
    for first, second in zip(events[::2], events[1::2], strict=True):
        assert first.content.endswith("first") and second.id == first.id + 1
        assert second.content == first.content.replace("first", "second")
    for w in range(WRITERS):  # each writer's batches in its own order
        mine = [e.content for e in events if e.content.startswith(f"w{w} ")]
        assert mine == [f"w{w} b{b} {half}" for b in range(BATCHES)
                        for half in ("first", "second")]
    # Each turn's search context is made of the two turns committed before it, even when
    # they came from another process a moment earlier.
    with psycopg.connect(pg_url) as conn:
        contexts = [r[0] for r in conn.execute(
            "SELECT search_context FROM events WHERE session = 'shared' ORDER BY id")]
    expected = [None, *(" / ".join(e.content for e in events[max(0, i - 2):i])
                        for i in range(1, len(events)))]
    assert contexts == expected

    memories = pg.list_memories(ALICE)
    ids = [m.id for m in memories]
    assert len(ids) == len(set(ids)) == 2 + WRITERS * BATCHES
    versions = pg.memory_history(ALICE, "contested")
    assert [v.version for v in versions] == list(range(1, WRITERS * BATCHES + 1))
    assert versions[0].content == "original"


def test_threads_share_the_pool(pg: PostgresStore) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def write(i: int) -> int:
        return pg.append_events(ALICE, f"s{i % 3}", [ev(f"thread {i}")])[0].id

    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(write, range(60)))
    assert len(set(ids)) == 60
    assert sum(len(pg.list_events(ALICE, f"s{i}")) for i in range(3)) == 60


def test_nul_characters_are_refused_and_nothing_is_written(pg: PostgresStore) -> None:
    with pytest.raises(ValidationError, match="NUL"):
        pg.append_events(ALICE, "s", [ev("fine"), ev("bad\x00text")])
    with pytest.raises(ValidationError, match="NUL"):
        pg.put_memory(ALICE, Memory("m", "t", "ok", (), T0, T0, metadata={"k": "a\x00b"}))
    with pytest.raises(ValidationError, match="NUL"):
        pg.put_document(ALICE, Document("/a.md", "x\x00", (), 1, T0, T0))
    with pytest.raises(ValidationError, match="NUL"):
        pg.set_state(ALICE, "k", "v\x00", T0)
    assert pg.list_events(ALICE, "s") == [] and pg.list_memories(ALICE) == []
    assert pg.list_documents(ALICE) == [] and pg.list_state(ALICE) == []
    assert pg.search_events(ALICE, "bad\x00text") == []  # queries with NUL just search
    with pytest.raises(ValidationError):  # a NUL in a name is bad input, not a crash
        pg.get_memory(Scope("al\x00ice", "helper"), "m")


def test_path_labels_are_one_to_one_and_valid_ltree() -> None:
    segments = ["profile", "identity.md", "a_b", "a-b", "a b", "Ünïcode", "", "x" * 900]
    labels = [path_label(s) for s in segments]
    assert len(set(labels)) == len(labels)
    assert path_label("identity.md") == "identity_2Emd" and path_label("") == "_"
    assert path_to_ltree("/") == "" and path_to_ltree("/a/b.md") == "a.b_2Emd"


def test_ltree_prefixes_find_subtrees_with_odd_names(pg: PostgresStore) -> None:
    paths = ["/people/Zoë Ann/notes.md", "/people/Zoë Ann.md", "/people/zoe/x.md",
             "/a.b/c.md", "/a_b/c.md", "/pro/x.md", "/profile/x.md"]
    for path in paths:
        pg.put_document(ALICE, Document(path, f"text {path}", (), 1, T0, T0))
    assert [d.path for d in pg.list_documents(ALICE, "/people/Zoë Ann/")] == [
        "/people/Zoë Ann/notes.md"]
    assert [d.path for d in pg.list_documents(ALICE, "/a.b/")] == ["/a.b/c.md"]
    assert [d.path for d in pg.list_documents(ALICE, "/pro/")] == ["/pro/x.md"]
    # A prefix that ends mid-segment compares characters, as in SQLite.
    assert [d.path for d in pg.list_documents(ALICE, "/pro")] == ["/pro/x.md", "/profile/x.md"]
    hits = pg.search_documents(ALICE, "text", filters=SearchFilters(path_prefix="/people/"))
    assert {h.id for h in hits} == {p for p in paths if p.startswith("/people/")}


def _unit_vectors(ids: list[str], dim: int = 16) -> np.ndarray:
    """A distinct unit vector for each id, the same in every process."""
    rows = [np.random.default_rng(zlib.crc32(i.encode())).standard_normal(dim)
            for i in ids]
    vectors = np.array(rows, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _vector_writer(url: str, worker: int) -> None:
    """One process: memories with vectors in small batches, as fast as it can."""
    store = PostgresStore(url, pool_size=2)
    try:
        for batch in range(BATCHES):
            ids = [f"v{worker}-{batch}-{j}" for j in range(3)]
            store.put_memories(ALICE, [mem(i, f"fact {i}") for i in ids], _unit_vectors(ids))
    finally:
        store.close()


def test_a_searcher_misses_no_vector_other_processes_wrote_meanwhile(
        pg: PostgresStore, pg_url: str) -> None:
    """A scope's writers number their vectors in commit order: a search that read up
    to some number never skips a row committed later with a lower one."""
    pg.put_memories(ALICE, [mem("first", "fact first")], _unit_vectors(["first"]))
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=_vector_writer, args=(pg_url, w)) for w in range(WRITERS)]
    for p in workers:
        p.start()
    while any(p.is_alive() for p in workers):  # each search reads what was committed
        pg.vector_search(ALICE, "memory", _unit_vectors(["first"])[0], limit=1,
                         filters=SearchFilters())
    assert [p.exitcode for p in workers] == [0] * WRITERS
    time.sleep(FRESH_FOR)  # (other processes' vectors may be seen this much later)
    ids = [f"v{w}-{b}-{j}" for w in range(WRITERS) for b in range(BATCHES) for j in range(3)]
    for memory_id, vector in zip(ids, _unit_vectors(ids), strict=True):
        hits = pg.vector_search(ALICE, "memory", vector, limit=1, filters=SearchFilters())
        assert [h.id for h in hits] == [memory_id]
    with psycopg.connect(pg_url) as conn:
        numbers = conn.execute("SELECT count(*), count(DISTINCT vec_seq) FROM memories "
                               "WHERE vec_seq IS NOT NULL").fetchone()
    assert numbers == (len(ids) + 1, len(ids) + 1)


def test_vectors_of_another_dimension_after_clearing(pg: PostgresStore) -> None:
    vectors = np.eye(3, 8, dtype=np.float32)
    pg.put_memories(ALICE, [mem(f"m{i}", f"fact {i}") for i in range(3)], vectors)
    hits = pg.vector_search(ALICE, "memory", vectors[2], limit=1, filters=SearchFilters())
    assert [h.id for h in hits] == ["m2"]
    pg.clear_embeddings()
    assert len(pg.unembedded("memory", 10)) == 3
    wider = np.eye(3, 16, dtype=np.float32)
    pg.set_embeddings(ALICE, "memory", ["m0", "m1", "m2"], wider)
    hits = pg.vector_search(ALICE, "memory", wider[1], limit=1, filters=SearchFilters())
    assert [h.id for h in hits] == ["m1"]


def test_bulk_load_builds_the_postings_index_once_at_the_end(
        pg: PostgresStore, pg_url: str) -> None:
    def indexes(pattern: str) -> set[str]:
        with psycopg.connect(pg_url) as conn:
            rows = conn.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE %s",
                                (pattern,)).fetchall()
        return {r[0] for r in rows}

    rank = {"events_terms_rank", "memories_terms_rank", "documents_terms_rank"}
    with pg.bulk_load():
        pg.put_memories(ALICE, [mem("a", "bulk loaded fact")], np.ones((1, 4), np.float32) / 2)
        assert indexes("%_rank") == set()
    assert indexes("%_rank") == rank
    assert indexes("%_fts") == set()  # (no GIN since version 9: searches read postings)
    assert [h.id for h in pg.search_memories(ALICE, "bulk")] == ["a"]
    hits = pg.vector_search(ALICE, "memory", np.ones(4, np.float32) / 2, limit=1,
                            filters=SearchFilters())
    assert [h.id for h in hits] == ["a"]


def test_vectors_stored_before_version_8_are_numbered_and_found(
        pg: PostgresStore, pg_url: str) -> None:
    ids = ["a", "b", "c"]
    pg.put_memories(ALICE, [mem(i, f"fact {i}") for i in ids], _unit_vectors(ids))
    with psycopg.connect(pg_url) as conn, conn.cursor() as cur:
        for table in ("events", "memories", "documents"):  # as stored before version 8
            cur.execute(f"ALTER TABLE {table} DROP COLUMN vec_seq")
        cur.execute("CREATE INDEX memories_hnsw_16 ON memories USING hnsw "
                    "((embedding::vector(16)) vector_cosine_ops)")
        postgres_schema._v8_vectors_in_memory(cur)
        conn.commit()
        assert cur.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE "
                           "'%%hnsw%%'").fetchall() == []
    fresh = PostgresStore(pg_url)
    try:
        for memory_id, vector in zip(ids, _unit_vectors(ids), strict=True):
            hits = fresh.vector_search(ALICE, "memory", vector, limit=1,
                                       filters=SearchFilters())
            assert [h.id for h in hits] == [memory_id]
    finally:
        fresh.close()


def test_migrations_are_recorded_once(pg: PostgresStore, pg_url: str) -> None:
    PostgresStore(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT version, name FROM loci_migrations").fetchall()
    assert rows == [(1, "initial schema"), (2, "BM25 postings"),
                    (3, "tool-call arguments searchable"), (4, "usage ledger"),
                    (5, "events by time"), (6, "events by speaker"),
                    (7, "memories by tag"), (8, "vectors searched in memory"),
                    (9, "full-text GIN indexes dropped"),
                    (10, "memory confirmation and supersession")]


def test_memories_stored_before_version_10_read_back(pg: PostgresStore, pg_url: str) -> None:
    before = Memory("mem_old", "user_preference", "I prefer window seats", (), T0, T0,
                    T0 + timedelta(days=90), "event:3", {"k": 1})
    pg.put_memory(ALICE, before)
    with psycopg.connect(pg_url) as conn, conn.cursor() as cur:
        cur.execute("ALTER TABLE memories DROP COLUMN confirmed, DROP COLUMN superseded_by")
        postgres_schema._v10_memory_time(cur)  # as an older store migrates
        conn.commit()
    assert pg.get_memory(ALICE, "mem_old") == before
    later = replace(before, confirmed_at=T0 + timedelta(days=2), superseded_by="mem_new")
    pg.put_memory(ALICE, later)
    assert pg.get_memory(ALICE, "mem_old") == later


def test_tool_calls_stored_before_version_3_become_searchable(
        pg: PostgresStore, pg_url: str) -> None:
    [call] = pg.append_events(ALICE, "s", [NewEvent(
        "tool_call", "assistant", "", T0, tool_name="bash",
        args={"command": "grep -n iter pydicom/valuerep.py"})])
    assert [h.id for h in pg.search_events(ALICE, "valuerep")] == [str(call.id)]
    with psycopg.connect(pg_url) as conn, conn.cursor() as cur:
        cur.execute("UPDATE events SET search_extra = NULL")  # as stored before version 3
        conn.commit()
        assert pg.search_events(ALICE, "valuerep") == []
        postgres_schema._v3_tool_arguments(cur)
        conn.commit()
    assert [h.id for h in pg.search_events(ALICE, "valuerep")] == [str(call.id)]


def test_unreachable_server_is_a_store_error(tmp_path: object) -> None:
    with pytest.raises(StoreError, match="cannot reach PostgreSQL"):
        PostgresStore("postgresql://nobody@/nodb?host=/nonexistent-socket-dir&connect_timeout=2")


def test_a_table_is_analyzed_once_it_grew_by_half(
        pg: PostgresStore, pg_url: str) -> None:
    from loci.store.planner_statistics import MIN_ROWS

    def analyzed_rows(table: str = "events") -> float:
        with psycopg.connect(pg_url) as conn:
            return float(conn.execute(
                "SELECT reltuples FROM pg_class WHERE relname = %s", (table,)).fetchone()[0])

    def all_visible_pages(table: str) -> int:
        with psycopg.connect(pg_url) as conn:
            return int(conn.execute(
                "SELECT relallvisible FROM pg_class WHERE relname = %s", (table,)).fetchone()[0])

    assert analyzed_rows() <= 0  # (never analyzed: -1)
    pg.append_events(ALICE, "s", [ev(f"turn {i}") for i in range(MIN_ROWS - 1)])
    pg._growth.wait()
    assert analyzed_rows() <= 0  # not yet grown enough
    pg.append_events(ALICE, "s", [ev("one more")])
    pg._growth.wait()
    assert analyzed_rows() == MIN_ROWS
    # Its postings too, and both vacuumed: index-only scans of the postings need not
    # read their rows.
    assert analyzed_rows("events_terms") >= MIN_ROWS
    assert all_visible_pages("events_terms") > 0 and all_visible_pages("events") > 0
    # Half as many again before the next analysis.
    pg.append_events(ALICE, "t", [ev(f"later {i}") for i in range(MIN_ROWS // 2)])
    pg._growth.wait()
    assert analyzed_rows() == MIN_ROWS  # 250 < max(500, 250)


def test_a_filter_that_passes_few_candidates_is_ranked_like_its_rows_alone(
        pg: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """One memory in eight is tagged: the best candidates pass too few, and scoring
    every posting of the word gives what scoring just the tagged rows gives (which
    serves filters that leave few rows), in the same order."""
    from loci.store.postgres import keywords

    monkeypatch.setattr(keywords, "FEW_ROWS", 0)  # (as if the filter left many rows)
    pg.put_memories(ALICE, [Memory(f"m{i}", "project_context",
                                   "tides " + " ".join(["filler"] * (i % 17)) + f" n{i}",
                                   ("moon",) if i % 8 == 0 else (), T0, T0)
                            for i in range(400)]
                   + [mem(f"o{i}", f"other words {i}") for i in range(1600)])
    tagged = SearchFilters(tags=("moon",))
    calls: list[bool] = []  # True: every posting was scored, False: the few rows'
    scored = PostgresStore._scored

    def counted(*args: object) -> object:
        calls.append(args[-1] is None)
        return scored(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(PostgresStore, "_scored", counted)
    scored_all = pg.keyword_candidates(ALICE, "memory", "tides", limit=30, filters=tagged)
    assert calls == [True]
    monkeypatch.setattr(keywords, "FEW_ROWS", 2_000)
    among = pg.keyword_candidates(ALICE, "memory", "tides", limit=30, filters=tagged)
    assert calls == [True, False]  # (the 50 tagged rows were scored alone)
    # (Scores may differ in the last digits: the statements add in another order.)
    assert len(among) == 30 and [key for key, _ in scored_all] == [key for key, _ in among]
