"""``LociMemoryService`` (``loci.integrations.adk_memory``) against what a real ADK app
can hand it: the same session added by several tasks or processes at once, events with
times no date holds, text with unpaired surrogates and tool arguments that are no JSON.
Each ADK event is recorded once, and one bad event never keeps the others out."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from loci import Loci, Runtime, ValidationError
from loci.integrations.adk_memory import ADK_ID, LociMemoryService
from tests.at_once import run_at_once
from tests.conftest import FakeClock

pytestmark = pytest.mark.loci_settings(memory_mirror=False, memory_extraction=False)


def said(author: str, text: str, **fields: Any) -> Event:
    return Event(author=author, invocation_id="turn", content=types.Content(
        role="user" if author == "user" else "model", parts=[types.Part(text=text)]),
        **fields)


def called(args: dict[str, Any], **fields: Any) -> Event:
    return Event(author="helper", invocation_id="turn", content=types.Content(
        role="model", parts=[types.Part(function_call=types.FunctionCall(
            name="lookup", args=args, id="call-1"))]), **fields)


def session(name: str, events: list[Event]) -> Session:
    return Session(id=name, app_name="helper", user_id="maya", events=events)


def add(memory: LociMemoryService, *sessions: Session) -> None:
    async def go() -> None:
        await asyncio.gather(*(memory.add_session_to_memory(s) for s in sessions))
    asyncio.run(go())


def recorded(runtime: Runtime, name: str) -> list[tuple[str, str]]:
    return [(e.type, e.content) for e in runtime.scope("maya", "helper").events(name)]


def test_adds_of_one_session_at_once_record_each_event_once(runtime: Runtime) -> None:
    memory = LociMemoryService(runtime)
    turns = session("busy", [said("user", f"turn {n}") for n in range(30)])
    # Hold the store's writers' lock while five adds start: each reads the empty session
    # before any can write, which is when unlocked adds all appended every event.
    lock = runtime.store.local_lock()
    assert lock is not None
    with lock:
        adding = threading.Thread(target=add, args=(memory, *[turns] * 5))
        adding.start()
        time.sleep(0.5)
    adding.join(timeout=60)
    assert recorded(runtime, "busy") == [("message", f"turn {n}") for n in range(30)]
    # Again, with one new event: only it is added.
    turns.events.append(said("helper", "Noted."))
    add(memory, turns, turns, turns)
    assert len(recorded(runtime, "busy")) == 31


def test_adding_what_is_recorded_takes_no_lock(runtime: Runtime) -> None:
    memory = LociMemoryService(runtime)
    turns = session("quiet", [said("user", f"turn {n}") for n in range(10)])
    add(memory, turns)
    lock = runtime.store.local_lock()
    assert lock is not None
    with lock:  # a write elsewhere in this process: ADK's add of old events waits not
        adding = threading.Thread(target=add, args=(memory, turns))
        adding.start()
        adding.join(timeout=10)
        assert not adding.is_alive()
    assert len(recorded(runtime, "quiet")) == 10


def test_many_sessions_added_at_once_keep_one_copy_each(runtime: Runtime) -> None:
    memory = LociMemoryService(runtime)
    sessions = [session(f"s{k}", [said("user", f"turn {n} of {k}") for n in range(20)])
                for k in range(8)]
    add(memory, *[s for s in sessions for _ in range(4)])
    for k in range(8):
        assert recorded(runtime, f"s{k}") == [
            ("message", f"turn {n} of {k}") for n in range(20)]


CHILD = """
import asyncio
from google.adk.events.event import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types
from loci import Runtime, load_settings
from loci.integrations.adk_memory import LociMemoryService
url, home = sys.argv[3:5]
events = [Event(id=f"e{n}", author="user", invocation_id="turn", timestamp=1.7e9 + n,
                content=types.Content(role="user", parts=[types.Part(text=f"turn {n}")]))
          for n in range(40)]
busy = Session(id="busy", app_name="helper", user_id="maya", events=events)
with Runtime(load_settings(store=url, home=home, embedding_provider="hash",
                           memory_mirror=False, memory_extraction=False)) as runtime:
    memory = LociMemoryService(runtime)
    runtime.scope("maya", "helper").add("warm-up", "user", "warm-up of this process")
    wait_for_go()
    async def main():
        await asyncio.gather(*(memory.add_session_to_memory(busy) for _ in range(3)))
    asyncio.run(main())
