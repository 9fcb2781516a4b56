"""A user moved between stores (``loci user import``): into a store that holds other
users, the rows get fresh ids and everything that names an event follows them; a
malformed archive is refused with a ``ValidationError`` and leaves the store as it was.
Each test runs on both backends (the archive comes from a SQLite store)."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from loci import Loci, Runtime, Scope, ValidationError, load_settings
from loci.compaction.masking import artifact_path
from loci.models import SHARED_AGENT
from loci.store.base import ScopeData
from tests.conftest import FakeClock

# Memories kept per user: the shared scope's sources name events of another scope.
pytestmark = pytest.mark.loci_settings(memory_scope="user")

OUTPUT = "line of output\n" * 700  # long enough to be masked and kept as an artifact


def work(loci: Loci, session: str, fact: str, steps: int = 8) -> None:
    """A session of tool calls with long outputs after a stated fact, compacted."""
    loci.add(session, "user", fact)
    for n in range(steps):
        loci.add(session, "user", f"Please look up the weather number {n}.")
        loci.add_event(session, type="tool_call", role="assistant", content="",
                       tool_name="grep", tool_call_id=f"c{n}", args={"q": "x"})
        loci.add_event(session, type="tool_result", role="tool", tool_name="grep",
                       tool_call_id=f"c{n}", content=f"{OUTPUT}output {n} of {session}")
        loci.add(session, "assistant", f"Noted {n}.")
    assert loci.wait_extracted(10)
    assert loci.compact(session, window=4000).record is not None


def fill_ana(runtime: Runtime) -> list[Scope]:
    ana = runtime.scope("ana", "helper")
    work(ana, "a1", "I live in Lisbon and my brother is called Rui.")
    ana.add("a2", "user", "A second session of Ana's.")
    ana.remember("Ana collects stamps.", "preference")
    ana.knowledge.put("/notes/ana.md", "# Ana\nNotes of Ana.")
    runtime.scope("ana", "coder").add("c1", "user", "Ana's coder session.")
    return [Scope("ana", a) for a in (SHARED_AGENT, "coder", "helper")]


def fill_bea(runtime: Runtime) -> None:
    bea = runtime.scope("bea", "helper")
    work(bea, "s1", "I live in Porto and my sister is called Rita.")
    bea.add("s2", "user", "I live in Porto and my sister is called Rita.")  # said again
    assert bea.wait_extracted(10)
    bea.knowledge.put("/notes/bea.md", "# Bea\nNotes of Bea.")
    bea.usage.record("s1", {"input_tokens": 10, "output_tokens": 5}, model="gpt-4o")
    last = bea.events("s1")[-1].id
    bea.store.set_state(bea.scope, "flushed:s1", str(last), bea.clock())
    runtime.scope("bea", "coder").add("c1", "user", "Bea's coder session.")


def exported(runtime: Runtime, scopes: list[Scope]) -> list[ScopeData]:
    return [replace(runtime.store.export_scope(s), vectors={}) for s in scopes]


def bea_archive(tmp_path: Path, clock: FakeClock) -> tuple[bytes, list[ScopeData]]:
    """Bea's archive from a store of her own, and her scopes as that store held them."""
    with Runtime(load_settings(store=f"sqlite:///{tmp_path / 'source.db'}",
                               memory_scope="user"), clock=clock) as source:
        fill_bea(source)
        return source.export_user("bea"), exported(source, BEA)


#: Bea's scopes in the order a store lists them.
BEA = [Scope("bea", a) for a in (SHARED_AGENT, "coder", "helper")]


