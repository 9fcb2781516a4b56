"""The Anthropic Messages face end to end: the official ``anthropic`` SDK against the
proxy served by uvicorn, with the scripted upstreams of ``fake_upstream`` (OpenAI- and
Anthropic-shaped) behind it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic import Anthropic

from loci.testing.provider_rules import signature
from tests.server.conftest import LiveServer, make_key
from tests.server.fake_upstream import (
    SESSION,
    Upstream,
    engine,
    proxy_app,
    system_text,
)

WEATHER = {"name": "weather", "description": "The weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def client(base: str, key: str = "open") -> Anthropic:
    return Anthropic(base_url=base, api_key=key, max_retries=0)


def test_a_message_gets_context_and_leaves_memory(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    engine(app).remember("Maya lives in Lisbon", type="sticky")
    upstream.replies.append("You live in Lisbon. [MEMORY:user_preference] Maya likes "
                            "short answers [/MEMORY]")
    with client(live_server(app)) as claude:
        reply = claude.messages.create(
            model="claude-test", max_tokens=64, system="You are terse.",
            extra_headers=SESSION, messages=[{"role": "user", "content": "Where do I live?"}])
        counted = claude.messages.count_tokens(
            model="claude-test", system="You are terse.", extra_headers=SESSION,
            messages=[{"role": "user", "content": "And my name?"}])
    assert reply.content[0].type == "text" and reply.content[0].text == "You live in Lisbon."
    assert reply.stop_reason == "end_turn" and reply.role == "assistant"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (11, 7)
    sent = upstream.last["body"]
    assert sent["messages"][0] == {"role": "system", "content": "You are terse."}
    assert "Maya lives in Lisbon" in system_text(upstream.last)
    assert sent["max_tokens"] == 64 and sent["model"] == "claude-test"
    assert "## Principles" not in system_text(upstream.last)  # a guest: no persona
    loci = engine(app)
    assert [(e.role, e.content) for e in loci.events("work")] == [
        ("user", "Where do I live?"), ("assistant", "You live in Lisbon.")]
    assert [m.content for m in loci.memories("user_preference")] == ["Maya likes short answers"]
    assert counted.input_tokens > 20


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_streaming_follows_the_published_event_sequence(
        home: Path, upstream: Upstream, live_server: LiveServer, kind: str) -> None:
    app = proxy_app(home, upstream, kind)
    upstream.replies.append("Lisbon, by the river. [MEMORY:fact] Maya likes rivers "
                            "[/MEMORY]")
    with client(live_server(app)) as claude, claude.messages.stream(
            model="claude-test", max_tokens=64, extra_headers=SESSION,
            messages=[{"role": "user", "content": "Where?"}]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_start" in kinds and "message_delta" in kinds
    assert final.content[0].text == "Lisbon, by the river." and final.stop_reason == "end_turn"
    assert "MEMORY" not in "".join(b.text for b in final.content if b.type == "text")
    assert [e.content for e in engine(app).events("work")] == [
        "Where?", "Lisbon, by the river."]


def test_a_two_tool_loop(home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    call = [{"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}]
    upstream.replies += [call, "Sunny in Lisbon."]
    question: dict[str, Any] = {"role": "user", "content": "Weather in Lisbon?"}
    with client(live_server(app)) as claude:
        first = claude.messages.create(model="claude-test", max_tokens=64, tools=[WEATHER],
                                       extra_headers=SESSION, messages=[question])
        assert first.stop_reason == "tool_use"
        use = next(block for block in first.content if block.type == "tool_use")
        assert (use.id, use.name, use.input) == ("call_1", "weather", {"city": "Lisbon"})
        second = claude.messages.create(
            model="claude-test", max_tokens=64, tools=[WEATHER], extra_headers=SESSION,
            messages=[question, {"role": "assistant", "content": first.content},
                      {"role": "user", "content": [{"type": "tool_result",
                                                    "tool_use_id": use.id,
                                                    "content": "22°C and sunny"}]}])
    assert second.content[0].text == "Sunny in Lisbon."
    sent = upstream.last["body"]
    assert sent["tools"][0]["function"]["name"] == "weather"
    assert {"role": "tool", "tool_call_id": "call_1", "content": "22°C and sunny"} in sent[
        "messages"]
    log = [(e.type, e.tool_call_id or e.content) for e in engine(app).events("work")]
    assert log == [("message", "Weather in Lisbon?"), ("tool_call", "call_1"),
                   ("tool_result", "call_1"), ("message", "Sunny in Lisbon.")]


@pytest.mark.parametrize("stream", [False, True])
def test_thinking_blocks_go_back_unchanged_through_a_tool_loop(
        home: Path, upstream: Upstream, live_server: LiveServer, stream: bool) -> None:
    app = proxy_app(home, upstream, "anthropic")
    call = [{"id": "toolu_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}]
    upstream.replies += [call, "Sunny in Lisbon."]
    question: dict[str, Any] = {"role": "user", "content": "Weather in Lisbon?"}
    thinking = {"type": "enabled", "budget_tokens": 1024}

    def ask(claude: Anthropic, messages: list[dict[str, Any]]) -> Any:
        params: dict[str, Any] = {"model": "claude-test", "max_tokens": 2048,
                                  "tools": [WEATHER], "thinking": thinking,
                                  "extra_headers": SESSION, "messages": messages}
        if not stream:
            return claude.messages.create(**params)
        with claude.messages.stream(**params) as events:
            return events.get_final_message()

    with client(live_server(app)) as claude:
        first = ask(claude, [question])
        assert [b.type for b in first.content] == ["thinking", "text", "tool_use"]
        signed = first.content[0]
        assert signed.signature == signature(signed.thinking)
        second = ask(claude, [question, {"role": "assistant", "content": first.content},
                              {"role": "user", "content": [{
                                  "type": "tool_result", "tool_use_id": "toolu_1",
                                  "content": "22°C and sunny"}]}])
    # The upstream refuses a tool loop whose assistant turn lost its thinking block.
    assert [b.type for b in second.content] == ["thinking", "text"]
    assert second.content[1].text == "Sunny in Lisbon."
    turn = next(m for m in reversed(upstream.last["body"]["messages"])
                if m["role"] == "assistant")
    assert turn["content"][0] == {"type": "thinking", "thinking": signed.thinking,
                                  "signature": signed.signature}
    assert upstream.last["body"]["thinking"] == thinking
    log = engine(app).events("work")
    assert [(e.type, e.tool_call_id or e.content) for e in log] == [
        ("message", "Weather in Lisbon?"), ("message", "Checking."),
        ("tool_call", "toolu_1"), ("tool_result", "toolu_1"),
        ("message", "Sunny in Lisbon.")]
    assert log[1].metadata["provider_blocks"] == [turn["content"][0]]


def test_a_clients_own_thinking_blocks_are_kept_for_a_loop_loci_did_not_relay(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream, "anthropic")
    text = "The user wants the weather."
    mine = {"type": "thinking", "thinking": text, "signature": signature(text)}
    with client(live_server(app)) as claude:
        reply = claude.messages.create(
            model="claude-test", max_tokens=2048, tools=[WEATHER], extra_headers=SESSION,
            thinking={"type": "enabled", "budget_tokens": 1024}, messages=[
                {"role": "user", "content": "Weather in Lisbon?"},
                {"role": "assistant", "content": [mine, {
                    "type": "tool_use", "id": "toolu_9", "name": "weather",
                    "input": {"city": "Lisbon"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9",
                                              "content": "22°C"}]}])
    assert reply.content[-1].text == "ok"
    turn = next(m for m in reversed(upstream.last["body"]["messages"])
                if m["role"] == "assistant")
    assert turn["content"][0] == mine


PIXEL = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_images_and_documents_go_to_the_upstream_with_the_message(
        home: Path, upstream: Upstream, live_server: LiveServer, kind: str) -> None:
    app = proxy_app(home, upstream, kind)
    pdf = {"type": "document", "title": "plan.pdf",
           "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}
    with client(live_server(app)) as claude:
        claude.messages.create(model="m", max_tokens=8, extra_headers=SESSION, messages=[
            {"role": "user", "content": [{"type": "text", "text": "What is in these?"},
                                         {"type": "image", "source": PIXEL}, pdf]}])
    sent = upstream.last["body"]["messages"][-1]["content"]
    if kind == "anthropic":  # as the client sent them, after the text
        assert sent[-2:] == [{"type": "image", "source": PIXEL}, pdf]
        assert sent[-3]["text"].endswith("What is in these?")
    else:
        assert sent[-2:] == [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=",
                                      "filename": "plan.pdf"}}]
        assert sent[0] == {"type": "text", "text": "What is in these?"}
    assert engine(app).events("work")[0].content == (
        "What is in these?\n[image: image/png]\n[document: plan.pdf (application/pdf)]")


def marks(body: dict[str, Any], own: int) -> list[str]:
    """Where the request's cache breakpoints are: on a tool, on a system block of the
    client (its ``own`` first) or of Loci, or in the messages (Loci's history)."""
    found = ["tool" for tool in body.get("tools", []) if "cache_control" in tool]
    found += [("client" if n < own else "loci")
              for n, b in enumerate(body["system"]) if "cache_control" in b]
    return found + ["history" for m in body["messages"] for b in m["content"]
                    if "cache_control" in b]


def test_the_clients_cache_breakpoints_are_kept_within_four(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream, "anthropic")
    engine(app).remember("Maya lives in Lisbon", type="sticky")
    ephemeral = {"type": "ephemeral"}
    tool = {**WEATHER, "cache_control": ephemeral}
    question = [{"role": "user", "content": "Weather?"}]
    with client(live_server(app)) as claude:
        claude.messages.create(model="m", max_tokens=8, extra_headers=SESSION, tools=[tool],
                               system=[{"type": "text", "text": "You are terse.",
                                        "cache_control": ephemeral}], messages=question)
        kept = upstream.last["body"]
        claude.messages.create(model="m", max_tokens=8, extra_headers=SESSION, tools=[tool],
                               system=[{"type": "text", "text": f"Rule {n}.",
                                        "cache_control": ephemeral} for n in range(4)],
                               messages=question)
        crowded = upstream.last["body"]
    assert kept["tools"][0]["cache_control"] == ephemeral
    assert kept["system"][0] == {"type": "text", "text": "You are terse.",
                                 "cache_control": ephemeral}
    assert marks(kept, 1) == ["tool", "client", "loci"]
    # Seven marks asked for: Loci's first block and the end of its history (the first
    # exchange) keep theirs, the client's latest two stay.
    assert marks(crowded, 4) == ["client", "client", "loci", "history"]
    assert [b["text"] for b in crowded["system"] if "cache_control" in b][:2] == [
        "Rule 2.", "Rule 3."]


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_anthropics_own_tool_types_pass_to_an_anthropic_upstream(
        home: Path, upstream: Upstream, live_server: LiveServer, kind: str) -> None:
    app = proxy_app(home, upstream, kind)
    memory = {"type": "memory_20250818", "name": "memory"}
    with client(live_server(app)) as claude:
        ask = {"model": "m", "max_tokens": 8, "extra_headers": SESSION, "tools": [memory, WEATHER],
               "messages": [{"role": "user", "content": "Remember my city."}]}
        if kind == "openai":
            with pytest.raises(anthropic.UnprocessableEntityError, match="memory_20250818"):
                claude.messages.create(**ask)
            return
        edits = {"edits": [{"type": "clear_tool_uses_20250919"}]}
        claude.beta.messages.create(**ask, betas=["context-management-2025-06-27"],
                                    context_management=edits)
    assert upstream.last["body"]["tools"] == [memory, WEATHER]
    assert upstream.last["body"]["context_management"] == edits
    # The client's beta features are its to ask of Anthropic (the memory tool needs one).
    assert upstream.last["headers"]["anthropic-beta"] == "context-management-2025-06-27"


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_tool_results_the_provider_clears_are_not_masked_by_loci_too(
        home: Path, upstream: Upstream, live_server: LiveServer, kind: str) -> None:
    app = proxy_app(home, upstream, kind)
    loci = engine(app)
    for n in range(8):
        loci.add_events("work", [
            {"role": "user", "content": f"Read part {n}."},
            {"type": "tool_call", "tool_name": "read", "tool_call_id": f"r{n}",
             "args": {"part": n}},
            {"type": "tool_result", "tool_call_id": f"r{n}", "content": "line\n" * 800},
            {"role": "assistant", "content": f"Part {n} read."}])
    edits = {"edits": [{"type": "clear_tool_uses_20250919", "keep": {
        "type": "tool_uses", "value": 2}}]}
    with client(live_server(app)) as claude:
        claude.beta.messages.create(
            model="m", max_tokens=8, extra_headers=SESSION, context_management=edits,
            betas=["context-management-2025-06-27"],
            messages=[{"role": "user", "content": "Summarize the parts."}])
    # The session outgrew the window: Loci compacted it before the call. An Anthropic
    # upstream clears old tool results itself, so Loci left them whole; another upstream
    # never sees the edits, so Loci masked them.
    assert loci.compactions("work")
    masked = [e for e in loci.events("work") if e.masked is not None]
    assert (not masked) == (kind == "anthropic")
    explained = loci.compile("work", "next?").explain()
    assert ("clear_tool_uses_20250919" in explained) == (kind == "anthropic")


@pytest.mark.parametrize("stream", [False, True])
def test_the_proxy_runs_the_memory_tool_when_asked(
        home: Path, upstream: Upstream, live_server: LiveServer, stream: bool) -> None:
    app = proxy_app(home, upstream, "anthropic", proxy_memory_tool=True)
    create = {"command": "create", "path": "/memories/trip.md", "file_text": "Lisbon in May"}
    missing = {"command": "view", "path": "/memories/x.md"}
    upstream.replies += [
        [{"id": "toolu_m1", "type": "function",
          "function": {"name": "memory", "arguments": json.dumps(create)}}],
        [{"id": "toolu_m2", "type": "function",
          "function": {"name": "memory", "arguments": json.dumps(missing)}}],
        "Noted: Lisbon in May."]
    ask: dict[str, Any] = {
        "model": "m", "max_tokens": 64, "extra_headers": SESSION,
        "tools": [{"type": "memory_20250818", "name": "memory"}],
        "messages": [{"role": "user", "content": "I go to Lisbon in May."}]}
    with client(live_server(app)) as claude:
        if stream:
            with claude.messages.stream(**ask) as events:
                reply = events.get_final_message()
        else:
            reply = claude.messages.create(**ask)
    assert [b.type for b in reply.content] == ["text"] and reply.stop_reason == "end_turn"
    # Streamed, the rounds' own text ("Checking.") was shown as it came.
    expected = "Checking.Checking.Noted: Lisbon in May." if stream else "Noted: Lisbon in May."
    assert reply.content[0].text == expected
    loci = engine(app)
    assert loci.knowledge.get("/memories/trip.md").content == "Lisbon in May"
    log = [(e.type, e.tool_call_id or e.content) for e in loci.events("work")]
    assert log == [("message", "I go to Lisbon in May."), ("message", "Checking."),
                   ("tool_call", "toolu_m1"), ("tool_result", "toolu_m1"),
                   ("message", "Checking."), ("tool_call", "toolu_m2"),
                   ("tool_result", "toolu_m2"), ("message", "Noted: Lisbon in May.")]
    results = [e.content for e in loci.events("work") if e.type == "tool_result"]
    assert results[0] == "File created successfully at: /memories/trip.md"
    assert "does not exist" in results[1]  # the SDK tool's error text, for the model
    assert upstream.last["body"]["messages"][-1]["content"][0]["type"] == "tool_result"
    assert len(upstream.requests) == 3


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_a_tool_results_image_goes_to_the_upstream(
        home: Path, upstream: Upstream, live_server: LiveServer, kind: str) -> None:
    app = proxy_app(home, upstream, kind)
    call = [{"id": "toolu_s", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}]
    upstream.replies += [call, "A sunny sky."]
    question: dict[str, Any] = {"role": "user", "content": "Show me the sky in Lisbon."}
    with client(live_server(app)) as claude:
        first = claude.messages.create(model="m", max_tokens=64, tools=[WEATHER],
                                       extra_headers=SESSION, messages=[question])
        claude.messages.create(
            model="m", max_tokens=64, tools=[WEATHER], extra_headers=SESSION,
            messages=[question, {"role": "assistant", "content": first.content},
                      {"role": "user", "content": [{
                          "type": "tool_result", "tool_use_id": "toolu_s",
                          "content": [{"type": "text", "text": "a photo"},
                                      {"type": "image", "source": PIXEL}]}]}])
    sent = upstream.last["body"]["messages"]
    if kind == "anthropic":
        assert sent[-1]["content"][-1] == {"type": "image", "source": PIXEL}
        assert sent[-1]["content"][0]["type"] == "tool_result"
    else:
        assert sent[-2]["role"] == "tool" and sent[-1]["role"] == "user"
        assert sent[-1]["content"][-1] == {
            "type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    [result] = [e for e in engine(app).events("work") if e.type == "tool_result"]
    assert result.content == "a photo\n[image: image/png]"


def test_keys_and_refusals(home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    key = make_key(app.state.hub, "maya")
    base = live_server(app)
    with client(base, "wrong") as claude, pytest.raises(anthropic.AuthenticationError):
        claude.messages.create(model="m", max_tokens=8, extra_headers=SESSION,
                               messages=[{"role": "user", "content": "hi"}])
    with client(base, key) as claude:
        assert claude.messages.create(
            model="m", max_tokens=8, extra_body={"loci_session": "by-field"},
            messages=[{"role": "user", "content": "hi"}]).content[0].text == "ok"
        with pytest.raises(anthropic.UnprocessableEntityError, match="as base64"):
            claude.messages.create(model="m", max_tokens=8, extra_headers=SESSION, messages=[
                {"role": "user", "content": [{"type": "document", "source": {
                    "type": "url", "url": "https://example.com/a.pdf"}}]}])
        with pytest.raises(anthropic.UnprocessableEntityError, match="X-Loci-Session"):
            claude.messages.create(model="m", max_tokens=8, metadata={"user_id": "u-1"},
                                   messages=[{"role": "user", "content": "hi"}])
    assert [e.content for e in engine(app, "maya").events("by-field")] == ["hi", "ok"]


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_the_clients_metadata_goes_on_to_anthropic_only(
        home: Path, upstream: Upstream, live_server: LiveServer, kind: str) -> None:
    """The SDK's metadata is Anthropic's (an end user's id), not the session's name;
    OpenAI refuses a metadata sent without ``store``."""
    app = proxy_app(home, upstream, kind)
    with client(live_server(app)) as claude:
        claude.messages.create(model="m", max_tokens=8, extra_headers=SESSION,
                               metadata={"user_id": "end-user-7"},
                               messages=[{"role": "user", "content": "hi"}])
    sent = upstream.last["body"]
    assert sent.get("metadata") == ({"user_id": "end-user-7"} if kind == "anthropic" else None)
    assert "loci_session" not in sent
    assert [s.id for s in engine(app).sessions()] == [SESSION["X-Loci-Session"]]