"""


def test_processes_adding_one_session_record_each_event_once(
        store_url: str, tmp_path: Path) -> None:
    run_at_once(CHILD, [[store_url, str(tmp_path / f"home{n}")] for n in range(3)], tmp_path)
    with Loci.open(store=store_url, home=str(tmp_path / "reader"), user="maya",
                   agent="helper", embedding_provider="hash", memory_mirror=False) as loci:
        events = loci.events("busy")
    assert [e.metadata[ADK_ID] for e in events] == [f"e{n}" for n in range(40)]


def test_a_time_no_date_holds_is_recorded_as_now(runtime: Runtime, clock: FakeClock
                                                 ) -> None:
    memory = LociMemoryService(runtime)
    times = {"far future": 1e15, "far past": -1e12, "not a number": float("nan"),
             "infinite": float("inf"), "last second of 9999": 253402300799.0}
    events = [said("user", text, timestamp=seconds) for text, seconds in times.items()]
    events.append(said("user", "on time", timestamp=1.7e9))
    add(memory, session("odd-times", events))
    add(memory, session("odd-times", events))  # still each once
    stored = {e.content: e.timestamp for e in runtime.scope("maya", "helper").events(
        "odd-times")}
    assert stored == {**dict.fromkeys(times, clock.now),
                      "on time": datetime.fromtimestamp(1.7e9, UTC)}


def test_one_bad_event_never_keeps_the_others_out(
        runtime: Runtime, caplog: pytest.LogCaptureFixture) -> None:
    memory = LociMemoryService(runtime)
    events = [
        said("user", "My dog is called Rex."),
        said("user", "a broken \ud800 character"),
        said("user", "a pair in halves: \ud83d\ude00"),
        said("helper\udc00", "an odd speaker"),
        called({"city\udfff": "Lisbon \ud800"}),
        called({"ratio": float("nan")}),  # no JSON: left out
        said("helper", "Rex is a good name."),
    ]
    bad = events[5].id
    with caplog.at_level(logging.WARNING, logger="loci.integrations.adk_memory"):
        add(memory, session("mixed", events))
        add(memory, session("mixed", events))
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and bad in warned[0] and "finite" in warned[0]

    loci = runtime.scope("maya", "helper")
    stored = loci.events("mixed")
    assert [(e.type, e.content) for e in stored if e.type == "message"] == [
        ("message", "My dog is called Rex."),
        ("message", "a broken \ufffd character"),
        ("message", "a pair in halves: \U0001f600"),
        ("message", "an odd speaker"),
        ("message", "Rex is a good name.")]
    assert stored[3].metadata["name"] == "helper\ufffd"
    [call] = [e for e in stored if e.type == "tool_call"]
    assert call.args == {"city\ufffd": "Lisbon \ufffd"}
    assert bad not in {e.metadata[ADK_ID].split("/")[0] for e in stored}

    # The session is not stuck: what ADK adds later is recorded.
    events.append(said("user", "Thanks!"))
    add(memory, session("mixed", events))
    assert loci.events("mixed")[-1].content == "Thanks!"
    assert len(loci.events("mixed")) == len(stored) + 1
    found = asyncio.run(memory.search_memory(app_name="helper", user_id="maya",
                                             query="dog Rex"))
    assert any(part.text == "My dog is called Rex."
               for m in found.memories for part in m.content.parts or ())


def test_an_event_id_with_a_lone_surrogate_is_recorded_once(runtime: Runtime) -> None:
    memory = LociMemoryService(runtime)
    events = [said("user", "hello", id="odd\ud800id")]
    for _ in range(3):
        add(memory, session("odd-id", events))
    [event] = runtime.scope("maya", "helper").events("odd-id")
    assert event.metadata[ADK_ID] == "odd\ufffdid"


def test_a_bad_session_name_is_the_callers_error(runtime: Runtime) -> None:
    memory = LociMemoryService(runtime)
    with pytest.raises(ValidationError, match="session"):
        add(memory, session("../escape", [said("user", "hi")]))


def test_facts_added_together_are_all_kept_whatever_one_holds(runtime: Runtime) -> None:
    """A lone surrogate in one entry, or one of spaces, left the entries after it
    unsaved (the ones before were saved): each is repaired or passed over."""
    memory = LociMemoryService(runtime)
    texts = ["Maya likes tea", "Maya's cat is called Ol\ud800ga", "   ",
             "Maya runs on Sundays"]
    entries = [MemoryEntry(content=types.Content(role="user", parts=[types.Part(text=t)]))
               for t in texts]
    asyncio.run(memory.add_memory(app_name="helper", user_id="maya", memories=entries))
    kept = sorted(m.content for m in runtime.scope("maya", "helper").memories())
    assert kept == sorted(["Maya likes tea", "Maya's cat is called Ol\ufffdga",
                           "Maya runs on Sundays"])