def test_a_user_moves_into_a_store_that_holds_other_users(
        engine: Loci, tmp_path: Path, clock: FakeClock) -> None:
    target = engine.runtime
    ana = fill_ana(target)
    ana_before = exported(target, ana)
    archive, before = bea_archive(tmp_path, clock)
    taken = {e.id for data in ana_before for e in data.events}
    assert taken & {e.id for data in before for e in data.events}  # the ids clash

    assert target.import_user(archive) == BEA
    after = exported(target, BEA)
    assert exported(target, ana) == ana_before
    # Every event came, in order, with a fresh id: all moved by one step.
    ids = {old.id: new.id for b, a in zip(before, after, strict=True)
           for old, new in zip(b.events, a.events, strict=True)}
    assert [[(e.session, e.type, e.content, e.archived) for e in data.events]
            for data in after] == [[(e.session, e.type, e.content, e.archived)
                                    for e in data.events] for data in before]
    assert min(ids.values()) > max(taken)
    assert len({new - old for old, new in ids.items()}) == 1
    shared, coder, helper = after
    old_shared, old_coder, old_helper = before
    # The compaction's span and summary, the usage record's last event, the flush mark.
    assert [(c.first_event_id, c.last_event_id, c.summary_event_id, c.summary)
            for c in helper.compactions] == [
        (ids[c.first_event_id], ids[c.last_event_id], ids[c.summary_event_id or 0],
         c.summary) for c in old_helper.compactions]
    assert [u.last_event for u in helper.usage] == [ids[u.last_event]
                                                    for u in old_helper.usage]
    assert {i.key: i.value for i in helper.state}["flushed:s1"] == str(
        ids[int({i.key: i.value for i in old_helper.state}["flushed:s1"])])
    # The fact extracted from an event names it, in the shared scope.
    porto = [m for m in shared.memories if "Porto" in m.content]
    assert porto and all(m.source and m.source.startswith("event:") for m in porto)
    content = {e.id: e.content for e in helper.events}
    assert all("Porto" in content[int(m.source[6:])] for m in porto if m.source)
    again = [s for m in porto for s in m.metadata.get("confirmed_from", ())]
    assert again and all("Porto" in content[int(s[6:])] for s in again)
    # The masks name their event and its artifact, which holds the event's output.
    masked = [e for e in helper.events if e.masked]
    assert masked and all(f"event {e.id}" in (e.masked or "")
                          and artifact_path("s1", e.id) in (e.masked or "") for e in masked)
    artifacts = {d.path: d for d in helper.documents if d.path.startswith("/artifacts/")}
    assert set(artifacts) == {artifact_path("s1", e.id) for e in masked}
    assert all(artifacts[artifact_path("s1", e.id)].content == e.content
               and artifacts[artifact_path("s1", e.id)].metadata["event_id"] == e.id
               for e in masked)
    assert coder.events[0].content == old_coder.events[0].content
    assert [m.content for m in shared.memories] == [m.content for m in old_shared.memories]

    # Bea reads back through the library, carries on, and erases as she would have.
    bea = target.scope("bea", "helper")
    assert [e.content for e in bea.events("s1")] == [e.content for e in old_helper.events
                                                     if e.session == "s1"]
    assert bea.add("s2", "user", "Back again.").id > max(ids.values())
    bea.erase_session("s1")
    left = target.store.export_scope(Scope("bea", "helper"))
    assert [d.path for d in left.documents] == ["/notes/bea.md"]
    # What s2 said again stays, from s2 (by its new id), until s2 goes too.
    said_again = {f"event:{e.id}" for e in bea.events("s2")}
    kept = [m for m in bea.memories() if "Porto" in m.content]
    assert kept and all(m.source in said_again for m in kept)
    bea.erase_session("s2")
    assert not [m for m in bea.memories() if "Porto" in m.content]
    assert exported(target, ana) == ana_before


