"""OpenAI's Responses API as the proxy's upstream (``[proxy] provider =
"openai-responses"``), against the fake provider (``loci.testing.fake_provider``: signed
reasoning items whose encrypted content must come back unchanged, function calls that
must be answered): a tool loop through the Chat Completions and Responses faces,
streamed or not, with the reasoning items kept in the log and sent back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from openai import OpenAI

from loci import load_settings
from loci.server import create_app
from loci.testing import FakeProvider
from loci.testing.provider_rules import signature
from tests.server.conftest import LiveServer
from tests.server.fake_upstream import SESSION, engine

WEATHER = {"type": "function", "function": {
    "name": "weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
CALL = [{"id": "call_1", "type": "function",
         "function": {"name": "weather", "arguments": json.dumps({"city": "Porto"})}}]


@pytest.fixture
def provider(upstream: FakeProvider) -> FakeProvider:
    upstream.replies += [CALL, "Rain in Porto."]
    return upstream


def app_for(home: Path, provider: FakeProvider) -> FastAPI:
    return create_app(load_settings(
        store=f"sqlite:///{home / 'r.db'}", proxy_provider="openai-responses",
        proxy_base_url=f"{provider.url}/v1", proxy_api_key="sk-fake"))


def reasoning_sent(provider: FakeProvider) -> list[dict[str, Any]]:
    return [item for item in provider.requests[-1]["body"]["input"]
            if item.get("type") == "reasoning"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_chat_tool_loop_runs_on_a_responses_upstream_with_its_reasoning_kept(
        home: Path, provider: FakeProvider, live_server: LiveServer, stream: bool) -> None:
    app = app_for(home, provider)
    ask: dict[str, Any] = {"model": "gpt-5", "tools": [WEATHER], "extra_headers": SESSION,
                           "reasoning_effort": "low", "max_tokens": 300}
    with OpenAI(base_url=f"{live_server(app)}/v1", api_key="open", max_retries=0) as oai:
        messages: list[Any] = [{"role": "system", "content": "Be brief."},
                               {"role": "user", "content": "Weather in Porto?"}]
        if stream:
            chunks = list(oai.chat.completions.create(messages=messages, stream=True, **ask))
            calls = [c for chunk in chunks for d in chunk.choices
                     for c in d.delta.tool_calls or ()]
            assert calls[0].id == "call_1" and calls[0].function.name == "weather"
        else:
            first = oai.chat.completions.create(messages=messages, **ask)
            assert first.choices[0].message.tool_calls[0].id == "call_1"  # type: ignore[index]
        sent = provider.requests[-1]["body"]
        assert sent["input"][0] == {"role": "developer", "content": "Be brief."}
        assert sent["tools"] == [{"type": "function", **WEATHER["function"]}]
        assert sent["store"] is False and sent["max_output_tokens"] == 300
        assert sent["reasoning"] == {"effort": "low"}
        messages += [{"role": "assistant", "content": None, "tool_calls": CALL},
                     {"role": "tool", "tool_call_id": "call_1", "content": "rain, 17C"}]
        second = oai.chat.completions.create(messages=messages, **ask)
    assert second.choices[0].message.content == "Rain in Porto."
    # The first answer's reasoning item went back, unchanged, before the call it led to
    # (the fake provider refuses an altered one, and a call without its output).
    [item] = reasoning_sent(provider)
    assert item["encrypted_content"] == signature(f"reasoning|{item['id']}")
    kinds = [i.get("type", "message") for i in provider.requests[-1]["body"]["input"]]
    at = kinds.index("reasoning")
    assert kinds[at + 1:at + 3] == ["function_call", "function_call_output"]
    loci = engine(app)
    call = next(e for e in loci.events("work") if e.type == "tool_call")
    assert call.metadata["provider_blocks"] == [item]
    # Cached input is reported as the Responses API counts it.
    assert second.usage is not None and second.usage.prompt_tokens > 0
    assert [r.face for r in loci.usage.records("work")] == ["chat", "chat"]


@pytest.mark.parametrize("stream", [False, True])
def test_the_responses_face_on_a_responses_upstream(
        home: Path, provider: FakeProvider, live_server: LiveServer, stream: bool) -> None:
    app = app_for(home, provider)
    tool = {"type": "function", **WEATHER["function"]}
    ask: dict[str, Any] = {"model": "gpt-5", "tools": [tool], "extra_headers": SESSION,
                           "reasoning": {"effort": "medium"}}
    with OpenAI(base_url=f"{live_server(app)}/v1", api_key="open", max_retries=0) as oai:
        if stream:
            with oai.responses.stream(input="Weather in Porto?", **ask) as events:
                first = events.get_final_response()
        else:
            first = oai.responses.create(input="Weather in Porto?", **ask)
        [call] = [o for o in first.output if o.type == "function_call"]
        assert call.call_id == "call_1"
        done = oai.responses.create(
            input=[{"type": "function_call_output", "call_id": "call_1",
                    "output": "rain, 17C"}], previous_response_id=first.id, **ask)
    assert done.output_text == "Rain in Porto."
    assert provider.requests[0]["body"]["reasoning"] == {"effort": "medium"}
    assert len(reasoning_sent(provider)) == 1
