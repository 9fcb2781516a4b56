"""Full-text rowids carry their scope (``store.sqlite.keywords``): a keyword search ranks and
counts its own scope's rows only, and migrating an older store rebuilds the indexes
without losing a row."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loci import Document, Memory, Scope
from loci.models import NewEvent
from loci.store.sqlite import SQLiteStore
from loci.store.sqlite import keywords as sqlite_keywords
from loci.store.sqlite import schema as sqlite_schema
from loci.store.sqlite.rows import SCOPE_SHIFT

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE, BOB = Scope("alice", "helper"), Scope("bob", "helper")
pytestmark = pytest.mark.backends("sqlite")


def test_another_tenants_rows_neither_rank_nor_count(
    store: SQLiteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_keywords, "MATCH_BUDGET", 10)
    alices = [Memory("a1", "project_context", "kettle zeppelin", (), T0, T0),
              Memory("a2", "project_context", "warm kettle", (), T0, T0)]
    store.put_memories(BOB, [Memory(f"b{i}", "project_context", f"kettle warm {i}", (),
                                    T0, T0) for i in range(40)])
    store.put_memories(ALICE, alices)
    hits = store.search_memories(ALICE, "kettle zeppelin warm", limit=5)
    # Bob's 40 matches would pass the budget: Alice's 2 rows still rank by all words,
    # scored as in a store of Alice's alone.
    alone = SQLiteStore(f"sqlite:///{tmp_path / 'alone.db'}")
    alone.put_memories(ALICE, alices)
    expected = alone.search_memories(ALICE, "kettle zeppelin warm", limit=5)
    alone.close()
    assert [(h.id, h.score) for h in hits] == [(h.id, h.score) for h in expected]
    assert {h.id for h in hits} == {"a1", "a2"}
    numbers = dict(store._query("SELECT tenant, no FROM scopes"))
    assert numbers["bob"] != numbers["alice"]
    keys = [r[0] for r in store._query("SELECT rowid FROM memories_fts")]
    assert {k >> SCOPE_SHIFT for k in keys} == set(numbers.values())


def test_a_scope_without_rows_finds_nothing(store: SQLiteStore) -> None:
    store.put_memories(BOB, [Memory("b", "project_context", "kettle", (), T0, T0)])
    assert store.search_memories(ALICE, "kettle") == []
    assert store.search_events(ALICE, "kettle") == []


def test_updates_and_deletes_keep_the_index_in_step(store: SQLiteStore) -> None:
    store.put_memory(ALICE, Memory("m", "project_context", "old kettle", (), T0, T0))
    store.put_memory(ALICE, Memory("m", "project_context", "new teapot", (), T0, T0))
    assert [h.id for h in store.search_memories(ALICE, "teapot")] == ["m"]
    assert store.search_memories(ALICE, "kettle") == []
    store.put_document(ALICE, Document("/a.md", "teapot notes", (), 1, T0, T0))
    assert store.delete_memory(ALICE, "m") and store.delete_document(ALICE, "/a.md")
    assert store.search_memories(ALICE, "teapot") == []
    assert store.search_documents(ALICE, "teapot") == []
    with store._write() as db:  # raises if the index and its content disagree
        db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")


def test_an_older_store_migrates_with_every_row_searchable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS",
                        {v: m for v, m in sqlite_schema.MIGRATIONS.items() if v < 9})
    db = sqlite3.connect(path, isolation_level=None)
    sqlite_schema.migrate(db, 0)
    for scope in (ALICE, BOB):  # written as the code before version 9 wrote rows
        t, a = scope.tenant, scope.agent
        db.execute("INSERT INTO events (tenant, agent, session, type, role, content, ts, "
                   "tokens) VALUES (?, ?, 's', 'message', 'user', ?, 0, 3)",
                   (t, a, f"{t} went kayaking"))
        db.execute("INSERT INTO events_fts (rowid, content, search_extra, search_context) "
                   "SELECT id, content, search_extra, search_context FROM events "
                   "WHERE id = last_insert_rowid()")
        db.execute("INSERT INTO memories (id, tenant, agent, type, content, tags, created, "
                   "updated) VALUES (?, ?, ?, 'project_context', ?, '', 0, 0)",
                   (f"m-{t}", t, a, f"{t} likes kayaks"))
        db.execute("INSERT INTO documents (tenant, agent, path, content, tags, version, "
                   "created, updated) VALUES (?, ?, '/k.md', ?, '', 1, 0, 0)",
                   (t, a, f"{t} kayak log"))
    db.close()
    monkeypatch.undo()
    new = SQLiteStore(f"sqlite:///{path}")
    try:
        assert 9 in {r[0] for r in new._query("SELECT version FROM migrations")}
        for scope in (ALICE, BOB):
            assert [h.text for h in new.search_events(scope, "kayaking")] == [
                f"{scope.tenant} went kayaking"]
            assert [h.id for h in new.search_memories(scope, "kayaks")] == [
                f"m-{scope.tenant}"]
            assert [h.text for h in new.search_documents(scope, "kayak")] == [
                f"{scope.tenant} kayak log"]
        # Migration 11 counted each scope's rows and tokens.
        assert new._query("SELECT docs, tokens FROM fts_stats f JOIN scopes s "
                          "ON s.no = f.scope WHERE kind = 'memories' AND tenant = 'alice'"
                          ) == [(1, 3)]
        new.append_events(ALICE, "s", [NewEvent("message", "user", "kayaking again", T0)])
        assert len(new.search_events(ALICE, "kayaking")) == 2
        assert len(new.search_events(BOB, "kayaking")) == 1
    finally:
        new.close()
    db = sqlite3.connect(path)
    for table in ("events_fts", "memories_fts", "documents_fts"):
        db.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
    db.close()


def test_tool_calls_stored_before_version_10_become_searchable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS",
                        {v: m for v, m in sqlite_schema.MIGRATIONS.items() if v != 10})
    old = SQLiteStore(f"sqlite:///{path}")
    [call] = old.append_events(ALICE, "s", [NewEvent(
        "tool_call", "assistant", "", T0, tool_name="bash",
        args={"command": "grep -n iter pydicom/valuerep.py"})])
    with old._write() as db:
        db.execute("UPDATE events SET search_extra = NULL")  # as before v10
    assert old.search_events(ALICE, "valuerep") == []
    old.close()
    monkeypatch.undo()
    new = SQLiteStore(f"sqlite:///{path}")
    try:
        assert [h.id for h in new.search_events(ALICE, "valuerep")] == [str(call.id)]
        assert new.search_events(BOB, "valuerep") == []
    finally:
        new.close()