def rezip(archive: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    """``archive`` with its members (name → JSON value, or None to leave one out)
    changed by ``change``."""
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        members: dict[str, Any] = {n: json.loads(opened.read(n)) if n.endswith(".json")
                                   else opened.read(n) for n in opened.namelist()}
    change(members)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as written:
        for name, value in members.items():
            if value is not None:
                written.writestr(name, value if isinstance(value, bytes | str)
                                 else json.dumps(value))
    return out.getvalue()


def helper_scope(members: dict[str, Any]) -> dict[str, Any]:
    """The scope.json of Bea's helper agent (the one with every kind of row)."""
    agents = members["manifest.json"]["agents"]
    scope: dict[str, Any] = members[f"agents/{agents.index('helper')}/scope.json"]
    return scope


def helper_member(members: dict[str, Any]) -> str:
    return f"agents/{members['manifest.json']['agents'].index('helper')}/scope.json"


MALFORMED: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "manifest is a list": (lambda m: m.update({"manifest.json": []}),
                           "not a loci-user-export archive"),
    "manifest without user": (lambda m: m["manifest.json"].pop("user"), "names no user"),
    "user not a name": (lambda m: m["manifest.json"].update(user=5), "invalid user 5"),
    "agents not a list": (lambda m: m["manifest.json"].update(agents=3),
                          "agents must be a list"),
    "manifest not JSON": (lambda m: m.update({"manifest.json": "{"}),
                          "cannot read manifest.json"),
    "scope missing": (lambda m: m.update({helper_member(m): None}), "has no agents/"),
    "scope is a list": (lambda m: m.update({helper_member(m): []}), "is not a JSON object"),
    "scope without tenant": (lambda m: helper_scope(m).pop("tenant"),
                             "names no tenant and agent"),
    "events a string": (lambda m: helper_scope(m).update(events="abc"),
                        "events must be a list, not str"),
    "memory version a string": (lambda m: helper_scope(m).update(memory_versions=["x"]),
                                r"memory_versions\[0\] is not a JSON object"),
    "event id a string": (lambda m: helper_scope(m)["events"][0].update(id="x"),
                          r"events\[0\]\.id must be an integer, not str"),
    "event without content": (lambda m: helper_scope(m)["events"][1].pop("content"),
                              r"events\[1\] has no content"),
    "bad time": (lambda m: helper_scope(m)["events"][0].update(timestamp="yesterday"),
                 r"events\[0\]\.timestamp: not an ISO 8601"),
    "tags not strings": (lambda m: helper_scope(m)["documents"][0].update(tags=[1]),
                         r"documents\[0\]\.tags must be a list of strings"),
    "huge number": (lambda m: helper_scope(m)["events"][0].update(tokens=2**70),
                    "integers must fit in 64 bits"),
    "another user's scope": (lambda m: helper_scope(m).update(tenant="cid"),
                             "mixes users"),
    "bad session name": (lambda m: helper_scope(m)["events"][0].update(session="../x"),
                         "invalid session"),
    # Found only when the rows are written: the other agents' rows, written before in the
    # same transaction, go too.
    "an id twice": (lambda m: helper_scope(m)["events"].append(helper_scope(m)["events"][0]),
                    "do not fit this store"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_archive_is_refused_whole(
        engine: Loci, tmp_path: Path, clock: FakeClock, case: str) -> None:
    target = engine.runtime
    fill_ana(target)
    everything = exported(target, target.store.list_scopes())
    archive, _ = bea_archive(tmp_path, clock)
    change, message = MALFORMED[case]
    with pytest.raises(ValidationError, match=message):
        target.import_user(rezip(archive, change))
    assert exported(target, target.store.list_scopes()) == everything


def test_a_damaged_zip_is_refused(engine: Loci, tmp_path: Path, clock: FakeClock) -> None:
    archive, _ = bea_archive(tmp_path, clock)
    middle = bytearray(archive)
    middle[len(archive) // 3: len(archive) // 3 + 8] = b"\xff" * 8  # inside a member
    for damaged in (archive[: len(archive) // 2], bytes(middle)):
        with pytest.raises(ValidationError, match="cannot read"):
            engine.runtime.import_user(damaged)
    assert engine.runtime.store.list_scopes() == []
