"""Every operation that deletes or rewrites stored data, with its guard, tried where it
must lose nothing: named from another scope, against a missing or foreign mirror, as a
preview. The faces (REST, MCP, CLI, the proxy) reach these through ``Loci``, which
scopes every call, so the table is written over the library and names each face.

After each attempt, everything of the user's that the attempt did not name reads back
as before (a superseded or archived value counts as kept when its history or the log
still holds it)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loci import Loci, LociError, NotFoundError, ValidationError, load_settings
from loci.cli.app import main
from loci.knowledge.memory_files import MemoryFiles
from tests.conftest import FakeClock


@dataclass
class World:
    alice: Loci
    bob: Loci
    home: Path
    memory: str  # one of alice's memories
    path: str = "/docs/plan.md"


def snapshot(loci: Loci) -> dict[str, Any]:
    """What the user stored, as it reads back (history included)."""
    memories = loci.memories(include_expired=True)
    return {
        "events": {s.id: [(e.id, e.content) for e in loci.events(s.id)]
                   for s in loci.sessions()},
        "memories": {m.id: m.content for m in memories},
        "history": {m.id: [v.content for v in loci.memory_history(m.id)] for m in memories},
        "state": {i.key: i.value for i in loci.state()},
        "documents": {d.path: d.content for d in loci.knowledge.ls("/")},
    }


def kept(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Nothing of ``before`` is lost in ``after``: every event, memory text (now or in
    its history), state value and document still reads back."""
    for session, events in before["events"].items():
        assert set(events) <= set(after["events"].get(session, [])), session
    for memory_id, content in before["memories"].items():
        assert memory_id in after["memories"], memory_id
        assert content in (after["memories"][memory_id], *after["history"][memory_id])
    assert before["state"].items() <= after["state"].items()
    assert before["documents"].items() <= after["documents"].items()


def _refused(error: type[Exception], call: Callable[[], object]) -> None:
    with pytest.raises(error):
        call()


@dataclass(frozen=True)
class Operation:
    name: str
    faces: str
    guard: str
    attempt: Callable[[World], None]
    #: Whether the attempt must change nothing at all (else: only add, or keep history).
    exact: bool = True


def _memory_tool(world: World, **command: Any) -> None:
    MemoryFiles(world.bob.knowledge).run(command)


OPERATIONS = [
    Operation("forget a memory", "CLI forget · REST DELETE /api/memories/{id} · MCP forget",
              "scoped to the caller; names one id",
              lambda w: _refused(NotFoundError, lambda: w.bob.forget(w.memory))),
    Operation("purge expired memories", "CLI purge --expired · REST · MCP",
              "only expired facts of the caller's scope",
              lambda w: (w.bob.purge_expired(), w.alice.purge_expired())),
    Operation("sync the markdown mirror (missing folder)", "CLI sync",
              "marker of store and scope; a missing or empty folder deletes nothing",
              lambda w: (shutil.rmtree(w.home / "memory" / "alice"), w.alice.sync())),
    Operation("sync the markdown mirror (emptied folder)", "CLI sync",
              "an emptied folder deletes nothing; many deletions need --yes",
              lambda w: ([p.unlink() for p in (w.home / "memory").rglob("*.md")],
                         w.alice.sync(confirm=True))),
    Operation("sync another scope's folder", "CLI sync",
              "a folder whose marker names another scope is refused",
              lambda w: (shutil.rmtree(w.home / "memory" / "bob", ignore_errors=True),
                         shutil.copytree(w.home / "memory" / "alice",
                                         w.home / "memory" / "bob"),
                         _refused(LociError, w.bob.sync))),
    Operation("erase a session", "CLI session rm · REST DELETE /api/sessions/{id}",
              "scoped; names the session; --yes or a confirmation",
              lambda w: w.bob.erase_session("work")),
    Operation("erase another agent's session of the same name",
              "CLI session rm · REST DELETE /api/sessions/{id}",
              "an agent's session takes only the memories that agent wrote from it",
              lambda w: w.alice.for_scope(agent="coder").erase_session("work")),
    Operation("delete a state key", "CLI state delete · REST · MCP",
              "scoped; names the key",
              lambda w: _refused(NotFoundError, lambda: w.bob.state_delete("topic"))),
    Operation("remove a document", "CLI kb rm · REST DELETE /api/kb · MCP",
              "scoped; names the path; '../' refused",
              lambda w: (_refused(NotFoundError, lambda: w.bob.knowledge.rm(w.path)),
                         _refused(ValidationError,
                                  lambda: w.alice.knowledge.rm("/docs/../plan.md")))),
    Operation("memory tool delete and rename", "MCP memory tool · proxy [proxy] memory_tool",
              "only under /memories of the caller's scope",
              lambda w: (_refused(LociError, lambda: _memory_tool(
                  w, command="delete", path="/memories/../docs/plan.md")),
                  _refused(LociError, lambda: _memory_tool(
                      w, command="rename", old_path="/memories/notes.md",
                      new_path="/memories/moved.md")))),
    Operation("compact a session", "CLI compact · REST POST .../compact · automatic",
              "archives and summarizes; never deletes an event",
              lambda w: w.alice.compact("work", window=1_000), exact=False),
    Operation("compile with a small window", "CLI context --window · REST context",
              "a per-call window never changes the stored session",
              lambda w: w.alice.compile("work", "what did we decide?", window=600)),
    Operation("import a session into an existing one", "CLI import · REST import",
              "appends; earlier events stay",
              lambda w: w.alice.import_jsonl(['{"role": "user", "content": "again"}'],
                                             "work"), exact=False),
    Operation("write a memory over another", "CLI remember · memory write · tags",
              "a changed fact supersedes: the old text stays in its history",
              lambda w: w.alice.memory_write("project_context", [],
                                             "The launch moved to May.", id=w.memory),
              exact=False),
    Operation("erase another user", "CLI user erase · REST erase (operator)",
              "names the user; nothing of another user changes",
              lambda w: w.alice.runtime.erase_user("bob")),
    Operation("import a user archive over a user", "CLI user import",
              "refused when the store holds the user",
              lambda w: _refused(LociError, lambda: w.alice.runtime.import_user(
                  w.alice.runtime.export_user("alice")))),
    Operation("retention with zero days", "CLI purge --older-than · server daily",
              "0 days does nothing; otherwise only sessions past the cutoff",
              lambda w: w.alice.runtime.apply_retention(days=0)),
    Operation("re-embed everything", "CLI reindex", "vectors only; rows unchanged",
              lambda w: w.alice.reindex()),
]


