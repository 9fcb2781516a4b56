"""Erasure through the library, measured on the bytes it leaves: after erasing a user,
forgetting a memory or removing a document, no distinctive word of theirs is in any file
under ``$LOCI_HOME``; other users are untouched."""

from __future__ import annotations

import io
import json
import stat
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from loci import ConflictError, Loci, Runtime, Scope, ValidationError, load_settings
from loci.models import SHARED_AGENT
from loci.testing import ScriptedChatModel
from tests.conftest import FakeClock

#: Words that occur nowhere else, one set per user.
ALICE_WORDS = ("zanzibarquux", "xylofrobnic", "quuxwobble", "glorptoken", "vexilloid")
BOB_WORDS = ("bobbinhaddock", "marzipanflux")

pytestmark = pytest.mark.real_clock


def residue(home: Path, words: tuple[str, ...]) -> dict[str, list[str]]:
    """Files under ``home`` whose bytes contain each word (``grep -a``)."""
    found: dict[str, list[str]] = {}
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes().lower()
            for word in words:
                if word.encode() in data:
                    found.setdefault(word, []).append(path.name)
    return found


def fill(loci: Loci, words: tuple[str, ...]) -> None:
    first, second, third, fourth, fifth, *_ = words * 3
    for n in range(30):
        loci.add("s1", "user", f"Turn {n}: my {first} is in the {second} drawer.")
    loci.add_reply("s1", f"Noted. [MEMORY:fact] The {third} lives in Porto. [/MEMORY]")
    loci.remember(f"The user collects {fourth} stamps.", "preference")
    loci.knowledge.put(f"/notes/{first}.md", f"# {second}\nAll about {third}.")
    loci.state_set("pet", fifth)
    loci.sync()


def test_erasing_a_user_leaves_no_byte_of_theirs(home: Path, runtime: Runtime) -> None:
    for agent in ("helper", "coder"):
        fill(runtime.scope("alice", agent), ALICE_WORDS)
    bob = runtime.scope("bob", "helper")
    fill(bob, BOB_WORDS)
    runtime.create_key("alice")
    bob_before = runtime.store.export_scope(bob.scope)
    assert set(residue(home, ALICE_WORDS)) == set(ALICE_WORDS)  # the scan sees them
    erased = runtime.erase_user("alice")
    assert sorted(erased.agents) == ["coder", "helper"] and erased.rows > 60
    assert runtime.api_keys("alice") == [] and runtime.scope("alice", "helper").sessions() == []
    runtime.store.persist_indexes()
    assert residue(home, ALICE_WORDS) == {}
    assert set(residue(home, BOB_WORDS)) == set(BOB_WORDS)
    after = runtime.store.export_scope(bob.scope)
    assert after.events == bob_before.events and after.memories == bob_before.memories
    assert bob.search("marzipanflux", limit=3)


def test_forget_and_kb_rm_leave_no_byte_of_the_text(home: Path, runtime: Runtime) -> None:
    loci = runtime.scope("alice", "helper")
    kept = loci.remember("The user's favourite tree is the baobab.", "preference")
    gone = loci.remember("The user's locker code is vexilloid.", "preference")
    loci.knowledge.put("/notes/secret.md", "The quuxwobble plan.")
    loci.search("vexilloid quuxwobble", limit=3)  # vectors loaded into the index
    loci.forget(gone.id)
    loci.knowledge.rm("/notes/secret.md")
    runtime.store.persist_indexes()
    assert residue(home, ("vexilloid", "quuxwobble")) == {}
    assert residue(home, ("baobab",)) and loci.memory(kept.id).content.endswith("baobab.")


