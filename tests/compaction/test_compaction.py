from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loci import Loci, load_settings
from loci.compaction.masking import PLACEHOLDER
from loci.compaction.policy import Decision, decide, preserve_tokens
from loci.compaction.summarize import ChatSummarizer
from loci.settings import CompactionSettings
from loci.testing import ScriptedChatModel
from tests.conftest import FakeClock, open_loci

TINY = {"tiny": 4_000}
#: A window of 4,000 tokens that keeps its last 4 messages (or 10%) when compacted.
SMALL_WINDOW: dict[str, object] = {"model": "tiny", "models": TINY,
                                   "compaction_preserve_messages": 4,
                                   "compaction_preserve_share": 0.1}


def chat(loci: Loci, turns: int, session: str = "s", big: int = 0, start: int = 0) -> None:
    for i in range(start, start + turns):
        loci.add(session, "user", f"Turn {i}: please look at file{i}.txt")
        loci.add_event(session, type="tool_call", tool_name="read_file", tool_call_id=f"c{i}",
                       args={"path": f"file{i}.txt"})
        body = f"contents of file{i}: " + ("lorem ipsum dolor " * (big // 18 + 1))[:big]
        loci.add_event(session, type="tool_result", tool_call_id=f"c{i}", content=body)
        loci.add(session, "assistant", f"File {i} looks fine.")


def test_policy_thresholds() -> None:
    p = CompactionSettings(sleep=0.5)
    assert decide(p, 740, 1000) is Decision.NONE
    assert decide(p, 750, 1000) is Decision.COMPACT
    assert decide(p, 790, 1000, before_compile=True) is Decision.NONE
    assert decide(p, 800, 1000, before_compile=True) is Decision.EMERGENCY
    assert decide(p, 500, 1000, idle_seconds=599) is Decision.NONE
    assert decide(p, 500, 1000, idle_seconds=600) is Decision.SLEEP
    off = CompactionSettings(auto=False)
    assert decide(off, 849, 1000) is Decision.NONE
    assert decide(off, 850, 1000) is Decision.FLUSH
    assert decide(off, 1000, 1000) is Decision.TRUNCATE
    assert preserve_tokens(p, 128_000) == 25_600
    # By default an idle session is compacted from 35%: its prompt cache is cold anyway.
    idle = CompactionSettings()
    assert decide(idle, 349, 1000, idle_seconds=600) is Decision.NONE
    assert decide(idle, 350, 1000, idle_seconds=600) is Decision.SLEEP
    assert decide(idle, 350, 1000, idle_seconds=599) is Decision.NONE


def test_full_compaction_summarizes_archives_and_loses_nothing(home: Path, clock: FakeClock
                                                               ) -> None:
    with open_loci(home, clock, **SMALL_WINDOW, compaction_auto=False) as loci:
        loci.add("s", "user", "Remember that the deploy key lives in vault path secret/app.")
        chat(loci, 12, big=600)
        before = loci.session("s")
        result = loci.compact("s")
        assert result.strategy == "summary" and result.archived > 0
        assert result.tokens_after < before.active_token_count
        after = loci.session("s")
        assert after.event_count == before.event_count + 1  # only the summary was added
        assert after.active_token_count == result.tokens_after
        events = loci.events("s")
        summary = next(e for e in events if e.type == "summary")
        assert summary.content.startswith("[CONTEXT SUMMARY]\n")
        assert summary.metadata["compacted_count"] == result.archived
        assert {"compacted_at", "original_token_count", "summary_token_count"} <= set(
            summary.metadata)
        # Archived, never deleted: every original event is still searchable.
        assert all(loci.search_conversation(f"file{i}.txt") for i in range(12))
        assert any(e.archived for e in events)
        memories = [m.content for m in loci.memories()]
        assert any("secret/app" in m for m in memories)  # flushed to memory first
        compiled = loci.compile("s", "what next?")
        assert "[CONTEXT SUMMARY]" in compiled.dynamic
        (record,) = loci.compactions("s")
        assert record.summary_event_id == summary.id and record.tokens_before > record.tokens_after


def test_masking_only_keeps_recent_turns_and_makes_artifacts(home: Path, clock: FakeClock
                                                             ) -> None:
    with open_loci(home, clock, **SMALL_WINDOW, compaction_auto=False) as loci:
        chat(loci, 3, big=6_000)
        chat(loci, 3, big=300, start=3)
        result = loci.compact("s", strategy="mask")
        assert result.strategy == "mask" and result.archived == 0 and result.masked >= 1
        by_id = {e.id: e for e in loci.events("s")}
        masked = [e for e in by_id.values() if e.masked is not None]
        assert masked and all(e.content.startswith("contents of file") for e in masked)
        old = [e for e in masked if PLACEHOLDER in (e.masked or "")]
        assert old and all(f"event {e.id}" in (e.masked or "") for e in old)
        path = result.artifacts[0]
        document = loci.store.get_document(loci.scope, path)
        assert document is not None and len(document.content) > 6_000
        history = loci.compile("s", "next").history
        assert history[-1]["content"] == "File 5 looks fine."
        recent_tool = [m for m in history if m["role"] == "tool"][-1]
        assert PLACEHOLDER not in recent_tool["content"]  # recent turns are protected


def test_dry_run_changes_nothing(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **SMALL_WINDOW, compaction_auto=False) as loci:
        chat(loci, 10, big=500)
        before = [(e.id, e.archived, e.masked) for e in loci.events("s")]
        result = loci.compact("s", dry_run=True)
        assert result.dry_run and result.archived > 0
        assert [(e.id, e.archived, e.masked) for e in loci.events("s")] == before
        assert loci.compactions("s") == [] and loci.memories() == []


def test_auto_compaction_after_a_reply_and_repeated_compactions(home: Path, clock: FakeClock
                                                                ) -> None:
    with open_loci(home, clock, **SMALL_WINDOW) as loci:
        for round_ in range(12):
            chat(loci, 6, big=400, start=round_ * 6)
            loci.add_reply("s", f"Round {round_} done.")
        records = loci.compactions("s")
        assert len(records) >= 3
        live = loci.session("s").active_token_count
        assert live < 0.75 * TINY["tiny"]
        summaries = [e for e in loci.events("s") if e.type == "summary"]
        assert sum(not e.archived for e in summaries) == 1  # the latest folds the others in
        compiled = loci.compile("s", "status?")
        assert any("compacted" in w and "times" in w for w in compiled.warnings)


def test_emergency_compaction_before_compile(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **SMALL_WINDOW) as loci:
        chat(loci, 16, big=1200)  # add_event does not compact; compile must
        assert loci.session("s").active_token_count > 0.8 * TINY["tiny"]
        compiled = loci.compile("s", "go on")
        assert loci.compactions("s") and compiled.total_tokens <= compiled.budget


def test_compile_unless_compacting_leaves_compaction_to_compile(home: Path,
                                                               clock: FakeClock) -> None:
    with open_loci(home, clock, **SMALL_WINDOW) as loci:
        chat(loci, 16, big=1200)
        assert loci.compile_unless_compacting("s", "go on") is None
        assert loci.compactions("s") == []  # it only reads
        compiled = loci.compile("s", "go on")
        assert len(loci.compactions("s")) == 1
        quiet = loci.compile_unless_compacting("s", "go on")
        assert quiet is not None and quiet.to_dict() == compiled.to_dict()


def test_sleep_time_compaction_when_idle(home: Path, clock: FakeClock) -> None:
    # The whole window as the budget, so that the history budget lies above `sleep`.
    with open_loci(home, clock, **SMALL_WINDOW, context_target=1.0) as loci:
        chat(loci, 10, big=1000)
        share = loci.session("s").active_token_count / TINY["tiny"]
        assert 0.5 <= share < 0.75
        assert loci.maybe_compact("s") is None
        clock.advance(minutes=11)
        assert loci.maybe_compact("s") is not None


def test_memory_flush_prompt_when_auto_is_off(home: Path, clock: FakeClock) -> None:
    with open_loci(home, clock, **SMALL_WINDOW, compaction_auto=False) as loci:
        chat(loci, 10, big=1000)
        assert "[MEMORY FLUSH]" not in loci.compile("s", "next").retrieved
        chat(loci, 7, big=1200, start=10)
        assert 0.85 <= loci.session("s").active_token_count / TINY["tiny"] < 1
        assert "[MEMORY FLUSH]" in loci.compile("s", "next").retrieved


@st.composite
def sessions(draw: st.DrawFn) -> list[tuple[str, int]]:
    """Turns as (kind, size): plain exchanges, single and parallel tool calls."""
    return draw(st.lists(st.tuples(st.sampled_from(["chat", "tool", "tools"]),
                                   st.integers(10, 1500)), min_size=1, max_size=25))


@given(sessions())
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_tool_pairing_survives_compaction(tmp_path: Path, plan: list[tuple[str, int]]
                                          ) -> None:
    clock = FakeClock()
    db = tmp_path / f"p{abs(hash(tuple(plan)))}.db"
    with Loci(load_settings(store=f"sqlite:///{db}", home=tmp_path, model="tiny", models=TINY,
                            compaction_preserve_messages=2, compaction_preserve_share=0.05,
                            memory_mirror=False, embedding_provider="none"),
              clock=clock) as loci:
        for n, (kind, size) in enumerate(plan):
            loci.add("s", "user", f"turn {n}")
            calls = {"chat": 0, "tool": 1, "tools": 2}[kind]
            for c in range(calls):
                loci.add_event("s", type="tool_call", tool_name="t", tool_call_id=f"{n}-{c}")
            for c in range(calls):
                loci.add_event("s", type="tool_result", tool_call_id=f"{n}-{c}",
                               content="x" * size)
            loci.add("s", "assistant", f"answer {n}")
            if n % 5 == 4:
                loci.compact("s")
        for model in ("tiny", "gpt-4.1"):
            history = loci.compile("s", "next", model=model).history
            open_calls: set[str] = set()
            for message in history:
                if message.get("tool_calls"):
                    assert not open_calls
                    open_calls = {c["id"] for c in message["tool_calls"]}
                elif message["role"] == "tool":
                    open_calls.remove(message["tool_call_id"])
                else:
                    assert not open_calls, "a tool call lost its result"
            assert not open_calls


KILLER = """
import os, signal, sys
from loci import Loci, load_settings
loci = Loci(load_settings(store=sys.argv[1], home=sys.argv[2], model="tiny",
                          models={"tiny": 4000}, compaction_auto=False,
                          compaction_preserve_messages=4, compaction_preserve_share=0.1))
def die(statement):
    if statement.startswith("UPDATE events SET archived"):
        os.kill(os.getpid(), signal.SIGKILL)  # killed inside the compaction transaction
loci.store._db.set_trace_callback(die)
loci.compact("s")
"""


def test_killed_compaction_leaves_the_session_as_before(home: Path, clock: FakeClock) -> None:
    url = f"sqlite:///{home / 'loci.db'}"
    with open_loci(home, clock, **SMALL_WINDOW, compaction_auto=False) as loci:
        chat(loci, 12, big=600)
        before = [(e.id, e.archived, e.masked, e.tokens) for e in loci.events("s")]
    done = subprocess.run([sys.executable, "-c", KILLER, url, str(home)], timeout=120,
                          env={**os.environ, "LOCI_EMBEDDING_PROVIDER": "hash"})
    assert done.returncode == -signal.SIGKILL
    with open_loci(home, clock, **SMALL_WINDOW, compaction_auto=False) as loci:
        assert [(e.id, e.archived, e.masked, e.tokens) for e in loci.events("s")] == before
        assert loci.compactions("s") == []
        assert loci.compact("s").record is not None  # and it can run again


@pytest.mark.parametrize("args", [("compact", "s", "--dry-run"), ("compactions", "s")])
def test_cli(home: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    from loci.cli.app import main

    (home / "loci.toml").write_text('model = "tiny"\n[models]\ntiny = 4000\n'
                                    "[compaction]\nauto = false\npreserve_messages = 4\n")
    with Loci.open() as loci:
        chat(loci, 12, big=500)
    assert main([*args, "--model", "tiny"] if args[0] == "compact" else list(args)) == 0
    out = capsys.readouterr().out
    assert ("would compact s" in out) if args[0] == "compact" else ("no compactions" in out)


def test_a_chat_model_is_asked_for_the_trail_and_dated_facts(home: Path, clock: FakeClock
                                                           ) -> None:
    model = ScriptedChatModel(["## Commands\n- `ls` → exit 0"] * 3)
    summarizer = ChatSummarizer(model)
    with open_loci(home, clock, **SMALL_WINDOW) as loci:
        loci.add("s", "user", "Fix the build.", name="Ana")
        loci.add_event("s", type="tool_call", tool_name="bash", tool_call_id="c1",
                       args={"command": "make test"})
        loci.add_event("s", type="tool_result", tool_call_id="c1", content="error: x")
        assert summarizer.summarize(loci.events("s"), "## Files\n- Read: a.py") == (
            "## Commands\n- `ls` → exit 0")
    [request] = model.requests
    system, user = request[0]["content"], request[1]["content"]
    for section in ("Files", "Edits", "Errors", "Commands", "Decisions", "Facts",
                    "[8 May 2023] Name: fact", "lookup hints"):
        assert section in system
    assert "## Files\n- Read: a.py" in user  # the earlier summary, to merge
    assert f"[{clock.now:%Y-%m-%d %H:%M}] Ana: Fix the build." in user
    assert 'bash({"command":"make test"})' in user


def test_when_the_provider_clears_tool_uses_loci_masks_none_and_explain_says_who(
        home: Path, clock: FakeClock) -> None:
    edits = ["clear_tool_uses_20250919"]
    with open_loci(home, clock, **SMALL_WINDOW) as loci:
        # The proxy notes the client's edits with each call of the session.
        loci.compile("theirs", "start", provider_edits=edits)
        for session in ("theirs", "ours"):
            chat(loci, 10, session=session, big=600)
            loci.compact(session, strategy="mask")
        masked = loci.compile("ours", "next?").explain()
        for session in ("theirs", "ours"):
            loci.compact(session)  # and a summary
        theirs = loci.compile("theirs", "next?", provider_edits=edits)
        ours = loci.compile("ours", "next?")
        assert [c.strategy for c in loci.compactions("theirs")] == ["summary"]
        assert not [e for e in loci.events("theirs") if e.masked is not None]
        assert [e for e in loci.events("ours") if e.masked is not None]
        assert "clear_tool_uses" not in theirs.to_text()  # Loci's note, not the model's
        # A request without edits ends them: Loci masks again.
        loci.compile("theirs", "and now?", provider_edits=[])
        chat(loci, 4, session="theirs", big=600, start=10)
        assert loci.compact("theirs", strategy="mask").masked > 0
    assert "clear_tool_uses_20250919" in theirs.explain()
    assert "applied by the provider" in theirs.explain()
    assert "tool output(s) masked by Loci's compaction" in masked
    assert "summary event" in ours.explain() and "by Loci's compaction" in ours.explain()
