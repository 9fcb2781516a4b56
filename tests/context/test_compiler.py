from __future__ import annotations

from pathlib import Path

import pytest

from loci import BudgetExceededError, Loci, load_settings
from tests.conftest import FakeClock


def _turns(loci: Loci, n: int, session: str = "s") -> None:
    for i in range(n):
        loci.add(session, "user", f"question number {i} " + "word " * 20)
        loci.add_event(session, type="tool_call", tool_name="lookup", tool_call_id=f"c{i}",
                       args={"q": i})
        loci.add_event(session, type="tool_result", tool_call_id=f"c{i}", content="result " * 30)
        loci.add(session, "assistant", f"answer number {i}")


def test_layers_in_cache_friendly_order(loci: Loci) -> None:
    loci.remember("User's name is John", type="sticky")
    loci.remember("Prefers Python 3.12", type="user_preference")
    loci.state_set("last_topic", "solana")
    loci.add("s", "user", "hello")
    loci.add("s", "assistant", "hi John")
    messages = loci.compile("s", "what's my name?").to_openai()
    assert [m["role"] for m in messages] == ["system", "system", "user", "assistant", "user"]
    dynamic = messages[1]["content"]
    assert "[STICKY] User's name is John" in dynamic
    assert "[MEMORY] Prefers Python 3.12" in dynamic
    assert "[STATE] last_topic = solana" in dynamic
    assert dynamic.index("[STICKY]") < dynamic.index("[MEMORY]")
    assert messages[-1] == {"role": "user", "content": "what's my name?"}


def test_static_prefix_is_byte_stable_across_time(loci: Loci, clock: FakeClock) -> None:
    loci.add("s", "user", "hello")
    first = loci.compile("s", "one")
    clock.advance(minutes=1)
    loci.add("s", "assistant", "hi")
    loci.remember("new fact", type="sticky")
    second = loci.compile("s", "two")
    assert first.static_prefix == second.static_prefix
    assert first.prefix_hash == second.prefix_hash
    assert first.dynamic != second.dynamic


def test_identity_comes_from_the_workspace(loci: Loci, tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("# Soul\nYou are a senior systems engineer.\n")
    compiled = loci.compile(None, "hi")
    assert compiled.static_prefix == "# Soul\nYou are a senior systems engineer."
    assert compiled.layers[0].included == [str(tmp_path / "SOUL.md")]


def test_history_keeps_whole_turns_under_budget(home: Path, clock: FakeClock) -> None:
    settings = load_settings(store="sqlite:///:memory:", history_budget=400)
    with Loci(settings, clock=clock) as loci:
        _turns(loci, 10)
        compiled = loci.compile("s", "next")
        history = compiled.history
        assert history and history[0]["role"] == "user"
        assert history[-1] == {"role": "assistant", "content": "answer number 9"}
        layer = next(layer for layer in compiled.layers if layer.name == "history")
        assert 0 < layer.used <= 400
        assert layer.dropped and "older turn" in layer.dropped[0][0]
        call_ids = [c["id"] for m in history for c in m.get("tool_calls", [])]
        result_ids = [m["tool_call_id"] for m in history if m["role"] == "tool"]
        assert call_ids == result_ids  # never a call without its result, or the reverse


def test_explain_lists_every_layer(loci: Loci) -> None:
    loci.remember("fact", type="sticky")
    loci.add("s", "user", "hello")
    compiled = loci.compile("s", "hi")
    text = compiled.explain()
    for name in ("identity", "date_user", "sticky", "history", "message"):
        assert name in text
    assert compiled.prefix_hash in text
    assert compiled.to_dict()["layers"][0]["name"] == "identity"


def test_dynamic_budget_drops_old_memories_first(loci: Loci, clock: FakeClock) -> None:
    for i in range(400):
        loci.remember(f"fact number {i} " + "detail " * 10, type="project_context", dedupe=False)
        clock.advance(seconds=1)
    compiled = loci.compile(None, "hi")
    layer = next(layer for layer in compiled.layers if layer.name == "memories")
    assert layer.dropped and layer.included
    assert "fact number 399" in compiled.dynamic and "fact number 0 " not in compiled.dynamic


def test_message_that_cannot_fit_is_a_clear_error(loci: Loci) -> None:
    with pytest.raises(BudgetExceededError, match="does not fit"):
        loci.compile(None, "word " * 10_000, model="ollama/tiny")


def test_text_render_shows_tool_calls(loci: Loci) -> None:
    _turns(loci, 1)
    text = loci.compile("s", "more").to_text()
    assert 'calls lookup({"q":0})' in text and "[tool]" in text


def test_memory_md_is_loaded_into_dynamic_context(loci: Loci, tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("- The staging server is flaky on Mondays\n")
    compiled = loci.compile(None, "hi")
    assert "# MEMORY.md\n- The staging server is flaky on Mondays" in compiled.dynamic
    assert any(layer.name == "memory_file" for layer in compiled.layers)
