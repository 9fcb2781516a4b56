"""Loci as a Google ADK agent's memory (``loci.integrations.adk_memory``), against the
real ``google-adk`` package: an ADK ``Runner`` with an ``LlmAgent`` and ADK's own
``load_memory`` tool, the model a scripted ``BaseLlm`` (no network)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models._capabilities import LlmCapabilities
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import load_memory
from google.genai import types

from loci import Runtime
from loci.integrations.adk_memory import LociMemoryService

pytestmark = [pytest.mark.loci_settings(memory_mirror=False), pytest.mark.real_clock]


class ScriptedModel(BaseLlm):
    """Answers a statement with "Noted."; a question with a call of ``load_memory``,
    then with the texts the tool returned."""

    model: str = "scripted"

    @property
    def capabilities(self) -> LlmCapabilities:
        return LlmCapabilities(output_schema_and_tools=False)

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False
                                     ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        parts = last.parts or []
        answered = next((p.function_response for p in parts if p.function_response), None)
        text = " ".join(p.text for p in parts if p.text)
        if answered is not None:
            # ADK hands the tool's return value over as it came, under "result".
            result = (answered.response or {})["result"]
            found = [p.text for m in result.memories for p in m.content.parts or () if p.text]
            reply = types.Part(text="From memory: " + " | ".join(found))
        elif text.endswith("?"):
            reply = types.Part(function_call=types.FunctionCall(
                name="load_memory", args={"query": text}))
        else:
            reply = types.Part(text="Noted.")
        yield LlmResponse(content=types.Content(role="model", parts=[reply]))


def say(runner: Runner, user: str, session: str, text: str) -> list[str]:
    async def go() -> list[str]:
        said = []
        async for event in runner.run_async(user_id=user, session_id=session,
                                            new_message=types.Content(
                                                role="user", parts=[types.Part(text=text)])):
            said += [p.text for p in (event.content.parts if event.content else []) or []
                     if p.text]
        return said
    return asyncio.run(go())


def test_an_adk_agent_recalls_what_it_was_told_in_another_session(
        runtime: Runtime) -> None:
    memory = LociMemoryService(runtime)
    sessions = InMemorySessionService()
    agent = LlmAgent(name="helper", model=ScriptedModel(), tools=[load_memory])
    runner = Runner(agent=agent, app_name="helper", session_service=sessions,
                    memory_service=memory)

    async def start(session: str) -> None:
        await sessions.create_session(app_name="helper", user_id="maya", session_id=session)

    asyncio.run(start("first"))
    assert say(runner, "maya", "first", "My sister Ana lives in Porto.") == ["Noted."]
    first = asyncio.run(sessions.get_session(app_name="helper", user_id="maya",
                                             session_id="first"))
    assert first is not None
    for _ in range(2):  # ADK adds a session many times while it runs: once is kept
        asyncio.run(memory.add_session_to_memory(first))
    loci = runtime.scope("maya", "helper")
    assert [(e.role, e.content) for e in loci.events("first")] == [
        ("user", "My sister Ana lives in Porto."), ("assistant", "Noted.")]
    assert loci.events("first")[1].metadata["name"] == "helper"

    asyncio.run(start("second"))
    said = say(runner, "maya", "second", "Where does my sister Ana live?")
    assert said and "Ana lives in Porto" in said[-1]
    # The tool call and its result are ADK events too: recorded once added.
    second = asyncio.run(sessions.get_session(app_name="helper", user_id="maya",
                                              session_id="second"))
    assert second is not None
    asyncio.run(memory.add_session_to_memory(second))
    types_seen = [e.type for e in loci.events("second")]
    assert types_seen.count("tool_call") == 1 and types_seen.count("tool_result") == 1
    call = next(e for e in loci.events("second") if e.type == "tool_call")
    assert call.tool_name == "load_memory" and "sister" in json.dumps(call.args)
    # Another user of the app, and the same user in another app, find nothing.
    for app, user in (("helper", "omar"), ("other-app", "maya")):
        found = asyncio.run(memory.search_memory(app_name=app, user_id=user,
                                                 query="sister Ana Porto"))
        assert found.memories == []


def test_facts_are_added_searched_and_deleted(runtime: Runtime) -> None:
    memory = LociMemoryService(runtime)
    entry = MemoryEntry(content=types.Content(role="user", parts=[
        types.Part(text="Maya prefers window seats on trains")]))

    async def go() -> tuple[Any, Any]:
        await memory.add_memory(app_name="helper", user_id="maya", memories=[entry],
                                custom_metadata={"type": "user_preference"})
        found = await memory.search_memory(app_name="helper", user_id="maya",
                                           query="which seats does Maya prefer?")
        [fact] = [m for m in found.memories if not (m.id or "").startswith("event:")]
        await memory.delete_memory(app_name="helper", user_id="maya", memory_id=fact.id)
        await memory.delete_memory(app_name="helper", user_id="maya", memory_id=fact.id)
        after = await memory.search_memory(app_name="helper", user_id="maya",
                                           query="which seats does Maya prefer?")
        return fact, after

    fact, after = asyncio.run(go())
    assert fact.content.parts[0].text == "Maya prefers window seats on trains"
    assert runtime.scope("maya", "helper").memories("user_preference") == []
    assert after.memories == []
    with pytest.raises(NotImplementedError, match="erased with its session"):
        asyncio.run(memory.delete_memory(app_name="helper", user_id="maya",
                                         memory_id="event:1"))


def test_a_response_without_an_id_answers_the_call_of_its_name(runtime: Runtime) -> None:
    """Gemini pairs a function response with its call by name; ADK events may carry no
    ids: the result is the call's, not loose text after a call left unanswered."""
    from google.adk.events.event import Event
    from google.adk.sessions.session import Session
    events = [
        Event(author="user", content=types.Content(role="user", parts=[
            types.Part(text="What's the weather in Porto?")])),
        Event(author="agent", content=types.Content(role="model", parts=[
            types.Part(function_call=types.FunctionCall(name="weather",
                                                        args={"city": "Porto"}))])),
        Event(author="agent", content=types.Content(role="user", parts=[
            types.Part(function_response=types.FunctionResponse(name="weather",
                                                                response={"t": 20}))]))]
    memory = LociMemoryService(runtime)
    asyncio.run(memory.add_session_to_memory(Session(id="s1", app_name="app", user_id="u",
                                                     events=events)))
    chat = runtime.scope("u", "app").compile("s1", "And now?").to_openai()
    [call_id] = [c["id"] for m in chat for c in m.get("tool_calls") or ()]
    assert [m["content"] for m in chat if m.get("tool_call_id") == call_id] == ['{"t": 20}']
