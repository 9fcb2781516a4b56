"""The OpenAI-compatible proxy end to end: the official ``openai`` client against the
proxy served by uvicorn, and a small real upstream server (OpenAI- or Anthropic-shaped)
that answers scripted replies and records what it was sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from loci import load_settings
from loci.apis.anthropic import tool_choice
from loci.errors import NotFoundError
from loci.memory.stream import TagFilter
from loci.memory.tags import parse_reply
from loci.server import create_app
from loci.testing import Fault
from loci.testing.provider_rules import pieces
from tests.server.conftest import LiveServer, make_key, serving
from tests.server.fake_upstream import (
    SESSION,
    UPSTREAM_KEY,
    Upstream,
    client,
    engine,
    proxy_app,
    system_text,
)


def test_a_turn_gets_context_and_leaves_memory(home: Path, upstream: Upstream,
                                                live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    engine(app).remember("Maya lives in Lisbon", type="sticky")
    upstream.replies.append("You live in Lisbon.\n[MEMORY:user_preference] Maya likes "
                            "short answers [/MEMORY]")
    with client(live_server(app)) as oai:
        reply = oai.chat.completions.create(
            model="gpt-test", temperature=0.3, max_tokens=50, extra_headers=SESSION,
            messages=[{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": "Where do I live?"}])
    assert reply.choices[0].message.content == "You live in Lisbon."
    assert reply.choices[0].finish_reason == "stop" and reply.object == "chat.completion"
    assert reply.model == "gpt-test" and reply.usage and reply.usage.total_tokens == 18
    sent = upstream.last
    assert sent["path"] == "/openai/v1/chat/completions"
    assert sent["headers"]["Authorization"] == f"Bearer {UPSTREAM_KEY}"
    body = sent["body"]
    assert body["model"] == "gpt-test" and body["temperature"] == 0.3
    assert body["max_tokens"] == 50 and "user" not in body
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert "Maya lives in Lisbon" in system_text(sent)
    assert body["messages"][-1] == {"role": "user", "content": "Where do I live?"}
    loci = engine(app)
    assert [m.content for m in loci.memories("user_preference")] == ["Maya likes short answers"]
    log = [(e.role, e.content) for e in loci.events("work")]
    assert log == [("user", "Where do I live?"), ("assistant", "You live in Lisbon.")]


def test_resent_history_is_not_recorded_twice(home: Path, upstream: Upstream,
                                              live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    upstream.replies += ["Hello Maya.", "Your name is Maya."]
    history: list[Any] = [{"role": "user", "content": "Hi, I'm Maya."}]
    with client(live_server(app)) as oai:
        first = oai.chat.completions.create(model="m", messages=history, extra_headers=SESSION)
        history += [{"role": "assistant", "content": first.choices[0].message.content},
                    {"role": "user", "content": "What's my name?"}]
        oai.chat.completions.create(model="m", messages=history, extra_headers=SESSION)
    sent = [m["content"] for m in upstream.last["body"]["messages"] if m["role"] != "system"]
    assert sent == ["Hi, I'm Maya.", "Hello Maya.", "What's my name?"]
    assert [e.content for e in engine(app).events("work")] == [
        "Hi, I'm Maya.", "Hello Maya.", "What's my name?", "Your name is Maya."]


def test_a_new_session_imports_the_clients_history(home: Path, upstream: Upstream,
                                                   live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    with client(live_server(app)) as oai:
        oai.chat.completions.create(model="m", user="imported", messages=[
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "I keep bees."},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "What do I keep?"}])
    log = [(e.role, e.content) for e in engine(app).events("imported")]
    assert log == [("user", "I keep bees."), ("assistant", "Noted."),
                   ("user", "What do I keep?"), ("assistant", "ok")]
    assert "I keep bees." in [m["content"] for m in upstream.last["body"]["messages"]]


def test_streaming_hides_tags_and_records_the_clean_reply(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    upstream.pause = 0.01  # each event a read of its own
    upstream.replies.append("Noted, [STATE:pet] Io [/STATE] the cat. [MEMORY:sticky] Maya "
                            "has a cat named Io [/MEMORY] Anything else? [1]")
    with client(live_server(app)) as oai:
        stream = oai.chat.completions.create(
            model="m", stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "I got a cat, Io."}], user="pets")
        chunks = list(stream)
    texts = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert "".join(texts) == "Noted, the cat. Anything else? [1]"
    assert not any("MEMORY" in t or "STATE" in t for t in texts)
    assert len([t for t in texts if t]) > 3  # it streamed, in pieces
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 7
    loci = engine(app)
    # The model's tag, and the user's own turn as the rules read it.
    assert {m.content for m in loci.memories("sticky")} == {"Maya has a cat named Io",
                                                            "The user got a cat, Io."}
    assert loci.state_get("pet").value == "Io"
    assert loci.events("pets")[-1].content == "Noted, the cat. Anything else? [1]"
    assert upstream.last["body"]["stream"] is True


def test_a_session_is_required(home: Path, upstream: Upstream,
                               live_server: LiveServer) -> None:
    with client(live_server(proxy_app(home, upstream))) as oai, \
            pytest.raises(openai.UnprocessableEntityError, match="X-Loci-Session"):
        oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert upstream.requests == []


def test_keys_scope_the_proxy(home: Path, upstream: Upstream,
                              live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    key_a, key_b = make_key(app.state.hub, "alice"), make_key(app.state.hub, "bob")
    upstream.replies += ["Sure. [MEMORY:sticky] Alice's PIN is 2468 [/MEMORY]", "No idea."]
    base = live_server(app)
    with client(base, key_a) as alice:
        alice.chat.completions.create(model="m", user="s", messages=[
            {"role": "user", "content": "Remember my PIN is 2468."}])
    with client(base, key_b) as bob:
        bob.chat.completions.create(model="m", user="s", messages=[
            {"role": "user", "content": "What is Alice's PIN?"}])
    assert "2468" not in json.dumps(upstream.last["body"])
    assert {m.content for m in engine(app, "alice").memories()} == {
        "Alice's PIN is 2468", "User: Remember my PIN is 2468."}
    assert engine(app, "bob").memories() == []
    assert engine(app, "bob").events("s")[0].content == "What is Alice's PIN?"
    with client(base, "not-a-key") as stranger, pytest.raises(openai.AuthenticationError):
        stranger.chat.completions.create(model="m", user="s", messages=[
            {"role": "user", "content": "hi"}])


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_failure_is_a_502(home: Path, upstream: Upstream, live_server: LiveServer,
                                   stream: bool) -> None:
    upstream.fault = lambda request: Fault(500, b'{"error": {"message": "upstream exploded"}}')
    app = proxy_app(home, upstream)
    with client(live_server(app)) as oai, \
            pytest.raises(openai.APIStatusError, match="upstream exploded") as failure:
        oai.chat.completions.create(model="m", user="s", stream=stream,
                                    messages=[{"role": "user", "content": "hi"}])
    assert failure.value.status_code == 502
    with pytest.raises(NotFoundError):  # a failed call leaves no trace
        engine(app).events("s")


def test_no_upstream_configured(home: Path, live_server: LiveServer) -> None:
    app = create_app(load_settings(store=f"sqlite:///{home / 'none.db'}"))
    with client(live_server(app)) as oai, \
            pytest.raises(openai.APIStatusError, match="no upstream") as failure:
        oai.chat.completions.create(model="m", user="s",
                                    messages=[{"role": "user", "content": "hi"}])
    assert failure.value.status_code == 503


def test_models(home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream, proxy_models=["gpt-a", "claude-b"])
    with client(live_server(app)) as oai:
        assert [m.id for m in oai.models.list()] == ["gpt-a", "claude-b"]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_upstream(home: Path, upstream: Upstream, live_server: LiveServer,
                            stream: bool) -> None:
    app = proxy_app(home, upstream, kind="anthropic")
    engine(app).remember("Maya lives in Lisbon", type="sticky")
    upstream.replies.append("Lisbon. [MEMORY:sticky] Maya asked twice [/MEMORY]")
    with client(live_server(app)) as oai:
        messages: Any = [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Where do I live?"}]
        if stream:
            got = "".join(c.choices[0].delta.content or "" for c in oai.chat.completions.create(
                model="claude-x", messages=messages, user="s", stream=True) if c.choices)
        else:
            reply = oai.chat.completions.create(model="claude-x", messages=messages,
                                                user="s", temperature=0.2)
            got = reply.choices[0].message.content or ""
            assert reply.usage and reply.usage.prompt_tokens == 13
    assert got == "Lisbon."
    sent = upstream.last
    assert sent["path"] == "/anthropic/v1/messages"
    assert sent["headers"]["x-api-key"] == UPSTREAM_KEY
    body = sent["body"]
    assert body["model"] == "claude-x" and body["max_tokens"] > 0
    assert body["system"][0] == {"type": "text", "text": "Be brief."}
    assert any("Maya lives in Lisbon" in block["text"] for block in body["system"])
    assert body["system"][1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["role"] == "user"
    assert "Where do I live?" in json.dumps(body["messages"][-1])
    assert [m.content for m in engine(app).memories("sticky")] == [
        "Maya asked twice", "Maya lives in Lisbon"]


REPLIES = [
    "plain text, no tags at all",
    "Sure.\n[MEMORY:sticky] a fact [/MEMORY]\nMore text.",
    "Inline [STATE:k] v [/STATE] tag  and [MEMORY:learned_pattern] p [/MEMORY]",
    "Brackets [1] and [x] stay, `[MEMORY:sticky] code [/MEMORY]` too",
    "An unclosed [MEMORY:sticky] opening stays text",
    "```\n[MEMORY:sticky] fenced [/MEMORY]\n```\nafter [MEMORY:sticky] real [/MEMORY]",
    "trailing tag   [MEMORY:sticky] last [/MEMORY]  \n",
]


@pytest.mark.parametrize("text", REPLIES)
@pytest.mark.parametrize("size", [1, 3, 7])
def test_tag_filter_streams_exactly_the_clean_reply(text: str, size: int) -> None:
    clean = parse_reply(text).clean
    tags = TagFilter()
    out = [tags.feed(p) for p in pieces(text, size)]
    out.append(tags.finish(clean))
    assert "".join(out) == clean
    real_tags = [t.raw for t in parse_reply(text).tags]
    assert not any(raw in "".join(out) for raw in real_tags)


WEATHER = {"type": "function", "function": {
    "name": "weather", "parameters": {"type": "object",
                                      "properties": {"city": {"type": "string"}}}}}


def weather_call(call_id: str, city: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": "weather", "arguments": json.dumps({"city": city})}}


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_loop_goes_through_the_proxy(home: Path, upstream: Upstream,
                                            live_server: LiveServer, stream: bool,
                                            kind: str) -> None:
    app = proxy_app(home, upstream, kind=kind)
    upstream.replies += [[weather_call("call_1", "Lisbon"), weather_call("call_2", "Porto")],
                         "Sunny in Lisbon, rain in Porto."]
    ask = {"role": "user", "content": "Weather in Lisbon and Porto?"}
    with client(live_server(app)) as oai:
        def call(messages: list[dict[str, Any]]) -> tuple[str | None, list[Any]]:
            if not stream:
                message = oai.chat.completions.create(
                    model="gpt-test", messages=messages, tools=[WEATHER],
                    extra_headers=SESSION).choices[0].message
                return message.content, [c.model_dump() for c in message.tool_calls or []]
            text, calls = "", []
            for piece in oai.chat.completions.create(
                    model="gpt-test", messages=messages, tools=[WEATHER], stream=True,
                    extra_headers=SESSION):
                if piece.choices and piece.choices[0].delta.content:
                    text += piece.choices[0].delta.content
                if piece.choices and piece.choices[0].delta.tool_calls:
                    calls += [c.model_dump() for c in piece.choices[0].delta.tool_calls]
            return text or None, calls

        _, calls = call([ask])
        assert {c["id"] for c in calls if c["id"]} == {"call_1", "call_2"}
        if not stream:
            arguments = [json.loads(c["function"]["arguments"]) for c in calls]
            assert arguments == [{"city": "Lisbon"}, {"city": "Porto"}]
        asked = {"role": "assistant", "content": None,
                 "tool_calls": [weather_call("call_1", "Lisbon"),
                                weather_call("call_2", "Porto")]}
        results = [{"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24C"},
                   {"role": "tool", "tool_call_id": "call_2", "content": "rain, 17C"}]
        answer, _ = call([ask, asked, *results])
    assert answer == "Sunny in Lisbon, rain in Porto."
    sent = upstream.last["body"]
    if kind == "openai":
        assert_openai_saw_the_loop(sent, ask["content"])
    else:
        assert_anthropic_saw_the_loop(sent, ask["content"])
    log = [(e.type, e.tool_call_id, e.content) for e in engine(app).events("work")]
    said = "Checking." if kind == "anthropic" else None  # Claude's text before its calls
    assert log == [("message", None, ask["content"]), *([("message", None, said)] * bool(said)),
                   ("tool_call", "call_1", ""), ("tool_call", "call_2", ""),
                   ("tool_result", "call_1", "sunny, 24C"),
                   ("tool_result", "call_2", "rain, 17C"),
                   ("message", None, "Sunny in Lisbon, rain in Porto.")]


def assert_openai_saw_the_loop(sent: dict[str, Any], question: str) -> None:
    """The calls and their results as OpenAI expects them."""
    assert sent["tools"] == [WEATHER]
    tail = [m for m in sent["messages"] if m["role"] != "system"][-4:]
    assert tail[0]["role"] == "user" and tail[0]["content"] == question
    assert [c["id"] for c in tail[1]["tool_calls"]] == ["call_1", "call_2"]
    assert json.loads(tail[1]["tool_calls"][1]["function"]["arguments"]) == {"city": "Porto"}
    assert tail[2:] == [{"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24C"},
                        {"role": "tool", "tool_call_id": "call_2", "content": "rain, 17C"}]


def assert_anthropic_saw_the_loop(sent: dict[str, Any], question: str) -> None:
    """Anthropic tool definitions, ``tool_use`` blocks in the assistant's turn and the
    results as ``tool_result`` blocks opening the next user turn."""
    assert sent["tools"] == [{"name": "weather",
                              "input_schema": WEATHER["function"]["parameters"]}]
    assert "tool_choice" not in sent  # auto, the upstream's default
    user, assistant, results = sent["messages"][-3:]
    assert question in json.dumps(user)
    uses = [b for b in assistant["content"] if b["type"] == "tool_use"]
    assert [(b["id"], b["input"]) for b in uses] == [("call_1", {"city": "Lisbon"}),
                                                     ("call_2", {"city": "Porto"})]
    # The history's last block is marked for the prompt cache.
    assert results["role"] == "user" and results["content"][:2] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "sunny, 24C"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "rain, 17C",
         "cache_control": {"type": "ephemeral"}}]


@pytest.mark.parametrize(("choice", "parallel", "expected"), [
    (None, None, None), ("auto", True, None), ("none", None, {"type": "none"}),
    ("required", None, {"type": "any"}),
    ({"type": "function", "function": {"name": "weather"}}, False,
     {"type": "tool", "name": "weather", "disable_parallel_tool_use": True}),
    ("auto", False, {"type": "auto", "disable_parallel_tool_use": True}),
])
def test_tool_choice_for_anthropic(choice: Any, parallel: Any, expected: Any) -> None:
    assert tool_choice(choice, parallel) == expected


def test_bad_tools_for_anthropic_are_a_422(home: Path, upstream: Upstream,
                                           live_server: LiveServer) -> None:
    app = proxy_app(home, upstream, kind="anthropic")
    with client(live_server(app)) as oai:
        for extra in ({"tools": [{"type": "function"}]},
                      {"tools": [{"type": "function", "function": {"name": "w",
                                                                   "parameters": "city"}}]},
                      {"tools": [WEATHER], "tool_choice": "sometimes"}):
            with pytest.raises(openai.UnprocessableEntityError, match="tool"):
                oai.chat.completions.create(model="claude-x", extra_headers=SESSION,
                                            messages=[{"role": "user", "content": "hi"}],
                                            extra_body=extra)
    assert upstream.requests == []


def test_tool_results_are_recorded_once_and_must_answer_a_call(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    upstream.replies += ["first answer", "second answer"]
    asked = {"role": "assistant", "content": None,
             "tool_calls": [weather_call("call_9", "Faro")]}
    messages = [{"role": "user", "content": "Weather in Faro?"}, asked,
                {"role": "tool", "tool_call_id": "call_9", "content": "windy"}]
    with client(live_server(app)) as oai:
        for _ in range(2):  # e.g. a retry: the same results again
            oai.chat.completions.create(model="gpt-test", messages=messages,
                                        extra_headers=SESSION)
        for bad in ([{"role": "tool", "tool_call_id": "call_9", "content": "x"}],
                    [*messages[:2], {"role": "tool", "tool_call_id": "nope", "content": "x"}],
                    [*messages[:2]]):
            with pytest.raises(openai.UnprocessableEntityError):
                oai.chat.completions.create(model="gpt-test", messages=bad,
                                            extra_headers=SESSION)
    log = [(e.type, e.content) for e in engine(app).events("work")]
    # A new session imported the client's history, then the call it answered.
    assert log == [("message", "Weather in Faro?"), ("tool_call", ""),
                   ("tool_result", "windy"), ("message", "first answer"),
                   ("message", "second answer")]


def test_the_clients_prompt_is_the_only_identity(home: Path, upstream: Upstream,
                                                 live_server: LiveServer) -> None:
    """Loci is a guest in the client's agent: memory and context, no persona of its own
    and no agent id used as a name; a persona the user configured still comes."""
    app = proxy_app(home, upstream, workspace=str(home))
    engine(app).remember("Maya lives in Lisbon", type="sticky")
    upstream.replies += ["Vous habitez à Lisbonne.", "Oui."]
    ask = {"role": "user", "content": "Where do I live?"}
    with client(live_server(app)) as oai:
        oai.chat.completions.create(model="gpt-test", extra_headers=SESSION, messages=[
            {"role": "system", "content": "You are CodeBot. Always answer in French."}, ask])
        system = system_text(upstream.last)
        assert system.startswith("You are CodeBot. Always answer in French.")
        assert "Maya lives in Lisbon" in system
        assert "## Principles" not in system and "You are default" not in system
        assert "helpful assistant" not in system
        (home / "SOUL.md").write_text("You are Sol, the user's own assistant.\n")
        oai.chat.completions.create(model="gpt-test", extra_headers=SESSION,
                                    messages=[ask])
        assert "You are Sol, the user's own assistant." in system_text(upstream.last)
    # The library's own compile keeps its defaults.
    (home / "SOUL.md").unlink()
    own = engine(app).compile("work", "hi").to_openai()[0]["content"]
    assert "## Principles" in own


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_an_image_goes_to_the_upstream_and_the_log_keeps_a_line(
        home: Path, upstream: Upstream, live_server: LiveServer, kind: str) -> None:
    app = proxy_app(home, upstream, kind)
    pixel = "data:image/png;base64,iVBORw0KGgo="
    parts: list[Any] = [{"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": pixel}},
                        {"type": "image_url", "image_url": {"url": "https://x.test/cat.jpg"}}]
    base = live_server(app)
    with client(base) as openai_client:
        openai_client.chat.completions.create(model="m", extra_headers=SESSION,
                                              messages=[{"role": "user", "content": parts}])
    sent = upstream.last["body"]["messages"][-1]["content"]
    if kind == "openai":  # the client's parts, as they came
        assert sent == [{"type": "text", "text": "What is this?"}, *parts[1:]]
    else:
        assert sent[-2:] == [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://x.test/cat.jpg"}}]
    assert engine(app).events("work")[0].content == (
        "What is this?\n[image: image/png]\n[image: https://x.test/cat.jpg]")
    # What one API cannot carry to the other is refused, not dropped.
    audio = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    with client(base) as openai_client:
        if kind == "anthropic":
            with pytest.raises(openai.UnprocessableEntityError, match="cannot be sent"):
                openai_client.chat.completions.create(
                    model="m", extra_headers=SESSION,
                    messages=[{"role": "user", "content": [audio]}])
        else:
            openai_client.chat.completions.create(
                model="m", extra_headers=SESSION, messages=[{"role": "user", "content": [audio]}])
            assert upstream.last["body"]["messages"][-1]["content"][-1] == audio


def test_an_empty_message_is_refused_before_the_upstream_is_called(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    with (client(live_server(app)) as openai_client,
          pytest.raises(openai.UnprocessableEntityError, match="needs some text")):
        openai_client.chat.completions.create(
            model="m", extra_headers=SESSION, messages=[{"role": "user", "content": " "}])
    assert upstream.requests == []


def test_the_upstream_client_is_built_once_and_closed_with_the_server(
        home: Path, upstream: Upstream) -> None:
    """While the server runs, every request reaches the upstream through one client (a
    client per request cost its construction, and its connections, every time); the
    server's stop closes it."""
    app = proxy_app(home, upstream)
    with serving(app) as base, client(base) as oai:
        kept = []
        for n in range(3):
            oai.chat.completions.create(model="m", extra_headers=SESSION, stream=n == 1,
                                        messages=[{"role": "user", "content": f"hi {n}"}])
            kept.append(app.state.hub.runtime.upstreams.kept())
        assert len(kept[0]) == 1 and kept[0] == kept[1] == kept[2]
        transport = kept[0][0].chat._http._client  # type: ignore[attr-defined]
        assert not transport.is_closed
    assert transport.is_closed and not app.state.hub.runtime.upstreams.kept()
    assert len(upstream.requests) == 3
