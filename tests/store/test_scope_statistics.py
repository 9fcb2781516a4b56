"""Keyword scores come from the caller's own scope on every backend: another tenant's
writes, edits and erasure never move them (one tenant could otherwise learn whether
anyone's data holds a word), and a scope built by edits scores as one written fresh."""

from __future__ import annotations

from datetime import UTC, datetime

from loci import Document, Memory, Scope
from loci.models import NewEvent
from loci.store import Store, open_store

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE, BOB = Scope("alice", "helper"), Scope("bob", "helper")
QUERIES = ("kettle zeppelin", "warm airship kettle", "kettle")


def fill(store: Store, scope: Scope, words: str, count: int) -> None:
    store.put_memories(scope, [Memory(f"{scope.tenant}{i}", "project_context",
                                      f"{words} {i}", (), T0, T0) for i in range(count)])
    for i in range(count):
        store.put_document(scope, Document(f"/{i}.md", f"{words} notes {i}", (), 1, T0, T0))
    store.append_events(scope, "s", [NewEvent("message", "user", f"{words} turn {i}", T0)
                                     for i in range(count)])


def scores(store: Store, scope: Scope) -> list[list[tuple[str, float]]]:
    found = []
    for query in QUERIES:
        found.append([(h.id, h.score) for h in store.search_memories(scope, query)])
        found.append([(h.id, h.score) for h in store.search_documents(scope, query)])
        found.append([(h.id, h.score) for h in store.search_events(scope, query)])
    return found


def test_another_tenants_writes_and_erasure_never_move_a_score(store: Store) -> None:
    fill(store, BOB, "kettle zeppelin", 3)
    fill(store, BOB, "warm kettle", 1)
    before = scores(store, BOB)
    assert all(before[:3]), "every kind finds Bob's rows"
    fill(store, ALICE, "kettle zeppelin airship warm kettle", 30)
    store.put_memory(ALICE, Memory("alice0", "project_context", "kettle only", (), T0, T0))
    assert store.delete_memory(ALICE, "alice1")
    assert store.delete_document(ALICE, "/2.md")
    assert scores(store, BOB) == before
    store.erase_tenant("alice")
    assert scores(store, BOB) == before


def test_a_scope_built_by_edits_scores_as_one_written_fresh(
    store: Store, store_url: str
) -> None:
    fill(store, ALICE, "kettle zeppelin", 4)
    store.put_memory(ALICE, Memory("alice0", "project_context", "warm airship", (), T0, T0))
    store.put_memory(ALICE, Memory("alice2", "project_context", "kettle kettle warm", (),
                                   T0, T0))
    assert store.delete_memory(ALICE, "alice3")
    store.put_document(ALICE, Document("/1.md", "airship kettle log", (), 2, T0, T0))
    assert store.delete_document(ALICE, "/3.md")
    edited = scores(store, ALICE)

    fresh_url = store_url.replace("contract.db", "fresh.db")
    fresh = open_store(fresh_url) if fresh_url != store_url else None
    if fresh is None:  # PostgreSQL: the same database, written fresh under another tenant
        fresh, scope = store, Scope("fresh", "helper")
    else:
        scope = ALICE
    try:
        fresh.put_memories(scope, [
            Memory(f"{scope.tenant}-0", "project_context", "warm airship", (), T0, T0),
            Memory(f"{scope.tenant}-1", "project_context", "kettle zeppelin 1", (), T0, T0),
            Memory(f"{scope.tenant}-2", "project_context", "kettle kettle warm", (), T0, T0)])
        for path, text in (("/0.md", "kettle zeppelin notes 0"), ("/1.md", "airship kettle log"),
                           ("/2.md", "kettle zeppelin notes 2")):
            fresh.put_document(scope, Document(path, text, (), 1, T0, T0))
        fresh.append_events(scope, "s", [NewEvent("message", "user", f"kettle zeppelin turn {i}",
                                                  T0) for i in range(4)])
        assert [[s for _, s in hits] for hits in scores(fresh, scope)] == [
            [s for _, s in hits] for hits in edited]
    finally:
        if fresh is not store:
            fresh.close()
