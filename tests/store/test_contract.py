"""The store contract, run against every backend (see the ``store_url`` fixture)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from loci import Document, Memory, Scope, SearchFilters, Store, open_store
from loci.models import NewEvent
from loci.store import NewCompaction

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Scope("alice", "helper")
BOB = Scope("bob", "helper")
ALICE_OTHER_AGENT = Scope("alice", "coder")


def ev(content: str, role: str = "user", minutes: int = 0, **kw: object) -> NewEvent:
    return NewEvent(type=str(kw.pop("type", "message")), role=role, content=content,
                    timestamp=T0 + timedelta(minutes=minutes), tokens=len(content) // 4 + 3,
                    **kw)  # type: ignore[arg-type]


def mem(mid: str, content: str, type: str = "project_context", days: int | None = 30,
        tags: tuple[str, ...] = ()) -> Memory:
    return Memory(id=mid, type=type, content=content, tags=tags, created_at=T0,
                  updated_at=T0, expires_at=None if days is None else T0 + timedelta(days=days))


def test_append_and_list_in_order(store: Store) -> None:
    added = store.append_events(ALICE, "s1", [ev("one"), ev("two", "assistant", 1)])
    more = store.append_events(ALICE, "s1", [ev("three", minutes=2)])
    assert [e.id for e in added] == sorted(e.id for e in added)
    assert more[0].id > added[-1].id
    listed = store.list_events(ALICE, "s1")
    assert [e.content for e in listed] == ["one", "two", "three"]
    assert listed[0] == added[0]
    assert [e.content for e in store.list_events(ALICE, "s1", after_id=added[0].id)] == [
        "two", "three"]
    assert [e.content for e in store.tail_events(ALICE, "s1", 2)] == ["two", "three"]
    before_last = store.tail_events(ALICE, "s1", 1, before_id=listed[2].id)
    assert [e.content for e in before_last] == ["two"]
    assert store.tail_events(ALICE, "s1", 5, before_id=listed[0].id) == []


def test_events_keep_tool_fields_and_metadata(store: Store) -> None:
    store.append_events(ALICE, "s", [
        ev("", "assistant", type="tool_call", tool_name="read", tool_call_id="tc1",
           args={"path": "/x", "n": [1, 2]}),
        ev("body", "tool", type="tool_result", tool_call_id="tc1",
           metadata={"dia_id": "D1:3"}),
    ])
    call, result = store.list_events(ALICE, "s")
    assert (call.tool_name, call.tool_call_id) == ("read", "tc1")
    assert call.args == {"path": "/x", "n": [1, 2]}
    assert result.metadata == {"dia_id": "D1:3"} and result.timestamp == T0


def test_append_is_all_or_nothing(store: Store) -> None:
    bad = NewEvent(type="message", role="user", content=None, timestamp=T0)  # type: ignore[arg-type]
    with pytest.raises(Exception):  # noqa: B017 - any backend error; the point is the rollback
        store.append_events(ALICE, "s", [ev("fine"), bad])
    assert store.list_events(ALICE, "s") == []
    assert store.session_info(ALICE, "s") is None


def test_archive_never_deletes(store: Store) -> None:
    events = store.append_events(ALICE, "s", [ev("a"), ev("b"), ev("c")])
    assert store.set_archived(ALICE, "s", [events[0].id, events[1].id]) == 2
    assert store.set_archived(ALICE, "s", [events[0].id]) == 0
    assert [e.archived for e in store.list_events(ALICE, "s")] == [True, True, False]
    assert [e.content for e in store.list_events(ALICE, "s", include_archived=False)] == ["c"]
    assert store.search_events(ALICE, "a b")  # archived events stay searchable
    hits = store.search_events(ALICE, "b", filters=SearchFilters(include_archived=False))
    # "c" may match through its context (the turns before it); "b" itself may not.
    assert str(events[1].id) not in {h.id for h in hits}


def test_session_info_is_derived_from_the_log(store: Store) -> None:
    events = store.append_events(ALICE, "s", [
        ev("hello", minutes=0), ev("", "assistant", 1, type="tool_call", tool_name="t"),
        ev("hi", "assistant", 5)])
    store.set_archived(ALICE, "s", [events[0].id])
    info = store.session_info(ALICE, "s")
    assert info is not None
    assert (info.event_count, info.message_count) == (3, 2)
    assert info.token_count == sum(e.tokens for e in events)
    assert info.active_token_count == info.token_count - events[0].tokens
    assert (info.created_at, info.updated_at) == (T0, T0 + timedelta(minutes=5))
    store.append_events(ALICE, "t", [ev("x")])
    assert [s.id for s in store.list_sessions(ALICE)] == ["t", "s"]


@pytest.mark.parametrize(
    "query", ['"foo AND (', "NEAR(", "*", "foo:bar", "a OR b NOT c", "'; DROP TABLE events; --",
              "^start", "col:val*", '"unterminated', "(((", "-", "foo - bar"],
)
def test_hostile_queries_search_for_the_text(store: Store, query: str) -> None:
    store.append_events(ALICE, "s", [ev("foo and bar near start of the col val"), ev("other")])
    store.put_memory(ALICE, mem("m1", "foo near the bar"))
    store.search_events(ALICE, query)
    store.search_memories(ALICE, query)
    store.search_documents(ALICE, query)
    assert len(store.list_events(ALICE, "s")) == 2


def test_keyword_search_ranks_and_scores_in_unit_interval(store: Store) -> None:
    store.append_events(ALICE, "s", [
        ev("the tide station 9414290 failed with KeyError"),
        ev("we like surfing in Lisbon"),
        ev("station maintenance happened yesterday"),
    ])
    hits = store.search_events(ALICE, "Why did station 9414290 fail?")
    assert hits[0].text.startswith("the tide station")
    assert all(0 <= h.score <= 1 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # A query of stop words only still searches for those words.
    # (Later turns may match through their context, below the turn itself.)
    assert store.search_events(ALICE, "the of")[0].text == (
        "the tide station 9414290 failed with KeyError")
    assert store.search_events(ALICE, "") == []


def test_the_sessions_someone_speaks_in(store: Store) -> None:
    for session, name in [("s1", "Ana"), ("s2", "Bo"), ("s3", "Ana"), ("s4", None)]:
        store.append_events(ALICE, session, [ev("hi", metadata={"name": name} if name else {}),
                                             ev("yes", "assistant", metadata={"name": "Bo"})])
    store.append_events(BOB, "b1", [ev("hi", metadata={"name": "Ana"})])
    store.append_events(ALICE, "s5", [ev("odd", metadata={"name": ["Ana"]})])
    store.append_events(ALICE, "s3", [ev("more", metadata={"name": "Ana"})])
    # Where they speak most first, with how often.
    assert store.speaker_sessions(ALICE, ["Ana"], 10) == [("s3", 2), ("s1", 1)]
    assert store.speaker_sessions(ALICE, ["Ana", "Cy", "Ana"], 10) == [("s3", 2), ("s1", 1)]
    assert store.speaker_sessions(ALICE, ["Bo"], 10) == [
        ("s2", 2), ("s1", 1), ("s3", 1), ("s4", 1)]
    assert store.speaker_sessions(ALICE, ["Bo", "Ana"], 2) == [("s3", 3), ("s1", 2)]
    assert store.speaker_sessions(ALICE, ["ana"], 10) == []  # as written
    assert store.speaker_sessions(BOB, ["Bo"], 10) == []
    assert store.speaker_sessions(ALICE, [], 10) == []
    # Who of some names speaks at all (one look each: the names a question writes).
    assert store.speakers_among(ALICE, ["Ana", "Bo", "Cy", "ana", "Ana"]) == {"Ana", "Bo"}
    assert store.speakers_among(BOB, ["Bo", "Ana"]) == {"Ana"}
    assert store.speakers_among(ALICE, ["x'); DROP TABLE events; --", ""]) == set()
    assert store.speakers_among(ALICE, []) == set()


def test_search_filters_by_session_and_time(store: Store) -> None:
    store.append_events(ALICE, "s1", [ev("apple pie", minutes=0)])
    store.append_events(ALICE, "s2", [ev("apple tart", minutes=60)])
    assert {h.session for h in store.search_events(ALICE, "apple")} == {"s1", "s2"}
    only = store.search_events(ALICE, "apple", filters=SearchFilters(session="s2"))
    assert [h.session for h in only] == ["s2"]
    late = store.search_events(ALICE, "apple",
                               filters=SearchFilters(since=T0 + timedelta(minutes=30)))
    assert [h.text for h in late] == ["apple tart"]
    store.append_events(ALICE, "s3", [ev("apple crumble", minutes=90)])
    some = SearchFilters(sessions=("s1", "s3"))
    assert {h.session for h in store.search_events(ALICE, "apple", filters=some)} == {
        "s1", "s3"}


def test_a_period_filter_holds_when_its_events_were_written_out_of_order(
    store: Store,
) -> None:
    """A period's events need not have neighbouring ids (history imported late): the
    search reads them all and nothing outside the period."""
    store.append_events(ALICE, "s1", [ev("apple in march", minutes=0),
                                      ev("apple in may", minutes=600)])
    store.append_events(ALICE, "old", [ev("apple in april", minutes=300),
                                       ev("apple before all", minutes=-100)])
    store.append_events(ALICE, "s1", [ev("apple in march again", minutes=1)])
    window = SearchFilters(since=T0, until=T0 + timedelta(minutes=300))
    hits = store.search_events(ALICE, "apple", filters=window)
    assert sorted(h.text for h in hits) == ["apple in april", "apple in march",
                                            "apple in march again"]
    assert store.search_events(ALICE, "apple", filters=SearchFilters(
        since=T0 + timedelta(minutes=700))) == []
    session = store.search_events(ALICE, "apple", filters=SearchFilters(session="s1"))
    assert sorted(h.text for h in session) == ["apple in march", "apple in march again",
                                               "apple in may"]


def test_memories_crud_and_expiry(store: Store) -> None:
    store.put_memory(ALICE, mem("m1", "User's name is John", "sticky", None))
    store.put_memory(ALICE, mem("m2", "Prefers Python", "user_preference", 90, ("lang",)))
    store.put_memory(ALICE, mem("m3", "Working on arvis", days=1))
    assert store.get_memory(ALICE, "m2") == mem("m2", "Prefers Python", "user_preference", 90,
                                                 ("lang",))
    later = T0 + timedelta(days=2)
    assert {m.id for m in store.list_memories(ALICE)} == {"m1", "m2", "m3"}
    assert {m.id for m in store.list_memories(ALICE, now=later)} == {"m1", "m2"}
    assert [m.id for m in store.list_memories(ALICE, now=later, expired_only=True)] == ["m3"]
    assert [m.id for m in store.list_memories(ALICE, types=["sticky"])] == ["m1"]
    assert [h.id for h in store.search_memories(
        ALICE, "arvis", filters=SearchFilters(now=later))] == []
    tagged = store.search_memories(ALICE, "python", filters=SearchFilters(tags=("lang",)))
    assert [h.id for h in tagged] == ["m2"]
    store.put_memory(ALICE, mem("m2", "Prefers Rust", "user_preference"))
    assert store.get_memory(ALICE, "m2").content == "Prefers Rust"  # type: ignore[union-attr]
    assert [h.id for h in store.search_memories(ALICE, "rust")] == ["m2"]
    assert store.search_memories(ALICE, "python") == []
    assert store.delete_memory(ALICE, "m2") and not store.delete_memory(ALICE, "m2")


def test_state_is_overwritten_in_place(store: Store) -> None:
    store.set_state(ALICE, "price", "$142", T0)
    store.set_state(ALICE, "price", "$150", T0 + timedelta(hours=1))
    item = store.get_state(ALICE, "price")
    assert item is not None and item.value == "$150"
    assert item.updated_at == T0 + timedelta(hours=1)
    assert [i.key for i in store.list_state(ALICE)] == ["price"]
    assert store.delete_state(ALICE, "price") and store.get_state(ALICE, "price") is None


def test_documents_by_path_prefix(store: Store) -> None:
    for path in ("/profile/identity.md", "/profile/people/rui.md", "/projects/x.md",
                 "/profile"):  # a document named like the folder is not in it
        store.put_document(ALICE, Document(path, f"content of {path}", ("t",), 1, T0, T0))
    assert [d.path for d in store.list_documents(ALICE, "/profile/")] == [
        "/profile/identity.md", "/profile/people/rui.md"]
    hits = store.search_documents(ALICE, "content", filters=SearchFilters(path_prefix="/projects/"))
    assert [h.id for h in hits] == ["/projects/x.md"]
    wanted = ["/projects/x.md", "/nowhere.md", "/profile/identity.md", "/projects/x.md"]
    assert [d.path for d in store.get_documents(ALICE, wanted)] == [
        "/projects/x.md", "/profile/identity.md"]
    assert store.get_documents(ALICE, []) == []
    assert store.delete_document(ALICE, "/projects/x.md")
    assert store.get_document(ALICE, "/projects/x.md") is None


def test_compactions_are_recorded(store: Store) -> None:
    new = NewCompaction("s", "summary", 1, 9, 10, "sum", 900, 80, T0)
    record = store.add_compaction(ALICE, new)
    assert store.list_compactions(ALICE, "s") == [record]
    assert store.list_compactions(BOB, "s") == []
    assert (store.count_compactions(ALICE, "s"), store.count_compactions(BOB, "s")) == (1, 0)


def test_tenants_and_agents_never_see_each_other(store: Store) -> None:
    store.append_events(ALICE, "s", [ev("secret plan")])
    store.put_memory(ALICE, mem("m_alice", "secret memory"))
    store.set_state(ALICE, "k", "v", T0)
    store.put_document(ALICE, Document("/profile/identity.md", "secret doc", (), 1, T0, T0))
    for other in (BOB, ALICE_OTHER_AGENT):
        assert store.list_events(other, "s") == [] and store.session_info(other, "s") is None
        assert store.list_sessions(other) == []
        assert store.search_events(other, "secret") == []
        assert store.get_memory(other, "m_alice") is None
        assert store.list_memories(other) == [] and store.search_memories(other, "secret") == []
        assert not store.delete_memory(other, "m_alice")
        assert store.get_state(other, "k") is None and not store.delete_state(other, "k")
        assert store.get_document(other, "/profile/identity.md") is None
        assert store.get_documents(other, ["/profile/identity.md"]) == []
        assert store.search_documents(other, "secret") == []
        assert not store.delete_document(other, "/profile/identity.md")
        assert store.set_archived(other, "s", [1]) == 0
    with pytest.raises(Exception, match="taken"):
        store.put_memory(BOB, mem("m_alice", "overwrite attempt"))
    assert store.get_memory(ALICE, "m_alice").content == "secret memory"  # type: ignore[union-attr]


def test_data_survives_reopen_and_meta(store_url: str) -> None:
    first = open_store(store_url)
    first.append_events(ALICE, "s", [ev("persisted")])
    first.set_meta("embedding_model", "hash-384")
    first.close()
    second = open_store(store_url)
    assert [e.content for e in second.list_events(ALICE, "s")] == ["persisted"]
    assert second.get_meta("embedding_model") == "hash-384"
    assert second.get_meta("missing") is None
    second.close()


def test_meta_is_claimed_once_by_concurrent_openers(store_url: str) -> None:
    """The store's id: of several connections claiming at once, all read the first's."""
    from concurrent.futures import ThreadPoolExecutor

    stores = [open_store(store_url) for _ in range(4)]
    try:
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda n: stores[n].claim_meta("store_id", f"id-{n}"),
                                range(4)))
        assert len(set(got)) == 1 and got[0] in {f"id-{n}" for n in range(4)}
        assert stores[0].claim_meta("store_id", "later") == got[0]
        assert stores[1].get_meta("store_id") == got[0]
    finally:
        for s in stores:
            s.close()


def test_put_memories_in_bulk_with_vectors(store: Store) -> None:
    import numpy as np

    batch = [mem(f"b{i}", f"bulk fact number {i}") for i in range(1200)]
    # Distinct vectors: PostgreSQL's HNSW graph (which the planner uses once the table
    # has statistics) cannot tell 1,000 identical ones apart.
    vectors = np.random.default_rng(3).standard_normal((1200, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.put_memories(ALICE, batch, vectors)
    assert len(store.list_memories(ALICE)) == 1200
    assert store.unembedded("memory", 10, ALICE) == []
    hits = store.vector_search(ALICE, "memory", vectors[3], limit=1, filters=SearchFilters())
    assert hits[0].id == "b3" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert store.vector_search(BOB, "memory", vectors[3], limit=1, filters=SearchFilters()) == []
    with pytest.raises(Exception, match="taken"):
        store.put_memories(BOB, [mem("fresh", "x"), mem("b7", "stolen")])
    assert store.get_memory(BOB, "fresh") is None  # the whole batch was refused


def test_changed_content_needs_a_new_vector(store: Store) -> None:
    import numpy as np

    store.put_memories(ALICE, [mem("m", "first text")], np.ones((1, 4), dtype=np.float32) / 2)
    store.put_memory(ALICE, mem("m", "first text", tags=("same-content",)))
    assert store.unembedded("memory", 10) == []
    store.put_memory(ALICE, mem("m", "second text"))
    assert store.unembedded("memory", 10) == [(ALICE, "m", "second text")]


def test_candidates_are_read_as_hits_only_in_their_scope(store: Store) -> None:
    import numpy as np

    vectors = np.eye(3, 4, dtype=np.float32)
    store.put_memories(ALICE, [mem("a", "tides at dawn"), mem("b", "tides and moon tides"),
                               mem("c", "old tides", days=1)], vectors)
    store.put_memory(BOB, mem("z", "tides for bob"))
    found = store.keyword_candidates(ALICE, "memory", "tides", limit=10,
                                     filters=SearchFilters())
    as_hits = store.hits(ALICE, "memory", found)
    searched = store.search_memories(ALICE, "tides", limit=10)
    assert [(h.id, h.score) for h in as_hits] == [(h.id, h.score) for h in searched]
    assert len(as_hits) == 3 and as_hits[0].text == searched[0].text
    # Read in the order given, with the scores given; never another scope's rows.
    again = store.hits(ALICE, "memory", [(key, 0.5) for key, _ in reversed(found)])
    assert [h.id for h in again] == [h.id for h in reversed(as_hits)]
    assert {h.score for h in again} == {0.5}
    assert store.hits(BOB, "memory", found) == []
    assert store.hits(ALICE_OTHER_AGENT, "memory", found) == []
    # Filters apply to candidates; rows deleted since are left out when read.
    for now, expected in ((T0, ["c"]), (T0 + timedelta(days=2), [])):
        near = store.vector_candidates(ALICE, "memory", vectors[2], limit=3,
                                       filters=SearchFilters(now=now))
        assert [h.id for h in store.hits(ALICE, "memory", near)] == expected
    assert store.delete_memory(ALICE, "a")
    assert [h.id for h in store.hits(ALICE, "memory", found)] == [
        h.id for h in as_hits if h.id != "a"]


def test_filtered_vector_candidates_are_the_best_that_pass(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether the filters leave few rows (ordered alone) or many (the index's path,
    forced here by a lower ``EXACT_ALLOWED``), the candidates are the best rows that
    pass them; an expired one is left out."""
    import numpy as np

    from loci.store.postgres import vectors as postgres_vectors
    from loci.store.sqlite import vectors as sqlite_vectors

    rng = np.random.default_rng(8)
    vectors = rng.normal(size=(300, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    tags = [("rare",) if i % 60 == 0 else ("common",) if i % 2 else () for i in range(300)]
    store.put_memories(ALICE, [mem(f"v{i}", f"vector memory {i}", days=1 if i == 60 else 30,
                                   tags=tags[i]) for i in range(300)], vectors)
    query = vectors[60]  # the expired rare one is the query's own row
    later = SearchFilters(now=T0 + timedelta(days=2))

    def best(tag: str, limit: int) -> list[str]:
        scores = vectors @ query
        keep = [i for i in range(300) if tag in tags[i] and i != 60 and scores[i] > 0]
        return [f"v{i}" for i in sorted(keep, key=lambda i: -scores[i])[:limit]]

    for forced in (False, True):
        if forced:
            for module in (sqlite_vectors, postgres_vectors):
                monkeypatch.setattr(module, "EXACT_ALLOWED", 100)
        for tag, limit in (("rare", 3), ("common", 5)):
            found = store.vector_candidates(ALICE, "memory", query, limit=limit,
                                            filters=replace(later, tags=(tag,)))
            assert [h.id for h in store.hits(ALICE, "memory", found)] == best(tag, limit)
    fresh = store.vector_candidates(ALICE, "memory", query, limit=1,
                                    filters=SearchFilters(tags=("rare",), now=T0))
    assert [h.id for h in store.hits(ALICE, "memory", fresh)] == ["v60"]


def test_a_filter_that_left_many_rows_finds_the_few_left_later(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Filters found to leave many rows are not counted again for a while (the index's
    path serves them): once most of their rows are gone, the few left are still the
    best that pass, and the next filter is counted as before."""
    import numpy as np

    from loci.store.postgres import vectors as postgres_vectors
    from loci.store.sqlite import vectors as sqlite_vectors

    for module in (sqlite_vectors, postgres_vectors):
        monkeypatch.setattr(module, "EXACT_ALLOWED", 20)
    rng = np.random.default_rng(4)
    vectors = rng.normal(size=(80, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.put_memories(ALICE, [mem(f"v{i}", f"memory {i}", tags=("t",) if i < 40 else ())
                               for i in range(80)], vectors)
    query = vectors[79]

    def found(tag: str) -> list[str]:
        near = store.vector_candidates(ALICE, "memory", query, limit=5,
                                       filters=SearchFilters(tags=(tag,)))
        return [h.id for h in store.hits(ALICE, "memory", near)]

    def best(kept: range) -> list[str]:
        ranked = sorted((i for i in kept if vectors[i] @ query > 0),
                        key=lambda i: -(vectors[i] @ query))
        return [f"v{i}" for i in ranked[:5]]

    assert found("t") == best(range(40))
    for i in range(3, 40):
        store.delete_memory(ALICE, f"v{i}")
    assert found("t") == best(range(3))
    assert found("absent") == []


def test_a_write_of_this_process_is_seen_by_the_next_narrowed_search(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Searches moments apart share what they read of the rows a filter leaves (and the
    keyword statistics); a write of this process in between is seen all the same."""
    import numpy as np

    from loci.store import indexed_vectors

    monkeypatch.setattr(indexed_vectors, "FRESH_FOR", 60.0)  # (no race with the clock)
    vectors = np.eye(4, dtype=np.float32)
    store.put_memories(ALICE, [mem("a", "tide pools", tags=("t",)), mem("b", "tide maps"),
                               mem("c", "other words")], vectors[:3])
    tagged = SearchFilters(tags=("t",))

    def found() -> tuple[set[str], set[str]]:
        near = store.vector_candidates(ALICE, "memory", vectors[3], limit=5, filters=tagged)
        words = store.keyword_candidates(ALICE, "memory", "tide", limit=5, filters=tagged)
        return ({h.id for h in store.hits(ALICE, "memory", near)},
                {h.id for h in store.hits(ALICE, "memory", words)})

    assert found() == (set(), {"a"})  # (a's cosine with the query is 0: not a candidate)
    store.put_memories(ALICE, [mem("d", "tide tables", tags=("t",))], vectors[3:])
    assert found() == ({"d"}, {"a", "d"})


def test_indexes_past_the_memory_budget_are_dropped_least_recently_searched_first(
        store_url: str) -> None:
    """Three scopes of 600 KB of vectors each under a 1 MB budget: searching one drops
    the one searched before it from memory; searched again, it is read back whole."""
    import numpy as np

    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(600, 256)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    scopes = [Scope("t", f"agent{i}") for i in range(3)]
    store = open_store(store_url, vector_memory_mb=1)
    try:
        for scope in scopes:
            store.put_memories(scope, [mem(f"{scope.agent}-m{i}", f"memory {i}")
                                       for i in range(600)], vectors)

        def nearest(scope: Scope) -> list[str]:
            near = store.vector_candidates(scope, "memory", vectors[42], limit=3,
                                           filters=SearchFilters())
            return [h.id.split("-")[1] for h in store.hits(scope, "memory", near)]

        def held() -> list[str]:
            return [agent for _, _, agent in store._indexes]  # type: ignore[attr-defined]

        assert nearest(scopes[0])[0] == "m42" and held() == ["agent0"]
        assert nearest(scopes[1])[0] == "m42" and held() == ["agent1"]
        assert nearest(scopes[0]) == nearest(scopes[2]) and held() == ["agent2"]
    finally:
        store.close()


def test_a_read_asked_for_side_by_side_is_made_once(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A retrieval's keyword and vector halves ask the same of the store at once (the
    rows a filter leaves): the second waits for the first's answer."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from loci.store import indexed_vectors

    monkeypatch.setattr(indexed_vectors, "FRESH_FOR", 60.0)
    reads: list[int] = []
    inside, release = threading.Event(), threading.Event()

    def read() -> list[int]:
        reads.append(1)
        inside.set()
        release.wait(10)
        return [1, 2, 3]

    recently = store._recently  # type: ignore[attr-defined]
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(recently, "key", read)
        assert inside.wait(10)
        second = pool.submit(recently, "key", read)
        release.set()
        assert first.result(10) == second.result(10) == [1, 2, 3]
    assert reads == [1]


def test_vector_scores_are_the_cosines_of_the_scopes_given_items(store: Store) -> None:
    import numpy as np

    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(40, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[5] = 0.0  # "nothing to embed"
    store.put_memories(ALICE, [mem(f"m{i}", f"memory {i}") for i in range(40)], vectors)
    store.put_memories(BOB, [mem("b", "bob's")], vectors[:1])
    query = vectors[7]
    found = store.keyword_candidates(ALICE, "memory", "memory", limit=40,
                                     filters=SearchFilters())
    keys = {h.id: key for h, (key, _) in zip(store.hits(ALICE, "memory", found), found,
                                              strict=True)}
    bob = store.keyword_candidates(BOB, "memory", "bob's", limit=1, filters=SearchFilters())
    wanted = [keys[f"m{i}"] for i in (3, 5, 7, 30)] + [bob[0][0]]
    scored = store.vector_scores(ALICE, "memory", query, wanted)
    # Best first, clipped to [0, 1]; never another scope's row.
    expected = {f"m{i}": min(1.0, max(0.0, float(vectors[i] @ query))) for i in (3, 7, 30)}
    got = {h.id: h.score for h in store.hits(ALICE, "memory", scored)}
    assert got.keys() - {"m5"} == expected.keys()
    assert got.get("m5", 0.0) == 0.0
    for mid, cosine in expected.items():
        assert got[mid] == pytest.approx(cosine, abs=1e-5)
    assert [score for _, score in scored] == sorted((s for _, s in scored), reverse=True)
    assert store.vector_scores(ALICE, "memory", query, []) == []
    # Events are keyed by their ids.
    events = store.append_events(ALICE, "s", [ev("first"), ev("second", minutes=1)])
    store.set_embeddings(ALICE, "event", [str(e.id) for e in events], vectors[:2])
    event_scores = dict(store.vector_scores(ALICE, "event", query, [e.id for e in events]))
    assert event_scores == pytest.approx(
        {e.id: max(0.0, float(vectors[i] @ query)) for i, e in enumerate(events)}, abs=1e-5)


def test_api_keys_bind_a_hash_to_one_tenant(store: Store) -> None:
    from loci.models import ApiKey

    store.add_api_key(ApiKey("k1", "alice", "laptop", T0), "hash-1")
    store.add_api_key(ApiKey("k2", "bob", "", T0 + timedelta(seconds=1)), "hash-2")
    found = store.find_api_key("hash-1")
    assert found is not None and (found.id, found.tenant, found.label) == ("k1", "alice", "laptop")
    assert store.find_api_key("hash-3") is None
    assert [k.id for k in store.list_api_keys()] == ["k1", "k2"]
    assert [k.id for k in store.list_api_keys("bob")] == ["k2"]
    assert store.revoke_api_key("k1") is True
    assert store.revoke_api_key("k1") is False
    assert store.find_api_key("hash-1") is None
    assert [k.revoked for k in store.list_api_keys()] == [True, False]
