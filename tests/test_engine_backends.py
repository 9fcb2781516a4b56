"""The engine end to end on every backend (``store_url``): the same facade, retriever,
fusion, compiler and compaction over SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from loci import Loci
from tests.compaction.test_compaction import SMALL_WINDOW, chat
from tests.conftest import FakeClock

pytestmark = pytest.mark.loci_settings(**SMALL_WINDOW, compaction_auto=False)


def test_hybrid_search_finds_facts_on_every_backend(engine: Loci) -> None:
    engine.remember("The tide station 9414290 is in San Francisco", tags=["tides"])
    engine.remember("Maya prefers short answers", type="user_preference")
    engine.remember("Deploys happen on Fridays after the standup")
    hits = engine.search("which tide station is in San Francisco?")
    assert hits[0].text.startswith("The tide station")
    assert all(0 <= h.score <= 1 for h in hits)
    assert engine.search("Maya answers", limit=1)[0].text == "Maya prefers short answers"


def test_conversation_compile_and_compaction_on_every_backend(
    engine: Loci, clock: FakeClock
) -> None:
    engine.add("s", "user", "Remember that the deploy key lives in vault path secret/app.")
    chat(engine, 12, big=600)
    hits = engine.search_conversation("where does the deploy key live", session="s")
    assert "vault path secret/app" in hits[0].text
    before = engine.session("s")
    result = engine.compact("s")
    assert result.strategy == "summary" and result.archived > 0
    after = engine.session("s")
    assert after.event_count == before.event_count + 1  # only the summary was added
    assert after.active_token_count == result.tokens_after < before.active_token_count
    # Archived events stay searchable.
    assert "vault path" in engine.search_conversation("deploy key vault", session="s")[0].text
    compiled = engine.compile("s", "Where is the deploy key?")
    assert compiled.total_tokens <= compiled.budget
    assert len(engine.compactions("s")) == 1


def test_time_never_runs_backwards_in_a_session_on_every_backend(
    engine: Loci, clock: FakeClock
) -> None:
    first = engine.add("s", "user", "first")
    clock.advance(seconds=-30)  # a writer that read the clock earlier commits later
    late = engine.add("s", "user", "second")
    assert late.timestamp == first.timestamp and late.id > first.id
    older = first.timestamp.replace(year=2020)  # a time the caller gives is kept as given
    given = engine.add_event("s", type="message", role="user", content="x", timestamp=older)
    assert given.timestamp == older
    assert [e.timestamp for e in engine.events("s")] == [first.timestamp] * 2 + [older]
    assert engine.add("other", "user", "x").timestamp == clock.now  # per session


def test_an_exported_log_imports_as_it_was_on_every_backend(
    engine: Loci, clock: FakeClock
) -> None:
    """`loci export` then `loci import` gives back the session the model saw: what
    compaction archived stays archived, its summary stays the summary."""
    engine.add("s", "user", "Remember that the deploy key lives in vault path secret/app.")
    chat(engine, 12, big=600)
    engine.compact("s")
    lines = list(engine.export_jsonl("s"))
    assert sum('"archived": true' in line for line in lines) > 0
    copied = engine.import_jsonl(lines, "copy")
    original = engine.events("s")
    assert [(e.type, e.content, e.archived) for e in copied] == [
        (e.type, e.content, e.archived) for e in original]
    assert engine.session("copy").active_token_count == engine.session("s").active_token_count
    question = "Where is the deploy key?"
    assert _shown(engine.compile("copy", question)) == _shown(engine.compile("s", question))
    assert engine.import_jsonl(lines, "copy") == []  # a second import adds nothing


def test_a_call_without_arguments_reads_back_and_exports_as_sent_on_every_backend(
    engine: Loci,
) -> None:
    """``args={}`` (a tool that takes none) is not an absent ``args``: it reads back,
    exports and imports as ``{}``."""
    engine.add_event("s", type="tool_call", tool_name="ls", tool_call_id="c1", args={})
    engine.add_event("s", type="tool_call", tool_name="ls", tool_call_id="c2")
    assert [e.args for e in engine.events("s")] == [{}, None]
    lines = list(engine.export_jsonl("s"))
    assert '"args": {}' in lines[0] and '"args"' not in lines[1]
    assert [e.args for e in engine.import_jsonl(lines, "copy")] == [{}, None]
    assert [e.args for e in engine.events("copy")] == [{}, None]


def test_calls_at_once_bringing_the_same_messages_record_them_once_on_every_backend(
    engine: Loci,
) -> None:
    """A client's parallel first calls import the history once; parallel calls with the
    same tool results record the call and its result once."""
    history = [{"role": "user", "content": "I'm Ana."}, {"role": "assistant", "content": "Hi."}]
    results = [{"role": "user", "content": "Weather?"},
               {"role": "assistant", "content": None, "tool_calls": [{
                   "id": "c1", "type": "function",
                   "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "-5°C"}]
    for session, messages in (("new", None), ("tools", results)):
        start = threading.Barrier(6)

        def call(i: int, session: str = session, messages: Any = messages,
                 start: threading.Barrier = start) -> None:
            start.wait()
            engine.turn(session, messages or [*history, {"role": "user", "content": f"Q{i}"}])

        with ThreadPoolExecutor(6) as pool:
            list(pool.map(call, range(6)))
    assert [e.content for e in engine.events("new")] == ["I'm Ana.", "Hi."]
    assert [e.type for e in engine.events("tools")] == ["message", "tool_call", "tool_result"]


def _shown(compiled: object) -> tuple[str, list[object]]:
    """What the model sees of a session: its summary and its history."""
    return compiled.dynamic, compiled.history  # type: ignore[attr-defined]


def test_a_hit_says_what_its_turn_shared_on_every_backend(engine: Loci) -> None:
    engine.add("s", "user", "They made this!", caption="a cup with a dog face")
    engine.add("s", "user", "A plain turn about a cup.")
    engine.wait_indexed()
    hits = {h.text: h for h in engine.search_conversation("cup dog face", session="s")}
    assert hits["They made this!"].metadata["caption"] == ["a cup with a dog face"]
    assert "caption" not in hits["A plain turn about a cup."].metadata
