"""The OpenAI Responses face end to end: the official ``openai`` SDK's
``responses.create`` (and its streaming) against the proxy served by uvicorn, with the
scripted upstreams of ``fake_upstream`` behind it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from tests.server.conftest import LiveServer
from tests.server.fake_upstream import SESSION, Upstream, client, engine, proxy_app, system_text

WEATHER = {"type": "function", "name": "weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}}


def test_a_response_gets_context_and_leaves_memory(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    engine(app).remember("Maya lives in Lisbon", type="sticky")
    upstream.replies.append("You live in Lisbon. [MEMORY:user_preference] Maya likes short "
                            "answers [/MEMORY]")
    with client(live_server(app)) as oai:
        response = oai.responses.create(model="gpt-test", instructions="Be brief.",
                                        input="Where do I live?", max_output_tokens=40,
                                        extra_headers=SESSION)
    assert response.output_text == "You live in Lisbon." and response.status == "completed"
    assert response.usage is not None and response.usage.total_tokens == 18
    sent = upstream.last["body"]
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
    assert "Maya lives in Lisbon" in system_text(upstream.last) and sent["max_tokens"] == 40
    assert "## Principles" not in system_text(upstream.last)
    loci = engine(app)
    assert [(e.role, e.content) for e in loci.events("work")] == [
        ("user", "Where do I live?"), ("assistant", "You live in Lisbon.")]
    assert [m.content for m in loci.memories("user_preference")] == ["Maya likes short answers"]


def test_a_developer_message_after_the_user_s_is_its_instructions(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    """As Chat takes a system message anywhere, Responses takes one after the user's."""
    app = proxy_app(home, upstream)
    upstream.replies.append("Lisbon.")
    with client(live_server(app)) as oai:
        response = oai.responses.create(model="gpt-test", extra_headers=SESSION, input=[
            {"role": "user", "content": "Where do I live?"},
            {"role": "developer", "content": "Answer in one word."}])
        assert response.output_text == "Lisbon."
        with pytest.raises(openai.UnprocessableEntityError, match="no message"):
            oai.responses.create(model="gpt-test", extra_headers=SESSION,
                                 input=[{"role": "developer", "content": "Be brief."}])
    assert "Answer in one word." in str(upstream.last["body"]["messages"])
    assert [e.content for e in engine(app).events("work")] == ["Where do I live?", "Lisbon."]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_streaming_follows_the_published_events(
        home: Path, upstream: Upstream, live_server: LiveServer, kind: str) -> None:
    app = proxy_app(home, upstream, kind)
    upstream.replies.append("By the river. [MEMORY:fact] Maya likes rivers [/MEMORY]")
    with client(live_server(app)) as oai, oai.responses.stream(
            model="gpt-test", input=[{"role": "user", "content": "Where?"}],
            extra_headers=SESSION) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert final.output_text == "By the river."
    assert [e.content for e in engine(app).events("work")] == ["Where?", "By the river."]


