"""Hybrid retrieval through the facade: filters, scoping, hostile input, model changes."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from loci import (
    EmbeddingMismatchError,
    Loci,
    SearchFilters,
    SearchHit,
    ValidationError,
    load_settings,
)
from loci.search.relevance import COVERAGE_WEIGHT
from tests.conftest import FakeClock, open_loci

#: Each test that takes ``loci`` runs on Loci and on AsyncLoci (``tests/conftest.py``).
BOTH_APIS = True


def test_vectors_find_what_keywords_miss(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, embedding_provider="local") as loci:
        loci.remember("The user adopted a kitten named Miso last spring", type="sticky")
        loci.remember("Quarterly revenue grew by four percent", type="project_context")
        results = loci.memory_search("does the user have any pets?", limit=2)
        assert results[0].summary.startswith("The user adopted a kitten")
        assert all(0 < r.relevance <= results[0].relevance <= 1 for r in results)


def test_keyword_only_when_embeddings_are_off(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, embedding_provider="none") as loci:
        loci.remember("Lisbon is where the user lives")
        assert [r.summary for r in loci.memory_search("lisbon")] == [
            "Lisbon is where the user lives"]
        assert loci.memory_search("pets") == []
        with pytest.raises(ValidationError):
            loci.reindex()


def test_filters(loci: Loci, clock: FakeClock) -> None:
    old = loci.remember("coffee order: flat white", type="user_preference", tags=["drinks"])
    clock.advance(days=2)
    new = loci.remember("coffee beans from Ethiopia", type="project_context", tags=["shop"])
    ids = lambda **kw: {r.id for r in loci.memory_search("coffee", 10, SearchFilters(**kw))}  # noqa: E731
    assert ids() == {old.id, new.id}
    assert ids(types=("user_preference",)) == {old.id}
    assert ids(tags=("shop",)) == {new.id}
    assert ids(since=clock.now - timedelta(days=1)) == {new.id}
    assert ids(until=clock.now - timedelta(days=1)) == {old.id}


def test_conversation_search_by_session_and_archived(loci: Loci) -> None:
    first = loci.add("a", "user", "the deploy failed on friday")
    loci.add("b", "user", "the deploy worked on monday")
    assert {h.session for h in loci.search_conversation("deploy")} == {"a", "b"}
    assert {h.session for h in loci.search_conversation("deploy", session="b")} == {"b"}
    loci.store.set_archived(loci.scope, "a", [first.id])
    assert first.id in {int(h.id) for h in loci.search_conversation("deploy failed")}


def test_tenants_never_see_each_others_hits(loci: Loci) -> None:
    bob = loci.for_scope(user="bob")
    other_agent = loci.for_scope(agent="other")
    loci.remember("alice's secret project codename is Bluebird", type="sticky")
    loci.add("s", "user", "alice's secret project codename is Bluebird")
    bob.remember("bob likes trains")
    for view in (bob, other_agent):
        assert all("Bluebird" not in r.summary for r in view.memory_search("secret codename"))
        assert view.search_conversation("secret codename Bluebird") == []


@pytest.mark.parametrize("query", ['"foo AND (', "NEAR(", "*", "   ", "🙂", "x" * 20_000,
                                   "'; DROP TABLE memories; --"])
def test_hostile_queries(loci: Loci, query: str) -> None:
    loci.remember("foo and bar near the start")
    loci.memory_search(query)
    loci.search_conversation(query)
    assert len(loci.memories()) == 1


def test_empty_store(loci: Loci) -> None:
    assert loci.memory_search("anything") == []
    assert loci.search_conversation("anything") == []


def test_model_change_is_a_clear_error_until_reindex(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, embedding_provider="hash", memory_extraction=False) as loci:
        loci.remember("the user lives in Lisbon")
        loci.add("s", "user", "I moved to Lisbon")
    with open_loci(home, clock, embedding_provider="local") as loci:
        loci.remember("written while the model differs: stored, embedded later")
        with pytest.raises(EmbeddingMismatchError, match="loci reindex"):
            loci.memory_search("where does the user live")
        seen: list[tuple[int, int]] = []
        assert loci.reindex(lambda done, total: seen.append((done, total))) == 3
        assert seen[-1] == (3, 3)
        top = loci.memory_search("where does the user live", limit=1)
        assert top[0].summary == "the user lives in Lisbon"
        assert loci.search_conversation("moved")[0].text == "I moved to Lisbon"


def test_a_reindex_counts_every_row_while_the_worker_is_asked_to_embed(
        home: Path, clock: FakeClock) -> None:
    """The background worker, poked while a reindex runs, waits for it: the two never
    embed the same rows, and the reindex reports every row it re-embedded."""
    with open_loci(home, clock, embedding_provider="hash", memory_extraction=False) as loci:
        for n in range(5):
            loci.remember(f"fact number {n} about the user")
        assert loci.wait_indexed(10)
        poked = threading.Event()

        def progress(done: int, total: int) -> None:
            if not poked.is_set():
                poked.set()
                loci.runtime.indexer.recover()  # a search or a write would do this
                loci.runtime.indexer.worker.wait(0.5)  # time for a pass to run, if it may

        assert loci.reindex(progress) == 5
        assert loci.wait_indexed(10)
        assert len(loci.memory_search("fact about the user", limit=10)) == 5


def test_a_search_while_the_model_is_being_recorded_is_no_mismatch(
        home: Path, clock: FakeClock) -> None:
    """The worker records the store's model in two writes; a search that runs between
    them must see an unindexed store, not a model without its dimension."""
    with open_loci(home, clock, embedding_provider="hash", memory_extraction=False) as loci:
        indexer = loci.runtime.indexer
        store, seen = indexer.store, []
        real_set_meta = store.set_meta

        def set_meta_then_search(key: str, value: str) -> None:
            real_set_meta(key, value)
            indexer._recorded = None  # as if this search's cache had just run out
            seen.append(indexer.matches(fresh=False))

        store.set_meta = set_meta_then_search  # type: ignore[method-assign]
        loci.remember("the user lives in Lisbon")
        assert loci.wait_indexed(10)
        assert seen and all(seen)


def test_memory_tools_round_trip(loci: Loci) -> None:
    written = loci.memory_write("user_preference", ["ui"], "User prefers dark mode " * 100)
    found = loci.memory_search("dark mode")
    assert found[0].id == written.id and found[0].type == "user_preference"
    assert found[0].summary.endswith("…") and len(found[0].summary) <= 200
    first = loci.memory_read(written.id, offset=0, limit=500)
    assert first.content.startswith(f"---\nid: {written.id}\ntype: user_preference\n")
    rest = loci.memory_read(written.id, offset=first.next_offset or 0, limit=100_000)
    assert rest.next_offset is None
    assert (first.content + rest.content).count("User prefers dark mode") == 100
    updated = loci.memory_write("sticky", ["ui"], "User prefers light mode", id=written.id)
    assert updated.id == written.id and updated.created_at == written.created_at
    assert loci.memory(written.id).content == "User prefers light mode"
    assert loci.memory_search("light mode")[0].id == written.id
    with pytest.raises(ValidationError):
        loci.memory_read(written.id, offset=-1)


def test_vector_search_widens_past_a_restrictive_filter(loci: Loci) -> None:
    # 60 decoys of one type outrank the 3 facts of the filtered type on the vector side:
    # the first, narrow candidate list holds none of them, so the store must widen.
    for i in range(60):
        loci.remember(f"garden note {i}: water the tomato plants", dedupe=False)
    wanted = [loci.remember(f"tomato fact {i}", type="user_preference", dedupe=False)
              for i in range(3)]
    filters = SearchFilters(types=("user_preference",))
    indexer = loci.indexer
    assert indexer is not None
    hits = loci.store.vector_search(
        loci.scope, "memory", indexer.embed_query("water the tomato plants"),
        limit=3, filters=replace(filters, now=loci.clock()))
    assert {h.id for h in hits} == {m.id for m in wanted}


def test_a_search_sets_the_indexer_on_a_backlog(home: Path, clock: FakeClock) -> None:
    from datetime import UTC, datetime

    from loci import Memory
    from loci.indexing import BATCH

    with open_loci(home, clock, embedding_provider="hash", memory_mirror=False) as loci:
        loci.remember("recorded the model")  # the store is indexed with hash vectors
        loci.wait_indexed()
        now = datetime(2026, 1, 1, tzinfo=UTC)
        # Stored without vectors, as when a process died before its indexer ran.
        for i in range(BATCH + 40):
            loci.store.put_memory(loci.scope, Memory(f"b{i}", "fact", f"backlog {i}", (),
                                                     now, now, None))
        assert loci.store.count_unembedded("memory") == BATCH + 40
        assert loci.memory_search("backlog 7", limit=1)[0].id == "b7"  # keywords find it
        assert loci.indexer is not None
        loci.indexer.worker.wait()  # the search asked the worker to look
        assert loci.store.count_unembedded("memory") == 0


@pytest.mark.parametrize("store", ["file", "memory"])
def test_a_search_under_the_stores_own_lock_finishes(home: Path, store: str) -> None:
    """The server runs a search inline while it holds the store's lock; on a file store
    the keyword half runs on another thread meanwhile, which must not need that lock."""
    url = f"sqlite:///{home / 'lock.db'}" if store == "file" else "sqlite:///:memory:"
    loci = Loci(load_settings(store=url, embedding_provider="hash"))
    loci.remember("The kettle whistles when the water boils")
    loci.wait_indexed()
    found: list[str] = []
    lock = loci.runtime.local_lock()
    assert lock is not None

    def search() -> None:
        with lock:
            found.extend(r.summary for r in loci.memory_search("kettle water", limit=1))

    caller = threading.Thread(target=search)
    caller.start()
    caller.join(timeout=30)
    assert not caller.is_alive() and found == ["The kettle whistles when the water boils"]
    loci.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("loci-keywords")]


def test_an_item_found_by_keywords_alone_is_fused_with_its_own_cosine(
        home: Path, clock: FakeClock) -> None:
    """Forty items nearer the query by vector fill the vector pool (30 for one hit);
    the one item with the query's word is found by keywords alone, and its vector part
    is its own cosine, not the (higher) lowest cosine of that pool."""
    import numpy as np

    from loci import Memory

    with open_loci(home, clock, embedding_provider="hash", memory_mirror=False) as loci:
        assert loci.indexer is not None
        query = loci.indexer.embed_query("zebra")
        other = np.roll(query, 1) - (np.roll(query, 1) @ query) * query
        other /= np.linalg.norm(other)
        memories = [Memory(f"f{i}", "fact", f"filler {i}", (), clock.now, clock.now, None)
                    for i in range(40)]
        memories.append(Memory("target", "fact", "a zebra", (), clock.now, clock.now, None))
        near = [(0.6 - i / 1000) * query + np.sqrt(1 - (0.6 - i / 1000) ** 2) * other
                for i in range(40)]
        vectors = np.stack([*near, 0.3 * query + np.sqrt(1 - 0.09) * other])
        loci.store.put_memories(loci.scope, memories, vectors.astype(np.float32))
        [found] = loci.memory_search("zebra", limit=1)
        config = loci.settings.search
        total = config.vector_weight + config.keyword_weight
        # The best keyword match (its keyword part is 1), with its own cosine of 0.3,
        # holding the whole question (``search.relevance``).
        fused = (config.vector_weight * 0.3 + config.keyword_weight) / total
        assert found.id == "target" and found.relevance == pytest.approx(
            (1 - COVERAGE_WEIGHT) * fused + COVERAGE_WEIGHT, abs=1e-3)


def test_a_conversation_search_reads_each_row_once(home: Path, clock: FakeClock) -> None:
    """The rows read to find the people a query names are kept for the final hits."""
    with open_loci(home, clock, embedding_provider="hash") as loci:
        for day in ("monday", "tuesday", "friday"):
            loci.add("s", "user", f"the deploy failed on {day}", name="Ana")
            loci.add("s", "assistant", f"we rolled the deploy back on {day}", name="Bo")
        loci.wait_indexed()
        read: list[str] = []
        hits = loci.store.hits

        def counted(*args: Any, **kwargs: Any) -> list[SearchHit]:
            found = hits(*args, **kwargs)
            read.extend(hit.id for hit in found)
            return found

        loci.store.hits = counted  # type: ignore[method-assign]
        found = loci.search_conversation("when did the deploy fail?", limit=6)
        assert len(found) == 6 and sorted(read) == sorted({hit.id for hit in found})
        assert [h.score for h in found] == sorted((h.score for h in found), reverse=True)
