"""``loci migrate``: a store copied SQLite → PostgreSQL → SQLite is the same store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from loci import Document, Memory, Scope, SearchFilters, Store, open_store
from loci.cli.app import main
from loci.models import ApiKey, NewEvent, NewUsage, Usage
from loci.store import NewCompaction, ScopeData
from loci.store.base import CompactionPlan
from tests.pg import PgTemplate

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE, BOB = Scope("alice", "helper"), Scope("bob", "coder")


def ev(content: str, minutes: int, **kw: object) -> NewEvent:
    return NewEvent(type=str(kw.pop("type", "message")), role=str(kw.pop("role", "user")),
                    content=content, timestamp=T0 + timedelta(minutes=minutes, microseconds=7),
                    tokens=len(content) + 1, **kw)  # type: ignore[arg-type]


def fill(store: Store) -> None:
    """A bit of everything a store holds, for two scopes."""
    for scope in (ALICE, BOB):
        events = store.append_events(scope, "s1", [
            ev("hello there", 0, metadata={"name": "Ann", "dia_id": "D1:1"}),
            ev("", 1, type="tool_call", role="assistant", tool_name="read",
               tool_call_id="t1", args={"path": "/x", "n": [1, 2.5]}),
            ev("a long tool output " * 20, 2, type="tool_result", role="tool",
               tool_call_id="t1"),
            ev("Zoë likes ☕", 3, role="assistant"),
        ])
        store.append_events(scope, "s2", [
            ev("other session", 9),
            ev("", 10, type="tool_call", role="assistant", tool_name="ls", tool_call_id="t2",
               args={}),  # a call without arguments: {} is not absent
        ])
        plan = CompactionPlan(
            compaction=NewCompaction("s1", "full", events[0].id, events[2].id, None,
                                     "summary text", 300, 40, T0 + timedelta(hours=1)),
            masks={events[2].id: ("[masked output]", 4)},
            artifacts=(Document("/artifacts/t1.md", "the output", ("artifact",), 1, T0, T0),),
            archive_ids=(events[0].id, events[1].id),
            summary=ev("summary of the start", 10, type="summary", role="system"),
        )
        store.apply_compaction(scope, "s1", plan)
        prefix = scope.tenant
        store.put_memories(scope, [
            Memory(f"{prefix}-m1", "sticky", "Name is Ann", ("name", "me"), T0, T0),
            Memory(f"{prefix}-m2", "project_context", "Works on loci", (), T0, T0,
                   T0 + timedelta(days=30), "event:1", {"why": ["x"]}),
        ])
        store.supersede_memory(scope, Memory(f"{prefix}-m2", "project_context",
                                             "Works on loci v2", ("v2",), T0,
                                             T0 + timedelta(days=1)), "refresh",
                               T0 + timedelta(days=1))
        store.set_state(scope, "focus:s1", "ship it", T0)
        store.add_usage(scope, NewUsage("s1", "gpt-4o", "chat", Usage(3000, 2048, 0, 40), T0,
                                        812.5, 2900, {"history": 2000}, "abc", 120))
        store.put_document(scope, Document("/kb/a.b/x.md", "one", ("t",), 1, T0, T0, {"k": 1}))
        store.put_document(scope, Document("/kb/a.b/x.md", "two", ("t",), 1, T0,
                                           T0 + timedelta(minutes=5)))
        _embed_everything(store, scope)
    store.add_api_key(ApiKey("k1", "alice", "laptop", T0), "hash-1")
    store.add_api_key(ApiKey("k2", "bob", "", T0 + timedelta(seconds=1)), "hash-2")
    store.revoke_api_key("k2")
    store.set_meta("embedding_model", "hash-8")
    store.set_meta("embedding_dim", "8")


def _embed_everything(store: Store, scope: Scope) -> None:
    rng = np.random.default_rng(7)
    for kind in ("event", "memory", "document"):
        pending = store.unembedded(kind, 100, scope)
        vectors = rng.normal(size=(len(pending), 8)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        if kind == "event":
            vectors[0] = 0  # "nothing to embed" survives the copy too
        store.set_embeddings(scope, kind, [p[1] for p in pending], vectors)


def snapshot(store: Store) -> tuple[object, ...]:
    """Everything observable, vectors as sorted (id, rounded vector) pairs."""
    scopes = [_comparable(store.export_scope(s)) for s in store.list_scopes()]
    return (scopes, store.list_meta(), store.export_api_keys())


def _comparable(data: ScopeData) -> tuple[object, ...]:
    vectors = {
        kind: sorted((i, tuple(np.round(v, 6))) for i, v in zip(ids, vecs, strict=True))
        for kind, (ids, vecs) in data.vectors.items()
    }
    return (data.scope, data.events, data.memories, data.memory_versions, data.state,
            data.documents, data.document_versions, data.compactions, data.usage, vectors)


def test_sqlite_to_postgres_to_sqlite_is_lossless(
    tmp_path: Path, pg_template: PgTemplate, capsys: pytest.CaptureFixture[str]
) -> None:
    first, last = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    pg_url = pg_template.fresh()
    try:
        original = open_store(first)
        fill(original)
        expected = snapshot(original)
        original.close()
        assert main(["migrate", "--from", first, "--to", pg_url]) == 0
        assert "2 scopes" in capsys.readouterr().out
        assert main(["migrate", "--from", pg_url, "--to", last]) == 0
        middle, copy = open_store(pg_url), open_store(last)
        try:
            assert snapshot(middle) == expected
            assert snapshot(copy) == expected
            assert len(expected[0]) == 2  # type: ignore[arg-type]
            for store in (middle, copy):  # the copies search like the original
                query = store.export_scope(ALICE).vectors["memory"][1][0]
                hits = store.vector_search(ALICE, "memory", query, limit=1,
                                           filters=SearchFilters())
                assert hits[0].score == pytest.approx(1.0, abs=1e-5)
                assert store.search_events(ALICE, "Zoë ☕")[0].text == "Zoë likes ☕"
                # Ids continue after the copied ones.
                new = store.append_events(ALICE, "s1", [ev("after the copy", 20)])[0]
                assert new.id > max(e.id for e in store.list_events(BOB, "s1"))
                call = store.add_usage(ALICE, NewUsage("s1", "m", "chat", Usage(), T0))
                assert call.id > max(r.id for r in store.list_usage("bob"))
                assert call.log_events == 5 and call.last_event == new.id
        finally:
            middle.close()
            copy.close()
    finally:
        pg_template.drop(pg_url)


def test_migrate_refuses_a_target_that_is_not_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    for url in (source, target):
        store = open_store(url)
        store.set_state(ALICE, "k", url, T0)
        store.close()
    assert main(["migrate", "--from", source, "--to", target]) == 2
    assert "not empty" in capsys.readouterr().err
    store = open_store(target)
    assert [i.value for i in store.list_state(ALICE)] == [target]
    store.close()
