"""Long agent sessions: a tool loop inside one turn is cut and compacted by steps, its
task stays in every context, and the offline summary keeps the trail."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loci import Loci, load_settings
from loci.context.layers import DEFAULT_LAYERS
from loci.context.render import NO_RESULT, events_to_messages
from loci.models import Event
from tests.conftest import FakeClock, open_loci

WINDOW = {"agent": 8_000}
AGENT: dict[str, object] = {"model": "agent", "models": WINDOW}
TASK = "Fix the crash when a PersonName is iterated; see pydicom/valuerep.py."


def tool_loop(loci: Loci, steps: int, session: str = "s", output: int = 600) -> None:
    """An agent's turn: the task, then ``steps`` shell calls each with its result."""
    loci.add(session, "user", TASK)
    for i in range(steps):
        command = f"grep -n 'def __iter__' pydicom/module_{i}.py"
        loci.add_event(session, type="tool_call", tool_name="bash", tool_call_id=f"c{i}",
                       content=f"Looking at module {i}.", args={"command": command})
        body = f"<returncode>{i % 2}</returncode>\n" + f"line {i} of output " * (output // 18)
        if i == 3:
            body += "\nTypeError: argument of type 'PersonName3' is not iterable"
        loci.add_event(session, type="tool_result", tool_call_id=f"c{i}", content=body)


def pairs_intact(history: list[dict[str, Any]]) -> bool:
    calls = [c["id"] for m in history for c in m.get("tool_calls") or ()]
    results = [m["tool_call_id"] for m in history if m["role"] == "tool"]
    return calls == results


def test_a_tool_loop_over_budget_keeps_its_task_and_newest_steps(
        home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **AGENT, compaction_auto=False) as loci:
        tool_loop(loci, 60)
        compiled = loci.compile("s", None)
        history = compiled.history
        assert history[0] == {"role": "user", "content": TASK}
        assert history[-1]["role"] == "tool" and history[-1]["tool_call_id"] == "c59"
        assert 10 < len(history) < 120 and pairs_intact(history)
        report = next(r for r in compiled.layers if r.name == "history")
        assert report.included[0].startswith("the current task (event 1)")
        assert "older step(s)" in report.dropped[0][0]


def test_a_huge_task_keeps_its_head_and_tail(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **AGENT, compaction_auto=False,
                   context_budgets={"history": 1_000}) as loci:
        task = loci.add("s", "user", "START " + "detail " * 5_000 + " END")
        loci.add_event("s", type="tool_call", tool_name="bash", tool_call_id="c1",
                       args={"command": "ls"})
        loci.add_event("s", type="tool_result", tool_call_id="c1", content="setup.py")
        history = loci.compile("s", None).history
        pinned = history[0]["content"]
        assert pinned.startswith("START ") and pinned.endswith(" END")
        assert f"the whole text is event {task.id}" in pinned
        assert [m["role"] for m in history] == ["user", "assistant", "tool"]


def test_one_oversized_step_is_shortened_not_dropped(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **AGENT, compaction_auto=False,
                   context_budgets={"history": 600}) as loci:
        loci.add_event("s", type="tool_call", tool_name="bash", tool_call_id="c1",
                       args={"command": "cat big.log"})
        loci.add_event("s", type="tool_result", tool_call_id="c1", content="x " * 20_000)
        history = loci.compile("s", None).history
        assert [m["role"] for m in history] == ["assistant", "tool"]
        assert "characters left out here" in history[1]["content"]


def test_a_tool_loop_compacts_inside_its_turn(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **AGENT) as loci:
        tool_loop(loci, 40)
        compiled = loci.compile("s", None)
        [compaction] = loci.compactions("s")
        events = {e.id: e for e in loci.events("s")}
        assert not events[1].archived  # the task stays live
        assert sum(e.archived for e in events.values()) > 20
        assert compiled.history[0] == {"role": "user", "content": TASK}
        assert pairs_intact(compiled.history)
        summary = compiled.dynamic
        assert "## Commands" in summary and "## Files" in summary
        assert "`grep -n 'def __iter__' pydicom/module_3.py` → exit 1: TypeError" in summary
        assert "TypeError: argument of type 'PersonName3' is not iterable" in summary
        assert "pydicom/module_0.py" in summary  # the oldest file, read and archived
        assert compaction.summary.splitlines()[:3] == summary.split(
            "[CONTEXT SUMMARY]\n")[1].splitlines()[:3]


def test_a_summary_too_big_for_its_budget_is_shortened(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **AGENT) as loci:
        tool_loop(loci, 40)
        loci.compile("s", None)
        small = loci.for_scope()
        small.settings = small.settings.with_overrides(
            context_budgets={"compaction_summary": 80})
        dynamic = small.compile("s", None).dynamic
        assert "[CONTEXT SUMMARY]" in dynamic
        assert "shortened to fit; search_conversation finds the rest" in dynamic


def test_tool_arguments_are_searchable_and_counted(loci: Loci) -> None:
    loci.add("s", "user", "Where is the iterator defined?")
    call = loci.add_event("s", type="tool_call", tool_name="bash", tool_call_id="call_1",
                          args={"command": "grep -rn '__iter__' pydicom/valuerep.py"})
    hits = loci.search_conversation("valuerep.py", session="s")
    assert hits and hits[0].id == str(call.id)
    bare = loci.add_event("s", type="tool_call", tool_name="bash", args={})
    assert call.tokens >= bare.tokens + loci.counter.count("grep -rn '__iter__' "
                                                          "pydicom/valuerep.py")


def test_recall_brings_back_an_archived_turn(home: Path, clock: FakeClock) -> None:
    # Without the summary and memory layers, which would state the fact itself (the
    # compaction saves it as a memory; recall then leaves it out: see
    # test_recall_does_not_repeat_the_summary).
    layers = [layer.name for layer in DEFAULT_LAYERS
              if layer.name not in ("compaction_summary", "sticky", "memories")]
    settings = load_settings(store=f"sqlite:///{home / 'r.db'}", model="agent",
                             models=WINDOW, compaction_preserve_messages=2,
                             context_layers=layers)
    with Loci(settings, clock=clock) as loci:
        loci.add("chat", "user", "I adopted a greyhound called Biscuit last spring.",
                 name="Ana")
        for i in range(60):
            loci.add("chat", "user", f"Let's talk about topic {i}: " + "words " * 60)
            loci.add_reply("chat", f"Sure, topic {i} is interesting. " + "more " * 60)
        loci.compact("chat")
        first = loci.events("chat")[0]
        assert first.archived
        compiled = loci.compile("chat", "What is my greyhound called?")
        assert "Biscuit" not in "".join(str(m["content"]) for m in compiled.history)
        assert "this session, 15 January 2026]\nAna: I adopted a greyhound called Biscuit" in (
            compiled.retrieved)
        report = next(r for r in compiled.layers if r.name == "recall")
        assert any(i.startswith(f"event {first.id} (score ") for i in report.included)
        nothing = loci.compile("chat", "Zxqv?")
        assert "[RECALL" not in nothing.retrieved


def test_recall_does_not_repeat_the_summary(home: Path, clock: FakeClock) -> None:
    settings = load_settings(store=f"sqlite:///{home / 'r.db'}", model="agent",
                             models=WINDOW, compaction_preserve_messages=2)
    with Loci(settings, clock=clock) as loci:
        loci.add("chat", "user", "I adopted a greyhound called Biscuit last spring.",
                 name="Ana")
        for i in range(60):
            loci.add("chat", "user", f"Let's talk about topic {i}: " + "words " * 60)
            loci.add_reply("chat", f"Sure, topic {i} is interesting. " + "more " * 60)
        loci.compact("chat")
        compiled = loci.compile("chat", "What is my greyhound called?")
        assert "Ana: I adopted a greyhound called Biscuit" in compiled.dynamic  # summary
        assert compiled.to_text().count("called Biscuit") == 1


def test_history_says_when_each_day_began(loci: Loci, clock: FakeClock) -> None:
    loci.add("s", "user", "I adopted Biscuit today.")
    loci.add("s", "assistant", "Congratulations!")
    clock.advance(days=3)
    loci.add("s", "user", "Biscuit learned to sit.")
    history = loci.compile("s", "How is Biscuit?").history
    first_day = f"[{clock.now.day - 3} {clock.now:%B %Y}] "  # the fake clock starts mid-month
    assert [m["content"] for m in history] == [
        first_day + "I adopted Biscuit today.", "Congratulations!",
        f"[{clock.now.day} {clock.now:%B %Y}] Biscuit learned to sit."]
    assert loci.events("s")[0].content == "I adopted Biscuit today."  # stored unchanged
    clock.advance(hours=1)
    loci.add("s", "assistant", "Good dog.")
    assert loci.compile("s", "And now?").history[-1]["content"] == "Good dog."


def test_the_room_a_call_has_left_shows_the_trail_beyond_the_summary(
        home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **AGENT, context_budgets={"compaction_summary": 120}) as loci:
        tool_loop(loci, 40)
        loci.compile("s", None)
        summary = next(e for e in loci.events("s", include_archived=True)
                       if e.type == "summary")
        kept = summary.metadata["trail"]
        assert all(f"pydicom/module_{i}.py`" in kept for i in range(20))  # none cut
        compiled = loci.compile("s", "Continue the task.")
        shown, earlier = compiled.dynamic, compiled.retrieved
        assert "shortened to fit" in shown
        assert "[EARLIER IN THIS SESSION: Commands]" in earlier
        # What the summary could not show is there, once, in the order it happened.
        lines = [line for line in earlier.splitlines() if "grep -n 'def __iter__'" in line]
        assert len(lines) > 10 and not any(line in shown for line in lines)
        numbers = [int(line.split("module_")[1].split(".")[0]) for line in lines]
        assert numbers == sorted(numbers)
        report = next(r for r in compiled.layers if r.name == "earlier_trail")
        assert report.used > 0 and compiled.total_tokens <= compiled.budget
        # With less room (a longer message) the newest lines win.
        filler = " word" * (compiled.budget - compiled.total_tokens + report.used // 2)
        tight = loci.compile("s", "Continue the task." + filler)
        tight_lines = [line for line in tight.retrieved.splitlines() if "module_" in line]
        assert 0 < len(tight_lines) < len(lines)
        assert max(n for n in numbers) == max(
            int(line.split("module_")[1].split(".")[0]) for line in tight_lines)


def test_a_second_compaction_continues_the_whole_trail(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **AGENT) as loci:
        tool_loop(loci, 40)
        loci.compile("s", None)
        for i in range(40, 80):
            loci.add_event("s", type="tool_call", tool_name="bash", tool_call_id=f"d{i}",
                           args={"command": f"pytest tests/test_{i}.py"})
            loci.add_event("s", type="tool_result", tool_call_id=f"d{i}",
                           content="<returncode>0</returncode>\n" + "passed " * 100)
        loci.compile("s", None)
        assert len(loci.compactions("s")) == 2
        latest = [e for e in loci.events("s", include_archived=True) if e.type == "summary"][-1]
        kept = latest.metadata["trail"]
        assert "pydicom/module_0.py" in kept and "TypeError: argument of type" in kept
        assert "`pytest tests/test_40.py` → exit 0" in kept


def test_a_narrower_view_summarizes_for_itself_and_stores_nothing(
        home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **AGENT, compaction_auto=False) as loci:
        tool_loop(loci, 30)
        before = [(e.id, e.archived, e.content) for e in loci.events("s", include_archived=True)]
        view = loci.compile("s", "Continue the task.", window=3_000)
        assert view.total_tokens <= view.budget <= 3_000
        assert "[CONTEXT SUMMARY]" in view.dynamic  # made for this call, with its trail
        shown = view.dynamic + view.retrieved
        assert "`grep -n 'def __iter__' pydicom/module_0.py` → exit 0" in shown
        assert "TypeError: argument of type 'PersonName3' is not iterable" in shown
        report = next(r for r in view.layers if r.name == "compaction_summary")
        assert "made for this call" in report.included[0]
        # ...and nothing of it stored: same events, no compaction, no summary event.
        after = [(e.id, e.archived, e.content) for e in loci.events("s", include_archived=True)]
        assert after == before and loci.compactions("s") == []
        whole = loci.compile("s", "Continue the task.")
        assert "[CONTEXT SUMMARY]" not in whole.dynamic
        assert view.history[-1] == whole.history[-1] and pairs_intact(view.history)


def test_a_call_whose_result_was_never_recorded_is_answered(loci: Loci) -> None:
    """An agent killed while its tools ran left calls without results; the next
    contexts answer each one (a provider refuses a call without its result), in place,
    and a result of no open call is the user's text as before."""
    loci.add_events("s", [
        {"type": "message", "role": "user", "content": "Check both files."},
        {"type": "tool_call", "tool_name": "read", "tool_call_id": "a", "args": {"p": "x"}},
        {"type": "tool_call", "tool_name": "read", "tool_call_id": "b", "args": {"p": "y"}},
        {"type": "tool_result", "tool_call_id": "b", "content": "y holds 2"},
        {"type": "message", "role": "user", "content": "Still there?"},
        {"type": "tool_call", "tool_name": "grep", "tool_call_id": "c"},
        {"type": "tool_result", "tool_call_id": "z", "content": "stray"}])
    messages = loci.compile("s", "And now?").to_openai()
    roles = [(m["role"], m.get("tool_call_id")) for m in messages if m["role"] != "system"]
    assert roles == [("user", None), ("assistant", None), ("tool", "b"), ("tool", "a"),
                     ("user", None), ("assistant", None), ("tool", "c"), ("user", None),
                     ("user", None)]
    answers = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert answers == {"b": "y holds 2", "a": NO_RESULT, "c": NO_RESULT}


def test_a_call_id_used_again_is_shown_once_with_each_result_its_own(loci: Loci) -> None:
    """Upstreams that number calls per answer say ``call_0`` every turn, and an agent
    may send two calls of one id in one turn: providers refuse a repeated id, so each
    id after the first is made unique, and the result that answers it follows it."""
    loci.add_events("s", [
        {"type": "message", "role": "user", "content": "Weather in Paris and Rome?"},
        {"type": "tool_call", "tool_name": "weather", "tool_call_id": "call_0",
         "args": {"city": "Paris"}},
        {"type": "tool_call", "tool_name": "weather", "tool_call_id": "call_0",
         "args": {"city": "Rome"}},
        {"type": "tool_result", "tool_call_id": "call_0", "content": "Paris: sun"},
        {"type": "tool_result", "tool_call_id": "call_0", "content": "Rome: rain"},
        {"type": "message", "role": "user", "content": "And Oslo?"},
        {"type": "tool_call", "tool_name": "weather", "tool_call_id": "call_0",
         "args": {"city": "Oslo"}},
        {"type": "tool_result", "tool_call_id": "call_0", "content": "Oslo: snow"}])
    compiled = loci.compile("s", "Thanks.")
    chat = compiled.to_openai()
    calls = [(c["id"], c["function"]["arguments"]) for m in chat for c in m.get("tool_calls", ())]
    results = {m["tool_call_id"]: m["content"] for m in chat if m["role"] == "tool"}
    assert len({call_id for call_id, _ in calls}) == 3 == len(results)
    assert [results[call_id] for call_id, _ in calls] == ["Paris: sun", "Rome: rain",
                                                          "Oslo: snow"]
    assert calls[0][0] == "call_0" and all('"city"' in arguments for _, arguments in calls)
    uses = [b["id"] for m in compiled.to_anthropic()["messages"]
            if isinstance(m["content"], list)
            for b in m["content"] if b["type"] == "tool_use"]
    assert uses == [call_id for call_id, _ in calls]


def test_an_id_made_unique_is_never_one_shown_before_nor_too_long() -> None:
    """``x_6`` made from ``x`` of event 6 must not repeat a call of its own id ``x_6``;
    a long id made unique stays within the 40 characters OpenAI takes."""
    def event(n: int, kind: str, call_id: str) -> Event:
        role = "assistant" if kind == "tool_call" else "tool"
        return Event(n, "s", kind, role, "out" if kind == "tool_result" else "",
                     datetime(2026, 1, 1, tzinfo=UTC), 1, "f", call_id)
    long = "toolu_" + "a" * 34
    events = [event(2, "tool_call", "x_6"), event(3, "tool_result", "x_6"),
              event(5, "tool_call", "x"), event(6, "tool_call", "x"),
              event(7, "tool_result", "x"), event(8, "tool_result", "x"),
              event(9, "tool_call", long), event(10, "tool_result", long),
              event(11, "tool_call", long), event(12, "tool_result", long)]
    calls = [c["id"] for m in events_to_messages(events) for c in m.get("tool_calls", ())]
    assert len(set(calls)) == len(calls) == 5 and all(len(c) <= 40 for c in calls)
    answered = [m["tool_call_id"] for m in events_to_messages(events) if m["role"] == "tool"]
    assert answered == calls
