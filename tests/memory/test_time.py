"""True time of memories: when a fact was said, when it was last confirmed, and what
a newer fact on the same subject does to it. Cases are sentences of the LongMemEval
dev histories (knowledge-update questions), with the dates they were said."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from loci import Loci, Memory, Scope, Store
from loci.memory.timeline import asks_about_past, gives_new_value
from loci.store.sqlite import SQLiteStore
from loci.store.sqlite import schema as sqlite_schema
from tests.conftest import FakeClock

PAGE_200 = ('I\'ve been reading "A Short History of Nearly Everything" and I\'m currently '
            'on page 200')
PAGE_220 = ('I\'ve been reading "A Short History of Nearly Everything" and I\'m now on '
            'page 220')
MAY_20 = datetime(2023, 5, 20, 21, 24, tzinfo=UTC)
MAY_29 = datetime(2023, 5, 29, 9, 12, tzinfo=UTC)
WINDOW_SEATS = "I prefer window seats on long flights"


def test_a_repeat_confirms_the_fact_instead_of_duplicating_it(
        loci: Loci, clock: FakeClock) -> None:
    first = loci._memories.save(PAGE_200, "project_context", said_at=MAY_20).memory
    assert first.created_at == MAY_20 and first.confirmed_at == clock.now
    clock.advance(days=20)
    again = loci._memories.save(PAGE_200, "project_context", said_at=MAY_29)
    assert again.action == "refreshed" and again.memory.id == first.id
    assert again.memory.created_at == MAY_20  # still dated when first said
    assert again.memory.confirmed_at == clock.now
    # Its time to live counts from the last confirmation.
    assert again.memory.expires_at == clock.now + timedelta(days=30)
    assert [m.id for m in loci.memories()] == [first.id]


def test_a_newer_value_supersedes_the_older_and_keeps_it(loci: Loci) -> None:
    old = loci._memories.save(PAGE_200, said_at=MAY_20).memory
    result = loci._memories.save(PAGE_220, said_at=MAY_29)
    new = result.memory
    assert result.action == "superseded" and new.id != old.id
    assert new.created_at == MAY_29
    ended = loci.memory(old.id)
    assert ended.content == PAGE_200  # kept, not rewritten
    assert ended.superseded_by == new.id and ended.expires_at == MAY_29
    assert [m.id for m in loci.memories()] == [new.id]
    (version,) = loci.memory_history(old.id)
    assert version.reason == f"superseded by {new.id}" and version.content == PAGE_200
    # Restorable like any retired memory.
    back = loci.restore(old.id)
    assert back.superseded_by is None and not back.is_expired(loci.clock())


#: A knowledge-update history of the dev set: the ratio said in February, a new one in June.
RATIO_FEB = ("The user has been experimenting with their French press and they've found "
             "that 1 tablespoon of coffee for every 6 ounces of water is the perfect ratio "
             "for them.")
RATIO_JUN = ("The user is planning to brew a fresh pot of coffee in the morning, and they're "
             "feeling excited to use their new beans - they've got their French press ratio "
             "down to a science: 1 tablespoon of coffee for every 5 ounces of water.")


def test_an_expired_fact_said_again_is_confirmed_and_a_new_value_supersedes_it(
        loci: Loci, clock: FakeClock) -> None:
    february = loci._memories.save(RATIO_FEB, said_at=clock.now).memory
    clock.advance(days=60)  # its 30 days ran out
    assert loci.memories() == []
    again = loci._memories.save(RATIO_FEB, said_at=clock.now)
    assert again.action == "refreshed" and again.memory.id == february.id
    assert [m.id for m in loci.memories()] == [february.id]  # confirmed: it holds again
    clock.advance(days=60)
    june = loci._memories.save(RATIO_JUN, said_at=clock.now)
    assert june.action == "superseded"
    ended = loci.memory(february.id)
    # It ran out before June: it held until then, and the June value is what replaced it.
    assert ended.superseded_by == june.memory.id and ended.expires_at < clock.now
    assert [m.id for m in loci.memories()] == [june.memory.id]


def test_purging_expired_facts_keeps_what_was_superseded(
        loci: Loci, clock: FakeClock) -> None:
    """A superseded fact is the history of the newer one ("was …, until …"): purging
    the expired facts, a harmless-looking command, must not erase it."""
    old = loci._memories.save(PAGE_200, said_at=MAY_20).memory
    new = loci._memories.save(PAGE_220, said_at=MAY_29).memory
    stale = loci.remember("A short-lived project note", type="project_context")
    clock.advance(days=31)
    assert loci.purge_expired() == 2  # the note and, by now, the newer value itself
    left = {m.id: m for m in loci.memories(include_expired=True)}
    assert old.id in left and left[old.id].content == PAGE_200
    assert stale.id not in left and new.id not in left


def test_a_value_said_before_the_stored_one_arrives_superseded(loci: Loci) -> None:
    newer = loci._memories.save(PAGE_220, said_at=MAY_29).memory
    older = loci._memories.save(PAGE_200, said_at=MAY_20)
    assert older.action == "created" and older.memory.superseded_by == newer.id
    assert older.memory.expires_at == MAY_29
    assert loci.memory(newer.id).superseded_by is None
    assert [m.id for m in loci.memories()] == [newer.id]


def test_search_ranks_what_no_longer_holds_below_what_does(loci: Loci) -> None:
    old = loci._memories.save(PAGE_200, said_at=MAY_20).memory
    new = loci._memories.save(PAGE_220, said_at=MAY_29).memory
    now = loci.memory_search("Which page of A Short History am I on?")
    assert [(s.id, s.status) for s in now] == [(new.id, "active"), (old.id, "superseded")]
    assert [s.id for s in loci.memory_search("Which page of A Short History am I on?",
                                             past=False)] == [new.id]
    past = loci.memory_search("Which page of A Short History was I on before?")
    assert {s.id for s in past} == {old.id, new.id}
    (was,) = [s for s in past if s.id == old.id]
    assert was.status == "superseded" and was.until == MAY_29 and was.superseded_by == new.id
    assert next(s for s in past if s.id == new.id).status == "active"
    # The explicit flag, either way.
    assert {s.id for s in loci.memory_search("page of A Short History", past=True)} == {
        old.id, new.id}
    assert [s.id for s in loci.memory_search("page of A Short History was I on before",
                                             past=False)] == [new.id]


def test_the_context_marks_a_superseded_fact_for_a_question_about_the_past(
        loci: Loci) -> None:
    loci._memories.save(PAGE_200, said_at=MAY_20)
    loci._memories.save(PAGE_220, said_at=MAY_29)
    past = loci.compile(None, "Which page of A Short History was I on before?").to_text()
    assert f"was: {PAGE_200} (until 29 May 2023, superseded)" in past
    assert PAGE_220 in past
    current = loci.compile(None, "Which page of A Short History am I on?").to_text()
    assert PAGE_200 not in current and PAGE_220 in current


def test_an_expired_fact_is_found_for_the_past_and_labelled(
        loci: Loci, clock: FakeClock) -> None:
    kept = loci.remember(WINDOW_SEATS, type="user_preference")
    clock.advance(days=91)
    assert loci.memory_search("window seats", past=False) == []
    (marked,) = loci.memory_search("window seats")
    assert marked.id == kept.id and marked.status == "expired"
    (found,) = loci.memory_search("window seats I used to prefer")
    assert found.id == kept.id and found.status == "expired"
    assert found.until == kept.expires_at
    assert kept.expires_at is not None
    shown = loci.compile(None, "Which seats did I prefer on long flights?").to_text()
    assert (f"{WINDOW_SEATS} (expired {kept.expires_at.day} April 2026, not confirmed since)"
            in shown)


@pytest.mark.parametrize(("query", "past"), [
    ("How many engineers do I lead now?", False),
    ("How many engineers did I lead when I just started my new role?", True),
    ("What is the name of my cat?", False),
    ("Where did I live before I moved to Porto?", True),
    ("What was my previous personal best?", True),
    ("Which restaurant did I go to in March 2023?", True),
    ("Do I still see Dr. Smith every two weeks, or has that changed?", True),
])
def test_questions_about_the_past(query: str, past: bool) -> None:
    assert asks_about_past(query, datetime(2023, 11, 1, tzinfo=UTC)) is past


def test_confirmation_and_supersession_read_back(store: Store) -> None:
    scope = Scope("alice", "helper")
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    memory = Memory("mem_a", "project_context", PAGE_200, ("x",), t0, t0,
                    t0 + timedelta(days=30), "event:1", {"k": [1]},
                    confirmed_at=t0 + timedelta(seconds=1, microseconds=7),
                    superseded_by="mem_b")
    store.put_memories(scope, [memory])
    assert store.get_memory(scope, "mem_a") == memory
    assert store.list_memories(scope) == [memory]
    cleared = replace(memory, confirmed_at=None, superseded_by=None)
    store.put_memory(scope, cleared)
    assert store.get_memory(scope, "mem_a") == cleared


def test_an_older_sqlite_store_migrates(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "old.db"
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS",
                        {v: m for v, m in sqlite_schema.MIGRATIONS.items() if v < 15})
    old_store = SQLiteStore(f"sqlite:///{path}")
    with old_store._write() as db:  # as the code before version 15 wrote rows
        db.execute("INSERT INTO memories (id, tenant, agent, type, content, tags, created, "
                   "updated) VALUES ('mem_old', 'alice', 'helper', 'sticky', ?, '', 0, 5)",
                   (WINDOW_SEATS,))
    old_store.close()
    monkeypatch.undo()
    store = SQLiteStore(f"sqlite:///{path}")
    try:
        old = store.get_memory(Scope("alice", "helper"), "mem_old")
        assert old is not None and old.content == WINDOW_SEATS
        assert old.confirmed_at is None and old.superseded_by is None
        assert old.last_confirmed == old.updated_at
    finally:
        store.close()


@pytest.mark.parametrize(("new", "old", "value"), [
    (PAGE_220, PAGE_200, True),  # the structure: same subject, a number changed
    ("By the way, I've been sticking to my daily tidying routine for 4 weeks now",
     "I've been sticking to my daily tidying routine - it's already been 3 weeks!", True),
    ("User: I'm Maya, a backend engineer in Lisbon.",
     "The user is Maya, a backend engineer in Lisbon.", False),  # reworded only
    ("I have a total of 37 coins in that collection",
     "I have a total of 37 pre-1920 American coins", False),
])
def test_a_new_value_or_a_rewording(new: str, old: str, value: bool) -> None:
    assert gives_new_value(new, old) is value
