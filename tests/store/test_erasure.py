"""Erasure and conditional writes in the store contract, on every backend: what is
erased is gone from every read and search, nothing of anyone else changes, and a write
that expected other content replaces nothing."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

import numpy as np
import pytest

from loci import ConflictError, Document, Memory, Scope, SearchFilters, Store
from loci.models import ApiKey, NewEvent, content_sha256
from loci.store import NewCompaction, ScopeData

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE, ALICE_CODER = Scope("alice", "helper"), Scope("alice", "coder")
BOB = Scope("bob", "helper")


def fill(store: Store, scope: Scope, word: str) -> None:
    """Events in two sessions, a compaction, a memory with history, state, a document,
    vectors and an API key, all saying ``word``."""
    for session in ("s1", "s2"):
        store.append_events(scope, session, [NewEvent(
            "message", "user", f"{word} said in {session}", T0, tokens=5)])
    store.add_compaction(scope, NewCompaction("s1", "summary", 1, 1, None, f"{word} sum",
                                              10, 2, T0))
    memory = Memory(f"mem_{scope.tenant}_{scope.agent}", "fact", f"{word} likes tea", (), T0, T0)
    store.put_memory(scope, memory)
    store.supersede_memory(scope, Memory(memory.id, "fact", f"{word} likes coffee", (),
                                         T0, T0), "changed", T0)
    store.set_state(scope, f"{word}-key", word, T0)
    store.put_document(scope, Document(f"/notes/{word}.md", f"{word} notes", (), 1, T0, T0))
    store.set_embeddings(scope, "memory", [memory.id], np.ones((1, 4), np.float32))
    store.add_api_key(ApiKey(f"key_{scope.tenant}_{scope.agent}", scope.tenant, "", T0),
                      f"hash-{scope.tenant}-{scope.agent}")


def same(a: ScopeData, b: ScopeData) -> bool:
    rows = [f.name for f in fields(ScopeData) if f.name != "vectors"]
    return all(getattr(a, n) == getattr(b, n) for n in rows) and all(
        ids == b.vectors[kind][0] and np.array_equal(vectors, b.vectors[kind][1])
        for kind, (ids, vectors) in a.vectors.items())


def test_erase_a_session_leaves_the_others(store: Store) -> None:
    fill(store, ALICE, "zebra")
    fill(store, BOB, "zebra")
    assert store.erase_session(ALICE, "s1") == 1
    assert store.list_events(ALICE, "s1") == [] and store.list_compactions(ALICE, "s1") == []
    assert [e.content for e in store.list_events(ALICE, "s2")] == ["zebra said in s2"]
    found = store.search_events(ALICE, "zebra", limit=10, filters=SearchFilters())
    assert [h.text for h in found] == ["zebra said in s2"]
    assert len(store.list_events(BOB, "s1")) == 1 and store.list_compactions(BOB, "s1")
    assert store.erase_session(ALICE, "s1") == 0


def test_erase_a_tenant_erases_every_agent_and_nothing_else(store: Store) -> None:
    fill(store, ALICE, "zebra")
    fill(store, ALICE_CODER, "quokka")
    fill(store, BOB, "zebra")
    bob_before = store.export_scope(BOB)
    assert store.erase_tenant("alice") > 10
    for scope in (ALICE, ALICE_CODER):
        assert store.list_sessions(scope) == [] and store.list_memories(scope) == []
        assert store.list_state(scope) == [] and store.list_documents(scope) == []
        assert store.memory_history(scope, f"mem_alice_{scope.agent}") == []
        assert store.search_memories(scope, "zebra", limit=5, filters=SearchFilters()) == []
    assert store.list_api_keys("alice") == [] and store.find_api_key("hash-alice-helper") is None
    assert all(s.tenant != "alice" for s in store.list_scopes())
    assert same(store.export_scope(BOB), bob_before)
    assert store.find_api_key("hash-bob-helper") is not None
    # The erased tenant may come back as a new one.
    fill(store, Scope("alice", "again"), "ibis")
    assert [h.text for h in store.search_memories(
        Scope("alice", "again"), "ibis", limit=5, filters=SearchFilters())] == ["ibis likes coffee"]


def test_a_conditional_write_never_replaces_a_newer_version(store: Store) -> None:
    """``expected``: the content hash the writer read ("" for no document)."""
    first = Document("/notes/a.md", "one", (), 1, T0, T0)
    assert store.put_documents(ALICE, [first], {"/notes/a.md": ""})[0].version == 1
    with pytest.raises(ConflictError, match="changed since it was read"):
        store.put_documents(ALICE, [first], {"/notes/a.md": ""})  # it exists now
    seen = content_sha256("one")
    second = Document("/notes/a.md", "two", (), 1, T0, T0)
    assert store.put_documents(ALICE, [second], {"/notes/a.md": seen})[0].version == 2
    stale = Document("/notes/a.md", "three", (), 1, T0, T0)
    with pytest.raises(ConflictError):
        store.put_documents(ALICE, [stale, Document("/notes/b.md", "b", (), 1, T0, T0)],
                            {"/notes/a.md": seen})
    assert store.get_document(ALICE, "/notes/a.md").content == "two"  # type: ignore[union-attr]
    assert store.get_document(ALICE, "/notes/b.md") is None  # all or nothing
    with pytest.raises(ConflictError, match="no longer exists"):
        store.put_documents(ALICE, [Document("/notes/c.md", "c", (), 1, T0, T0)],
                            {"/notes/c.md": seen})


def test_a_redacted_version_keeps_its_place_and_loses_its_text(store: Store) -> None:
    alice = Scope("alice", "helper")
    for n, text in enumerate(("the vault code is 4711", "no code here", "still none"), 1):
        store.put_document(alice, Document("/notes.md", text, ("secret",), n, T0, T0))
    assert store.redact_document_version(alice, "/notes.md", 1, {"redacted_at": "now"})
    first, second = store.document_history(alice, "/notes.md")
    assert (first.version, first.content, first.tags, first.metadata) == (
        1, "", (), {"redacted_at": "now"})
    assert (second.version, second.content, second.tags) == (2, "no code here", ("secret",))
    current = store.get_document(alice, "/notes.md")
    assert current is not None and current.content == "still none"
    assert not store.redact_document_version(alice, "/notes.md", 9, {})
    assert not store.redact_document_version(Scope("bob", "helper"), "/notes.md", 2, {})
    assert store.document_history(alice, "/notes.md")[1].content == "no code here"


def test_redacting_events_replaces_their_metadata_only(store: Store) -> None:
    events = store.append_events(ALICE, "s", [
        NewEvent("message", "assistant", "Noted.", T0, metadata={"raw": "Noted. [x]"}),
        NewEvent("message", "assistant", "Fine.", T0, metadata={"raw": "Fine. [y]"})])
    assert store.redact_events(ALICE, "s", {events[0].id: {"model": "m"}}) == 1
    assert store.redact_events(BOB, "s", {events[1].id: {}}) == 0  # another tenant's
    first, second = store.list_events(ALICE, "s")
    assert (first.content, first.metadata) == ("Noted.", {"model": "m"})
    assert second.metadata == {"raw": "Fine. [y]"}