def test_forget_with_redact_source_takes_the_tag_out_of_the_raw_reply(
    home: Path, runtime: Runtime
) -> None:
    loci = runtime.scope("alice", "helper")
    event, result = loci.add_reply("s1", (
        "Sure. [MEMORY:fact] The user's alarm code is glorptoken. [/MEMORY] "
        "[MEMORY:fact] The user's cat is called Miso. [/MEMORY] Anything else?"))
    code = result.saved[0].memory
    _, other = loci.add_reply("s1", "Noted. [MEMORY:fact] The user likes marzipanflux. "
                                    "[/MEMORY]")
    loci.sync()
    loci.forget(other.saved[0].memory.id)  # the default: the raw reply stays whole
    assert residue(home, ("marzipanflux",))
    assert loci.forget(code.id, redact_source=True) == 1
    runtime.store.persist_indexes()
    assert residue(home, ("glorptoken",)) == {}
    reply, noted = [e for e in loci.events("s1") if e.role == "assistant"]
    assert reply.content == event.content == "Sure. Anything else?"
    assert reply.metadata["raw"] == ("Sure. [MEMORY:fact] The user's cat is called Miso. "
                                     "[/MEMORY] Anything else?")
    assert "marzipanflux" in noted.metadata["raw"]


def test_a_redacted_version_leaves_no_byte_and_cannot_be_restored(
        home: Path, runtime: Runtime) -> None:
    loci = runtime.scope("alice", "helper")
    first = loci.knowledge.put("/plan.md", "The launch code is zanzibarquux.").document
    loci.knowledge.put("/plan.md", "The launch code moved to the safe.")
    loci.knowledge.put("/plan.md", "The launch code moved to the safe. Again.")
    with pytest.raises(ValidationError, match="current version"):
        loci.knowledge.redact("/plan.md", 3)
    redacted = loci.knowledge.redact("/plan.md", 1)
    assert redacted.content == "" and "redacted_at" in redacted.metadata
    runtime.store.persist_indexes()
    assert residue(home, ("zanzibarquux",)) == {}
    assert [v.version for v in loci.knowledge.history("/plan.md")] == [1, 2]
    with pytest.raises(ValidationError, match="was redacted"):
        loci.knowledge.restore("/plan.md", first.updated_at)


def test_erasing_a_session_takes_what_came_from_it_unless_kept(runtime: Runtime) -> None:
    loci = runtime.scope("alice", "helper")
    fill(loci, ALICE_WORDS)
    loci.add("s2", "user", "Another session about kayaks.")
    from_reply = [m for m in loci.memories() if m.source == "session:s1"]
    assert len(from_reply) == 1
    plan = loci.erase_session("s1", dry_run=True)
    assert plan.events == 31 and plan.memories == (from_reply[0].id,) and plan.dry_run
    assert len(loci.events("s1")) == 31  # nothing erased yet
    kept = loci.erase_session("s1", keep_derived=True)
    assert kept.events == 31 and kept.memories == ()
    assert loci.memory(from_reply[0].id)  # derived, kept
    loci.add("s3", "user", "Turn: my zanzibarquux again.")
    loci.end_session("s3")  # files a conversation document for s3
    documents = [d.path for d in loci.knowledge.ls("/conversations/")]
    erased = loci.erase_session("s3")
    assert erased.documents == tuple(documents) and erased.events == 1
    assert loci.knowledge.ls("/conversations/") == []
    assert [s.id for s in loci.sessions()] == ["s2"]
    # A user's document whose front matter names the session is theirs, not derived.
    loci.knowledge.put("/conversations/keynote.md", "My notes.",
                       metadata={"session": "s2"})
    loci.knowledge.put("/reference/keynote.md", "More notes.", metadata={"session": "s2"})
    assert loci.erase_session("s2").documents == ()
    assert {d.path for d in loci.knowledge.ls("/")} >= {
        "/conversations/keynote.md", "/reference/keynote.md"}
    assert loci.compile("s3", "hello").to_openai()[:-1] == [
        m for m in loci.compile("s3", "hello").to_openai()[:-1] if "zanzibarquux" not in
        str(m.get("content"))]


def test_files_are_private(home: Path, runtime: Runtime) -> None:
    loci = runtime.scope("alice", "helper")
    loci.remember("A private fact.", "fact")
    for name in ("loci.db", "loci.db-wal", "loci.db-shm"):
        path = home / name
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
    directory = home / "memory" / "alice"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert Scope("alice", "helper") == loci.scope


