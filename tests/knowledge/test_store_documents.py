"""The store's document contract (versions, history, batches), run on every backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from loci import Document, Scope, SearchFilters, Store

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Scope("alice", "helper")
BOB = Scope("bob", "helper")


def doc(path: str, content: str, minutes: int = 0, tags: tuple[str, ...] = (),
        **metadata: object) -> Document:
    at = T0 + timedelta(minutes=minutes)
    return Document(path, content, tags, 1, at, at, dict(metadata))


def test_new_content_makes_a_version_and_keeps_the_old(store: Store) -> None:
    first = store.put_document(ALICE, doc("/p/a.md", "one", tags=("x",)))
    assert first.version == 1
    second = store.put_document(ALICE, doc("/p/a.md", "two", 5, tags=("x", "y")))
    assert second.version == 2 and second.created_at == T0
    third = store.put_document(ALICE, doc("/p/a.md", "two", 9, tags=("y",)))  # tags only
    assert third.version == 3
    latest = store.get_document(ALICE, "/p/a.md")
    assert latest is not None
    assert (latest.content, latest.tags, latest.version) == ("two", ("y",), 3)
    assert latest.created_at == T0 and latest.updated_at == T0 + timedelta(minutes=9)
    history = store.document_history(ALICE, "/p/a.md")
    assert [(v.version, v.content, v.tags) for v in history] == [
        (1, "one", ("x",)), (2, "two", ("x", "y"))]
    assert history[0].superseded_at == T0 + timedelta(minutes=5)
    # Keyword search sees only the latest text.
    assert store.search_documents(ALICE, "one") == []
    assert [h.id for h in store.search_documents(ALICE, "two")] == ["/p/a.md"]


def test_writing_the_same_document_changes_nothing(store: Store) -> None:
    store.put_document(ALICE, doc("/p/a.md", "same", tags=("t",), title="A"))
    again = store.put_document(ALICE, doc("/p/a.md", "same", 30, tags=("t",), title="A"))
    assert again.version == 1 and again.updated_at == T0
    assert store.document_history(ALICE, "/p/a.md") == []
    changed = store.put_document(ALICE, doc("/p/a.md", "same", 31, tags=("t",), title="B"))
    assert changed.version == 2  # metadata is part of a version


def test_batch_is_all_or_nothing(store: Store) -> None:
    store.put_document(ALICE, doc("/p/keep.md", "kept"))
    bad = Document("/p/bad.md", None, (), 1, T0, T0)  # type: ignore[arg-type]
    with pytest.raises(Exception):  # noqa: B017 - any backend error; the point is the rollback
        store.put_documents(ALICE, [doc("/p/keep.md", "changed"), doc("/p/new.md", "n"), bad])
    assert [d.path for d in store.list_documents(ALICE, "/p/")] == ["/p/keep.md"]
    kept = store.get_document(ALICE, "/p/keep.md")
    assert kept is not None and kept.content == "kept" and kept.version == 1
    assert store.document_history(ALICE, "/p/keep.md") == []
    stored = store.put_documents(ALICE, [doc("/p/keep.md", "changed"), doc("/p/new.md", "n")])
    assert [(d.path, d.version) for d in stored] == [("/p/keep.md", 2), ("/p/new.md", 1)]


def test_delete_removes_history_and_a_new_document_starts_over(store: Store) -> None:
    store.put_document(ALICE, doc("/p/a.md", "one"))
    store.put_document(ALICE, doc("/p/a.md", "two", 1))
    assert store.delete_document(ALICE, "/p/a.md")
    assert store.document_history(ALICE, "/p/a.md") == []
    fresh = store.put_document(ALICE, doc("/p/a.md", "three", 2))
    assert fresh.version == 1 and store.document_history(ALICE, "/p/a.md") == []


def test_documents_and_history_are_isolated(store: Store) -> None:
    store.put_document(ALICE, doc("/profile/identity.md", "alice v1"))
    store.put_document(ALICE, doc("/profile/identity.md", "alice v2", 1))
    store.put_document(BOB, doc("/profile/identity.md", "bob v1"))
    assert store.document_history(BOB, "/profile/identity.md") == []
    assert len(store.document_history(ALICE, "/profile/identity.md")) == 1
    bob = store.get_document(BOB, "/profile/identity.md")
    assert bob is not None and (bob.content, bob.version) == ("bob v1", 1)
    assert store.search_documents(BOB, "alice") == []
    assert not store.delete_document(BOB, "/nope.md")
    assert store.delete_document(BOB, "/profile/identity.md")
    assert len(store.document_history(ALICE, "/profile/identity.md")) == 1
    hits = store.search_documents(ALICE, "alice", filters=SearchFilters(path_prefix="/profile/"))
    assert [h.id for h in hits] == ["/profile/identity.md"]