@pytest.fixture(params=["agent", "user"], ids=["agent memories", "user memories"])
def world(request: pytest.FixtureRequest, home: Path, clock: FakeClock) -> Any:
    """Alice's and Bob's data, their memories per agent or shared by a user's agents."""
    settings = load_settings(store=f"sqlite:///{home / 'loci.db'}",
                             memory_scope=request.param)
    with Loci(settings, clock=clock) as root:
        alice, bob = root.for_scope("alice"), root.for_scope("bob")
        for n in range(12):
            alice.add("work", "user", f"Step {n}: we chose SQLite for the store. " * 8)
            alice.add_reply("work", f"Noted step {n}." + (
                " [MEMORY:fact] The venue is Lisbon. [/MEMORY]" if n == 0 else ""))
        memory = alice.remember("The launch is in April.").id
        alice.remember("Maya prefers short answers.", type="user_preference")
        alice.state_set("topic", "launch")
        alice.knowledge.put("/docs/plan.md", "Ship the API first.")
        alice.knowledge.put("/memories/notes.md", "Remember the launch.")
        bob.remember("Bob's own fact.")
        assert root.wait_extracted(30)  # the turns' own facts are in before the snapshot
        yield World(alice, bob, home, memory)


@pytest.mark.parametrize("operation", OPERATIONS, ids=[o.name for o in OPERATIONS])
def test_nothing_is_lost_without_a_request_naming_it(world: World,
                                                     operation: Operation) -> None:
    assert operation.guard and operation.faces
    before = snapshot(world.alice)
    operation.attempt(world)
    after = snapshot(world.alice)
    kept(before, after)
    if operation.exact:
        assert after == before
        assert [e.archived for e in world.alice.events("work")] == [False] * 24


def test_the_table_names_every_destructive_method_of_the_api() -> None:
    """A new method that deletes or rewrites must get a row (and a guard)."""
    destructive = {"forget", "purge_expired", "sync", "erase_session", "state_delete",
                   "compact", "import_jsonl", "memory_write", "erase_user", "import_user",
                   "apply_retention", "reindex", "restore", "rm", "redact"}
    from loci import KnowledgeBase, Runtime

    words = ("erase", "forget", "purge", "delete", "rm", "redact", "restore", "sync")
    names = {n for cls in (Loci, Runtime, KnowledgeBase) for n in dir(cls)
             if not n.startswith("_") and any(w in n.split("_") for w in words)}
    assert names <= destructive, names - destructive
    assert len(OPERATIONS) >= 15


def test_the_demo_into_an_existing_store_loses_nothing(tmp_path: Path, home: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mine.db'}"
    with Loci.open(store=url, user="maya") as loci:
        loci.remember("Maya's dog is called Biscuit.", type="sticky")
        loci.add("01-kickoff", "user", "My own kickoff notes.")
        before = snapshot(loci)
    assert main(["demo", "--store", url]) == 2  # the demo's user has data here: refused
    assert main(["demo", "--store", url, "--user", "visitor"]) == 0
    with Loci.open(store=url, user="maya") as loci:
        assert snapshot(loci) == before