def test_a_user_exports_and_comes_back_whole(home: Path, runtime: Runtime) -> None:
    for agent in ("helper", "coder"):
        fill(runtime.scope("alice", agent), ALICE_WORDS)
    loci = runtime.scope("alice", "helper")
    loci.compact("s1")
    loci.usage.record("s1", {"input_tokens": 10, "cache_read_input_tokens": 2000,
                             "output_tokens": 5}, model="claude-haiku-4-5", latency_ms=9.5)
    before = {a: runtime.store.export_scope(Scope("alice", a)) for a in ("helper", "coder")}
    archive = runtime.export_user("alice")
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        names = opened.namelist()
        session = opened.read("agents/0/sessions/0.jsonl").decode()
    assert "manifest.json" in names and len(session.splitlines()) >= 31
    with pytest.raises(ConflictError, match="erase it first"):
        runtime.import_user(archive)  # the store still holds alice
    runtime.erase_user("alice")
    assert sorted(s.agent for s in runtime.import_user(archive)) == ["coder", "helper"]
    for agent, data in before.items():
        again = runtime.store.export_scope(Scope("alice", agent))
        assert replace(again, vectors={}) == replace(data, vectors={}), agent
    assert [r.cached_tokens for r in loci.usage.records()] == [2000]
    assert loci.search("quuxwobble", limit=3)[0].text == "The quuxwobble lives in Porto."
    assert loci.wait_indexed(timeout=30)  # and the imported items get their vectors
    assert all(runtime.store.count_unembedded(kind) == 0 for kind in ("event", "memory"))
    with pytest.raises(ValidationError, match="cannot read the archive"):
        runtime.import_user(b"not a zip")


@pytest.mark.loci_settings(memory_scope="user")
def test_a_users_shared_memories_are_erased_and_exported_with_them(
        home: Path, runtime: Runtime) -> None:
    for agent in ("helper", "coder"):
        fill(runtime.scope("alice", agent), ALICE_WORDS)
    fill(runtime.scope("bob", "helper"), BOB_WORDS)
    coder = runtime.scope("alice", "coder")
    fact = runtime.scope("alice", "helper").remember("Alice keeps her glorptoken in Lyon.")
    assert fact.id in {m.id for m in coder.memories()}
    shared = Scope("alice", SHARED_AGENT)
    assert (home / "memory" / "alice" / f"{fact.id}.md").is_file()
    before = runtime.store.export_scope(shared)
    assert fact.id in {m.id for m in before.memories}
    archive = runtime.export_user("alice")
    erased = runtime.erase_user("alice")
    assert sorted(erased.agents) == [SHARED_AGENT, "coder", "helper"]
    assert coder.memories() == [] and not runtime.store.export_scope(shared).memories
    runtime.store.persist_indexes()
    assert residue(home, ALICE_WORDS) == {}
    assert set(residue(home, BOB_WORDS)) == set(BOB_WORDS)  # bob's shared ones stay
    assert SHARED_AGENT in {s.agent for s in runtime.import_user(archive)}
    again = runtime.store.export_scope(shared)
    assert replace(again, vectors={}) == replace(before, vectors={})
    assert fact.id in {m.id for m in coder.memories()}