@pytest.mark.parametrize("chained", [False, True])
def test_a_function_call_loop(home: Path, upstream: Upstream, live_server: LiveServer,
                              chained: bool) -> None:
    """The client sends the whole conversation back, or (``previous_response_id``) only
    the outputs of the calls: Loci's log holds the calls either way."""
    app = proxy_app(home, upstream)
    call = [{"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}]
    upstream.replies += [call, "Sunny in Lisbon."]
    question: dict[str, Any] = {"role": "user", "content": "Weather in Lisbon?"}
    with client(live_server(app)) as oai:
        first = oai.responses.create(model="gpt-test", tools=[WEATHER],  # type: ignore[list-item]
                                     input=[question], extra_headers=SESSION)
        calls = [item for item in first.output if item.type == "function_call"]
        assert [(c.call_id, c.name, c.arguments) for c in calls] == [
            ("call_1", "weather", '{"city": "Lisbon"}')]
        output = {"type": "function_call_output", "call_id": "call_1",
                  "output": "22°C and sunny"}
        items: list[Any] = [output] if chained else [
            question, *[c.model_dump() for c in calls], output]
        second = oai.responses.create(
            model="gpt-test", tools=[WEATHER], input=items,  # type: ignore[list-item]
            previous_response_id=first.id if chained else None, extra_headers=SESSION)
    assert second.output_text == "Sunny in Lisbon."
    sent = upstream.last["body"]["messages"]
    assert {"role": "tool", "tool_call_id": "call_1", "content": "22°C and sunny"} in sent
    log = [(e.type, e.tool_call_id or e.content) for e in engine(app).events("work")]
    assert log == [("message", "Weather in Lisbon?"), ("tool_call", "call_1"),
                   ("tool_result", "call_1"), ("message", "Sunny in Lisbon.")]


def test_refusals(home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    with client(live_server(app)) as oai:
        with pytest.raises(openai.UnprocessableEntityError, match="session"):
            oai.responses.create(model="m", input="hi")
        with pytest.raises(openai.UnprocessableEntityError, match="file ids"):
            oai.responses.create(model="m", extra_headers=SESSION, input=[
                {"role": "user", "content": [{"type": "input_image", "file_id": "file-1",
                                              "detail": "auto"}]}])
        with pytest.raises(openai.UnprocessableEntityError, match="function tools"):
            oai.responses.create(model="m", extra_headers=SESSION, input="hi",
                                 tools=[{"type": "web_search"}])  # type: ignore[list-item]
        assert oai.responses.create(model="m", input="hi", user="by-user").output_text == "ok"
    assert [e.content for e in engine(app).events("by-user")] == ["hi", "ok"]


def test_images_and_files_go_to_the_upstream(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    pdf = "data:application/pdf;base64,JVBERi0="
    with client(live_server(app)) as oai:
        oai.responses.create(model="m", extra_headers=SESSION, input=[
            {"role": "user", "content": [
                {"type": "input_text", "text": "Compare these."},
                {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "low"},
                {"type": "input_file", "file_data": pdf, "filename": "plan.pdf"}]}])
    assert upstream.last["body"]["messages"][-1]["content"] == [
        {"type": "text", "text": "Compare these."},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}},
        {"type": "file", "file": {"file_data": pdf, "filename": "plan.pdf"}}]
    assert engine(app).events("work")[0].content == (
        "Compare these.\n[image: https://x.test/a.png]\n[document: plan.pdf]")


def test_compact_is_answered_by_locis_compaction(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    earlier: list[Any] = []
    for n in range(40):
        detail = " ".join(f"detail{n}x{k}" for k in range(40))
        earlier += [{"role": "user", "content": f"Step {n}: we chose the blue option. {detail}"},
                    {"role": "assistant", "content": f"Noted step {n}, the blue one."}]
    with client(live_server(app)) as oai:
        compacted = oai.responses.compact(model="gpt-test", input=earlier,
                                          extra_headers=SESSION)
        assert compacted.object == "response.compaction"
        *users, item = compacted.output
        assert item.type == "compaction" and item.encrypted_content
        assert [u.content[0].text for u in users] == [m["content"] for m in earlier[::2]]
        loci = engine(app)
        [record] = loci.compactions("work")
        assert compacted.usage.input_tokens > compacted.usage.output_tokens > 0
        # The compacted output comes back as input: its compaction item is skipped.
        reply = oai.responses.create(model="gpt-test", extra_headers=SESSION, input=[
            *({"role": "user", "content": u.content[0].text} for u in users),
            {"type": "compaction", "id": item.id, "encrypted_content": item.encrypted_content},
            {"role": "user", "content": "Which option did we choose?"}])
    assert reply.output_text == "ok"
    assert record.summary_event_id is not None
    assert [e.content for e in loci.events("work")][-2:] == [
        "Which option did we choose?", "ok"]
    with (client(live_server(proxy_app(home / "other", upstream))) as oai,
          pytest.raises(openai.UnprocessableEntityError, match="session")):
        oai.responses.compact(model="gpt-test", input="hi")
