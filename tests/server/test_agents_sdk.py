"""The OpenAI Agents SDK (its default model class calls the Responses API) pointed at
Loci's proxy, with the scripted OpenAI-shaped upstream behind it: a two-tool task runs
through, and a second session is given what the first one learned."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agents import Agent, Runner, function_tool, set_default_openai_api, set_tracing_disabled
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

from tests.server.conftest import LiveServer
from tests.server.fake_upstream import Upstream, engine, proxy_app, system_text


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"22°C and sunny in {city}"


@function_tool
def local_time(city: str) -> str:
    """The local time in a city."""
    return f"12:00 in {city}"


def run(base: str, session: str, question: str) -> Any:
    client = AsyncOpenAI(base_url=f"{base}/v1", api_key="open", max_retries=0,
                         default_headers={"X-Loci-Session": session})
    agent = Agent(name="Trip helper", instructions="You help plan trips.",
                  tools=[weather, local_time],
                  model=OpenAIResponsesModel(model="gpt-test", openai_client=client))

    async def go() -> Any:
        try:
            return await Runner.run(agent, question)
        finally:
            await client.close()

    return asyncio.run(go())


def test_an_agents_sdk_agent_runs_a_two_tool_task_and_remembers(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    set_tracing_disabled(True)  # the SDK would send traces to OpenAI
    set_default_openai_api("responses")
    app = proxy_app(home, upstream)
    calls = [{"id": "call_w", "type": "function",
              "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}},
             {"id": "call_t", "type": "function",
              "function": {"name": "local_time", "arguments": '{"city": "Lisbon"}'}}]
    upstream.replies += [calls, "Sunny and noon in Lisbon. [MEMORY:fact] The user is "
                                "travelling to Lisbon [/MEMORY]", "You are going to Lisbon."]
    base = live_server(app)
    first = run(base, "trip", "Weather and time in Lisbon?")
    assert first.final_output == "Sunny and noon in Lisbon."
    sent = upstream.requests[1]["body"]["messages"]
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert results == {"call_w": "22°C and sunny in Lisbon", "call_t": "12:00 in Lisbon"}
    log = [(e.type, e.tool_call_id or e.content) for e in engine(app).events("trip")]
    assert log == [("message", "Weather and time in Lisbon?"),
                   ("tool_call", "call_w"), ("tool_call", "call_t"),
                   ("tool_result", "call_w"), ("tool_result", "call_t"),
                   ("message", "Sunny and noon in Lisbon.")]
    second = run(base, "later", "Where am I going?")
    assert second.final_output == "You are going to Lisbon."
    assert "The user is travelling to Lisbon" in system_text(upstream.last)
    assert "You help plan trips." in system_text(upstream.last)