def test_retention_erases_or_archives_old_sessions_of_every_user(home: Path) -> None:
    clock = FakeClock()
    runtime = Runtime(load_settings(store=f"sqlite:///{home / 'loci.db'}",
                                    embedding_provider="hash"), clock=clock)
    try:
        for user in ("alice", "bob"):
            loci = runtime.scope(user, "helper")
            loci.add("old", "user", "An old conversation.")
            loci.add_reply("old", "Sure. [MEMORY:sticky] The user rows on lakes. [/MEMORY]")
        clock.advance(days=40)
        runtime.scope("alice", "helper").add("new", "user", "A fresh one.")
        assert runtime.apply_retention().sessions == 0  # off by default
        history = runtime.scope("alice", "helper").compile("old", "hi").to_openai()
        assert any("An old conversation." in str(m["content"]) for m in history)
        done = runtime.apply_retention(30, "archive")
        assert (done.sessions, done.events) == (2, 4)
        alice = runtime.scope("alice", "helper")
        assert all(e.archived for e in alice.events("old"))
        history = alice.compile("old", "hi").to_openai()  # archived: out of live history
        assert not any("An old conversation." in str(m["content"]) for m in history)
        assert runtime.apply_retention(30, "archive").sessions == 0  # nothing live left
        done = runtime.apply_retention(30)
        assert (done.action, done.sessions, done.events) == ("erase", 2, 4)
        assert [s.id for s in alice.sessions()] == ["new"]
        assert runtime.scope("bob", "helper").sessions() == []
        assert any("lakes" in m.content for m in alice.memories())  # memories stay
    finally:
        runtime.close()


def test_a_fact_another_session_stated_again_outlives_the_first(runtime: Runtime) -> None:
    """Erasing the session a memory came from takes it only when no other session said
    it again; else it stays, from the newest that did (found by an attack: `loci
    session rm` had taken what session B still says)."""
    loci = runtime.scope("alice", "helper")
    loci.add("a", "user", "I have a dog named Biscuit.")
    loci.add("a", "user", "I am allergic to peanuts.")
    loci.wait_extracted(60)
    before = {m.content: m for m in loci.memories()}
    dog = next(m for text, m in before.items() if "Biscuit" in text)
    allergy = next(m for text, m in before.items() if "peanuts" in text)
    again = loci.add("b", "user", "I have a dog named Biscuit.")
    loci.wait_extracted(60)
    assert {m.id for m in loci.memories()} == {dog.id, allergy.id}  # refreshed, not new
    erased = loci.erase_session("a")
    assert erased.memories == (allergy.id,)
    kept = loci.memory(dog.id)
    assert kept.source == f"event:{again.id}" and kept.content == dog.content
    assert [m.id for m in loci.memories()] == [dog.id]
    assert loci.erase_session("b").memories == (dog.id,)  # now b's alone
    assert loci.memories() == []


def test_facts_still_being_taken_from_turns_are_not_saved_after_the_erasure(
        runtime: Runtime) -> None:
    """A slow chat model still deciding a turn's facts when the user is erased: the
    erasure waits for it, so the fact is erased too, not saved after."""
    loci = runtime.scope("alice", "helper")
    decided = json.dumps({"memory": [{"event": "ADD", "text": "The user lives in Lisbon",
                                      "type": "sticky"}]})

    def slow(messages: object) -> str:
        time.sleep(0.5)
        return decided
    loci.chat = ScriptedChatModel(responder=slow)
    loci.add("s", "user", "I live in Lisbon.")
    runtime.erase_user("alice")
    assert loci.wait_extracted(10)
    assert [s for s in runtime.store.list_scopes() if s.tenant == "alice"] == []


def test_an_erasure_waits_for_the_user_s_facts_not_for_another_user_s(
        runtime: Runtime) -> None:
    """Bob's slow facts in the queue do not hold up Alice's erasure; hers that wait are
    dropped (her turns are erased with her)."""
    def slow(messages: object) -> str:
        time.sleep(1.0)
        return json.dumps({"memory": [{"event": "NONE"}]})
    bob, alice = runtime.scope("bob", "helper"), runtime.scope("alice", "helper")
    bob.chat = ScriptedChatModel(responder=slow)
    for n in range(3):
        bob.add("s", "user", f"I live in city number {n}.")
    alice.add("s", "user", "I live in Lisbon.")
    runtime.erase_user("alice")
    assert not runtime.extraction.wait(0)  # Bob's facts are still being taken
    assert runtime.extraction.wait(30)
    assert [s for s in runtime.store.list_scopes() if s.tenant == "alice"] == []
