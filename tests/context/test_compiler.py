from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from loci import BudgetExceededError, Loci, ValidationError, load_settings
from loci.context.focus import Criterion, Focus
from loci.context.sources import NEW_SESSION_MEMORIES
from loci.context.templates import write_workspace
from loci.models import Document
from tests.conftest import FakeClock

#: Each test that takes ``loci`` runs on Loci and on AsyncLoci (``tests/conftest.py``).
BOTH_APIS = True

GOLDEN = Path(__file__).parent / "golden"


def _turns(loci: Loci, n: int, session: str = "s") -> None:
    for i in range(n):
        loci.add(session, "user", f"question number {i} " + "word " * 20)
        loci.add_event(session, type="tool_call", tool_name="lookup", tool_call_id=f"c{i}",
                       args={"q": i})
        loci.add_event(session, type="tool_result", tool_call_id=f"c{i}", content="result " * 30)
        loci.add(session, "assistant", f"answer number {i}")


def _workspace(root: Path) -> None:
    files = {
        "SOUL.md": "# Soul\nYou are Ada, a precise research assistant.",
        "AGENTS.toml": '[agents.ada]\ndescription = "research"\n',
        "TOOLS.md": "Prefer the search tool over guessing.",
        "USER.md": "Maya is a backend engineer in Lisbon (UTC+0).",
        "BOOT.md": "Greet Maya by name at the start of a session.",
        "MEMORY.md": "- The staging server is flaky on Mondays",
        "logs/daily/2026-01-15.md": "- 09:00 reviewed the tide API",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")


def _layer(compiled: object, name: str) -> object:
    return next(layer for layer in compiled.layers if layer.name == name)  # type: ignore[attr-defined]


def test_golden_prompt_for_a_fixed_workspace(loci: Loci, tmp_path: Path, clock: FakeClock
                                             ) -> None:
    _workspace(tmp_path)
    loci.store.put_document(loci.scope, Document(
        "/profile/identity.md", "Maya, backend engineer.", (), 1, clock.now, clock.now))
    loci.store.put_document(loci.scope, Document(
        "/profile/people/rui.md", "Co-founder; builds the mobile app.", (), 1, clock.now,
        clock.now))
    loci.remember("User's name is Maya", type="sticky")
    clock.advance(seconds=1)
    loci.remember("Prefers short answers in bullet points", type="user_preference")
    loci.state_set("last_topic", "tides")
    loci.set_focus("s", Focus("Ship the tide API", (Criterion("tests pass", 3),
                                                    Criterion("docs written")),
                              ("no new dependencies",), "2 of 3 endpoints done"))
    loci.add("s", "user", "Can you check the logs?")
    loci.add_event("s", type="tool_call", tool_name="read_file", tool_call_id="c1",
                   args={"path": "api.log"})
    loci.add_event("s", type="tool_result", tool_call_id="c1", content="ERROR KeyError 'M2'")
    loci.add("s", "assistant", "The M2 constituent is missing.")
    compiled = loci.compile("s", "What should we do about the missing constituent?")
    text = compiled.to_text()
    golden = GOLDEN / "prompt.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_layers_in_cache_friendly_order(home: Path, clock: FakeClock) -> None:
    settings = load_settings(store="sqlite:///:memory:", context_budgets={"memories": 60})
    with Loci(settings, clock=clock) as loci:
        loci.remember("The user's solana wallet is hardware-backed", type="project_context")
        for i in range(20):
            clock.advance(seconds=1)
            loci.remember(f"unrelated note {i} about gardening", dedupe=False)
        loci.remember("User's name is John", type="sticky")
        loci.state_set("last_topic", "solana")
        loci.add("s", "user", "hello")
        loci.add("s", "assistant", "hi John")
        compiled = loci.compile("s", "is my solana wallet safe?")
        messages = compiled.to_openai()
        assert [m["role"] for m in messages] == ["system", "system", "user", "assistant",
                                                 "system", "user"]
        dynamic = messages[1]["content"]
        assert "[STICKY] User's name is John" in dynamic
        assert "[STATE] last_topic = solana" in dynamic
        assert dynamic.index("[STICKY]") < dynamic.index("[MEMORY 15 January 2026]")
        assert "wallet" not in dynamic  # too old for the memories layer's budget...
        # ...but recalled for this message, after the history so the prefix stays cached.
        assert messages[4]["content"].startswith(
            "[RECALL 15 January 2026] The user's solana wallet")
        assert messages[-1] == {"role": "user", "content": "is my solana wallet safe?"}


def test_static_prefix_is_byte_stable_across_time(loci: Loci, clock: FakeClock,
                                                  tmp_path: Path) -> None:
    _workspace(tmp_path)
    loci.add("s", "user", "hello")
    first = loci.compile("s", "one")
    clock.advance(minutes=1)
    loci.add("s", "assistant", "hi")
    loci.remember("new fact", type="sticky")
    second = loci.compile("s", "two")
    assert first.static_prefix == second.static_prefix
    assert first.prefix_hash == second.prefix_hash
    assert first.dynamic != second.dynamic


def test_identity_from_the_workspace(loci: Loci, tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("# Soul\nYou are a senior systems engineer.\n")
    compiled = loci.compile(None, "hi")
    assert compiled.static_prefix.startswith("## Principles\n")
    assert compiled.static_prefix.endswith("\n\n# Soul\nYou are a senior systems engineer.")
    assert _layer(compiled, "identity").included == [str(tmp_path / "SOUL.md")]  # type: ignore[attr-defined]


def test_history_keeps_whole_turns_under_budget(home: Path, clock: FakeClock) -> None:
    settings = load_settings(store="sqlite:///:memory:", context_budgets={"history": 400},
                             compaction_auto=False)
    with Loci(settings, clock=clock) as loci:
        _turns(loci, 10)
        compiled = loci.compile("s", "next")
        history = compiled.history
        assert history and history[0]["role"] == "user"
        assert history[-1] == {"role": "assistant", "content": "answer number 9"}
        layer = _layer(compiled, "history")
        assert 0 < layer.used <= 400  # type: ignore[attr-defined]
        assert "older step" in layer.dropped[0][0]  # type: ignore[attr-defined]
        call_ids = [c["id"] for m in history for c in m.get("tool_calls", [])]
        result_ids = [m["tool_call_id"] for m in history if m["role"] == "tool"]
        assert call_ids == result_ids  # never a call without its result, or the reverse


def test_over_budget_history_is_compacted_not_dropped(home: Path, clock: FakeClock) -> None:
    settings = load_settings(store="sqlite:///:memory:", context_budgets={"history": 1500},
                             compaction_preserve_messages=4)
    with Loci(settings, clock=clock) as loci:
        _turns(loci, 25)
        assert loci.session("s").active_token_count > 1500
        compiled = loci.compile("s", "next")
        assert loci.compactions("s") and "[CONTEXT SUMMARY]" in compiled.dynamic
        assert not _layer(compiled, "history").dropped  # type: ignore[attr-defined]


def test_history_start_moves_rarely(home: Path, clock: FakeClock) -> None:
    settings = load_settings(store="sqlite:///:memory:", context_budgets={"history": 1000},
                             compaction_auto=False)
    with Loci(settings, clock=clock) as loci:
        starts = []
        for i in range(30):
            loci.add("s", "user", f"message {i} " + "filler " * 30)
            starts.append(loci.compile("s", "next").history[0]["content"])
        changes = sum(1 for a, b in itertools.pairwise(starts) if a != b)
        assert 0 < changes <= 30 // 4


def test_each_layer_drops_under_its_budget(loci: Loci, clock: FakeClock) -> None:
    for i in range(400):
        loci.remember(f"fact number {i} " + "detail " * 10, type="project_context", dedupe=False)
        clock.advance(seconds=1)
    loci.add("s", "user", "Where were we?")  # an ongoing session: the newest first
    compiled = loci.compile("s", "hi")
    memories = _layer(compiled, "memories")
    assert memories.dropped and memories.included  # type: ignore[attr-defined]
    assert "fact number 399" in compiled.dynamic and "fact number 0 " not in compiled.dynamic
    assert any("memories dropped" in w for w in compiled.warnings)


def test_a_new_session_shows_the_newest_few_memories_and_recalls_the_rest(
        loci: Loci, clock: FakeClock) -> None:
    loci.remember("The user's boat is moored at pier 7 in Cascais.", type="project_context")
    for i in range(60):
        clock.advance(seconds=1)
        loci.remember(f"Errand {i}: pick up parcel {i} from the post office.",
                      type="project_context", dedupe=False)
    loci.wait_indexed()
    compiled = loci.compile("new", "Where is my boat moored?")
    memories = _layer(compiled, "memories")
    assert len(memories.included) == NEW_SESSION_MEMORIES  # type: ignore[attr-defined]
    assert "Errand 59" in compiled.dynamic and "Errand 40" not in compiled.dynamic
    assert "pier 7 in Cascais" in compiled.retrieved  # what it is asked: by relevance
    # Once the session has history, the layer lists the newest again, to its budget.
    loci.add("new", "user", "Where is my boat moored?")
    ongoing = _layer(loci.compile("new", "And the errands?"), "memories")
    assert len(ongoing.included) > NEW_SESSION_MEMORIES  # type: ignore[attr-defined]


def test_section_budget_drops_lower_priority_layers_first(home: Path, clock: FakeClock
                                                          ) -> None:
    budgets = {"dynamic": 300, "memories": 5000, "sticky": 5000}
    with Loci(load_settings(store="sqlite:///:memory:", context_budgets=budgets),
              clock=clock) as loci:
        for i in range(30):
            loci.remember(f"sticky fact {i} " + "x " * 10, type="sticky", dedupe=False)
            loci.remember(f"plain fact {i} " + "y " * 10, dedupe=False)
        compiled = loci.compile(None, "hi")
        sticky, memories = _layer(compiled, "sticky"), _layer(compiled, "memories")
        assert sticky.included and not memories.included  # type: ignore[attr-defined]
        assert "over the dynamic section budget" in memories.dropped[0][1]  # type: ignore[attr-defined]


def test_layers_can_be_reordered_and_disabled(home: Path, clock: FakeClock) -> None:
    settings = load_settings(store="sqlite:///:memory:", context_layers=["identity", "sticky"])
    with Loci(settings, clock=clock) as loci:
        loci.remember("User's name is John", type="sticky")
        compiled = loci.compile(None, "hi")
        assert [layer.name for layer in compiled.layers] == [
            "identity", "sticky", "history", "message"]
        assert "Principles" not in compiled.static_prefix
        assert compiled.dynamic == "[STICKY] User's name is John"


def test_profile_documents_and_people(loci: Loci, clock: FakeClock) -> None:
    for path, text in (("/profile/goals.md", "Ship v1 by March."),
                       ("/profile/identity.md", "Maya, engineer."),
                       ("/profile/people/rui.md", "Rui " + "builds apps " * 50)):
        loci.store.put_document(loci.scope, Document(path, text, (), 1, clock.now, clock.now))
    dynamic = loci.compile(None, "hi").dynamic
    assert dynamic.index("## Identity") < dynamic.index("## Goals") < dynamic.index("## People")
    people_line = next(line for line in dynamic.splitlines() if line.startswith("- Rui"))
    assert len(people_line) <= len("- Rui: ") + 200


def test_a_long_profile_keeps_its_newest_entries(loci: Loci, clock: FakeClock) -> None:
    """A profile the librarian appended to for months is over the layer's budget: each
    document keeps its newest entries (it was dropped whole), in its own order."""
    goals = "# Goals\n\n" + "\n".join(f"- Goal {i}: ship the reporting module of project "
                                       f"number {i} with its tests." for i in range(400))
    for path, text in (("/profile/goals.md", goals),
                       ("/profile/identity.md", "Maya, engineer.\nLives in Lisbon."),
                       ("/profile/people/rui.md", "- Rui builds apps")):
        loci.store.put_document(loci.scope, Document(path, text, (), 1, clock.now, clock.now))
    compiled = loci.compile(None, "hi")
    layer = next(r for r in compiled.layers if r.name == "profile")
    assert layer.dropped and layer.used <= layer.budget
    lines = compiled.dynamic.splitlines()
    assert lines.index("## Identity") + 1 == lines.index("Maya, engineer.")
    kept = [int(line.split()[2][:-1]) for line in lines if line.startswith("- Goal ")]
    assert kept[-1] == 399 and 0 not in kept and kept == sorted(kept) and len(kept) > 20
    assert lines.index("## Goals") < lines.index("## People")
    assert "- Rui: Rui builds apps" in lines


def test_focus_and_reflexion(loci: Loci) -> None:
    loci.set_focus("s", Focus("Fix the build", (Criterion("CI green", 2),), ("no force push",),
                              "failing"))
    for i in range(3):
        loci.add_event("s", type="tool_call", tool_name="bash", tool_call_id=f"b{i}",
                       args={"cmd": "make"})
        loci.add_event("s", type="tool_result", tool_call_id=f"b{i}",
                       content=f"Error: missing file path {i}")
    loci.add_event("s", type="tool_call", tool_name="read", tool_call_id="r1", args={})
    loci.add_event("s", type="tool_result", tool_call_id="r1", content="ok",
                   metadata={"error": True})
    retrieved = loci.compile("s", "try again").retrieved
    assert "Goal: Fix the build" in retrieved and "CI green (weight 100%)" in retrieved
    assert "[REFLEXION] The bash tool has failed 3 times" in retrieved
    assert "Error: missing file path 2" in retrieved and "read tool" not in retrieved
    loci.set_focus("s", None)
    assert "Goal:" not in loci.compile("s", "again").retrieved


def test_explain_lists_every_layer(loci: Loci) -> None:
    loci.remember("fact", type="sticky")
    loci.add("s", "user", "hello")
    compiled = loci.compile("s", "hi")
    text = compiled.explain()
    for name in ("principles", "identity", "date_user", "sticky", "history", "recall",
                 "message"):
        assert f"/{name}:" in text
    assert compiled.prefix_hash in text
    assert compiled.to_dict()["layers"][0]["name"] == "principles"


def test_message_that_cannot_fit_is_a_clear_error(loci: Loci) -> None:
    with pytest.raises(BudgetExceededError, match="does not fit"):
        loci.compile(None, "word " * 10_000, model="ollama/tiny")


def test_small_windows_shrink_every_section(loci: Loci) -> None:
    _turns(loci, 40)
    compiled = loci.compile("s", "hello", model="ollama/llama3")
    assert compiled.total_tokens <= compiled.budget == 6144


def test_anthropic_rendering(loci: Loci) -> None:
    _turns(loci, 1)
    body = loci.compile("s", "more").to_anthropic()
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    tool_use = body["messages"][1]["content"][0]
    assert tool_use == {"type": "tool_use", "id": "c0", "name": "lookup", "input": {"q": 0}}
    assert body["messages"][2]["content"][0]["type"] == "tool_result"
    assert body["messages"][-1]["content"][-1]["text"].endswith("more")


def test_text_render_shows_tool_calls(loci: Loci) -> None:
    _turns(loci, 1)
    text = loci.compile("s", "more").to_text()
    assert 'calls lookup({"q":0})' in text and "[tool]" in text


def test_memory_md_is_loaded_into_dynamic_context(loci: Loci, tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("- The staging server is flaky on Mondays\n")
    compiled = loci.compile(None, "hi")
    assert "## Notes (MEMORY.md)\n- The staging server is flaky on Mondays" in compiled.dynamic
    assert _layer(compiled, "memory_file").included  # type: ignore[attr-defined]


def test_an_unknown_model_is_said_once_and_a_configured_window_wins(
        home: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    with Loci(load_settings(store="sqlite:///:memory:"), clock=clock) as loci:
        first = loci.compile(None, "hi", model="ollama/mystery-9b:q4")
        second = loci.compile(None, "hi", model="ollama/mystery-9b:q4")
        assert first.window == 8_192
        assert "unknown model 'ollama/mystery-9b:q4': assuming a 8,192-token window" in (
            first.warnings[-1])
        assert second.warnings == first.warnings
        logged = [r for r in caplog.records if "mystery-9b" in r.getMessage()]
        assert len(logged) == 1
        assert not any("unknown model" in w for w in loci.compile(None, "hi").warnings)
    settings = load_settings(store="sqlite:///:memory:", models={"ollama/mystery-*": 32_768})
    with Loci(settings, clock=clock) as loci:
        compiled = loci.compile(None, "hi", model="ollama/mystery-9b:q4")
        assert compiled.window == 32_768 and not compiled.warnings


def test_untouched_templates_and_comments_stay_out_of_the_prompt(
        loci: Loci, tmp_path: Path) -> None:
    write_workspace(tmp_path)
    compiled = loci.compile(None, "hi")
    text = compiled.to_text()
    assert "USER.md" not in text and "- Name:" not in text
    assert "AGENTS.toml" not in text and "Researcher" not in text and "[agents." not in text
    (tmp_path / "USER.md").write_text("# User\n\n- Name: Maya\n- Role:\n")
    (tmp_path / "AGENTS.toml").write_text(
        '[agents.default]\nname = "Assistant"\n\n'
        '[agents.researcher]\nname = "Researcher"\ndescription = "Finds sources."\n')
    text = loci.compile(None, "hi").to_text()
    assert "## About the user (USER.md)\n# User\n\n- Name: Maya" in text
    assert "- Role:" not in text
    assert "## Other agents\n- Researcher: Finds sources." in text


def test_a_window_given_per_call_wins_and_never_changes_the_session(loci: Loci) -> None:
    for n in range(40):
        loci.add("s", "user", f"Step {n}: the reactor log line {n} says pressure {n * 7} kPa. "
                 + "More detail about it. " * 20)
        loci.add_reply("s", f"Noted step {n}.")
    wide = loci.compile("s", "status?", model="ollama/mystery-9b:q4", window=200_000)
    assert wide.window == 200_000 and not wide.warnings  # the caller said the window
    assert loci.compactions("s") == []
    stored = loci.events("s")
    for window in (4_000, 600):  # a preview at a small window: cut to fit, nothing stored
        narrow = loci.compile("s", "status?", window=window)
        assert narrow.window == window and narrow.total_tokens <= window
        assert "Noted step 39." in narrow.to_text() and "Step 0:" not in narrow.to_text()
    assert loci.compactions("s") == [] and loci.events("s") == stored
    loci.compact("s", window=4_000)  # asked for: now the session is compacted
    assert len(loci.compactions("s")) == 1
    assert "[CONTEXT SUMMARY]" in loci.compile("s", "status?", window=4_000).to_text()
    for bad in (0, 100, 2.5, True):
        with pytest.raises(ValidationError, match="window"):
            loci.compile("s", "x", window=bad)  # type: ignore[arg-type]


def test_a_tool_result_without_its_call_keeps_the_context_valid(loci: Loci) -> None:
    loci.add("s", "user", "Check the weather.")
    loci.add_event("s", type="tool_result", tool_call_id="ghost", tool_name="weather",
                   content="18°C, sunny")
    loci.add_event("s", type="tool_call", tool_name="clock", tool_call_id="c1")
    loci.add_event("s", type="tool_result", tool_call_id="c1", content="09:00")
    messages = loci.compile("s", "And now?").to_openai()
    for n, message in enumerate(messages):
        if message["role"] == "tool":  # every tool message answers the call before it
            before = messages[n - 1]
            assert before.get("tool_calls") and before["tool_calls"][0]["id"] == (
                message["tool_call_id"])
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == ["c1"]
    assert any("18°C, sunny" in str(m["content"]) and m["role"] == "user" for m in messages)


def test_a_fact_the_history_already_says_is_not_repeated_as_a_memory(loci: Loci) -> None:
    loci.add("s", "user", "My sister lives in Porto. I adopted a beagle called Biscuit.")
    loci.remember("Maya works at Tidepool.", type="sticky")  # said nowhere else: shown
    saved = loci.extract_memories(loci.events("s"))
    assert {r.memory.type for r in saved} == {"sticky"} and len(saved) == 2
    before = loci.compile("s", "Tell me about my family.")
    assert before.dynamic.count("Porto") == 0 and "Biscuit" not in before.dynamic
    assert "[STICKY] Maya works at Tidepool." in before.dynamic
    assert sum("Porto" in str(m["content"]) for m in before.history) == 1
    _turns(loci, 30)
    loci.compact("s", window=4_000)
    after = loci.compile("s", "Tell me about my family.", window=4_000)
    assert loci.events("s")[0].archived
    text = after.to_text()  # the summary states the facts now: each is said once
    assert text.count("My sister lives in Porto.") == 1 and text.count("Biscuit") == 1
    assert "[STICKY] Maya works at Tidepool." in text and text.count("[STICKY]") == 1


def test_an_agent_id_is_never_used_as_a_name(loci: Loci, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.toml").write_text(
        '[agents.default]\npersonality = "Terse."\ndescription = "Answers questions."\n')
    text = loci.compile(None, "hi").to_text()
    assert "Terse.\nYour job: Answers questions." in text and "You are default" not in text
    (tmp_path / "AGENTS.toml").write_text('[agents.default]\nname = "Iris"\n')
    assert "You are Iris." in loci.compile(None, "hi").to_text()


def test_a_compile_reads_the_state_once(home: Path, clock: FakeClock) -> None:
    """The state and focus layers, and the provider's context edits, share one read of
    the scope's state."""
    settings = load_settings(store=f"sqlite:///{home / 'state.db'}",
                             embedding_provider="none")
    with Loci(settings, clock=clock) as loci:
        loci.set_focus("s", Focus("Fix the build", (Criterion("CI green", 2),), (), ""))
        loci.state_set("branch", "main")
        reads: list[str] = []
        listed, got = loci.store.list_state, loci.store.get_state
        loci.store.list_state = lambda scope: reads.append("list") or listed(scope)  # type: ignore[method-assign]
        loci.store.get_state = lambda scope, key: reads.append(key) or got(scope, key)  # type: ignore[method-assign]
        compiled = loci.compile("s", "hi")
        text = compiled.dynamic + compiled.retrieved
        assert "Goal: Fix the build" in text and "[STATE] branch = main" in text
        assert reads.count("list") == 1
        assert not [r for r in reads if r.startswith(("focus:", "provider_edits:"))], reads
