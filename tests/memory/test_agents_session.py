"""Loci as an OpenAI Agents SDK ``Session`` (``loci.integrations.agents_session``),
with the real ``openai-agents`` runner and its default model class, the Responses API
served by the fake provider (no network)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

from loci import Loci, NotFoundError, ValidationError
from loci.integrations.agents_session import LociSession
from loci.testing import FakeProvider

pytestmark = [pytest.mark.loci_settings(memory_mirror=False), pytest.mark.real_clock]

CALL = [{"id": "call_w", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}]


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"22°C and sunny in {city}"


def run(fake: FakeProvider, session: LociSession, question: str) -> Any:
    set_tracing_disabled(True)  # the SDK would send traces to OpenAI
    client = AsyncOpenAI(base_url=f"{fake.url}/v1", api_key="sk-fake", max_retries=0)
    agent = Agent(name="Trip helper", instructions="You help plan trips.", tools=[weather],
                  model=OpenAIResponsesModel(model="gpt-5", openai_client=client))

    async def go() -> Any:
        try:
            return await Runner.run(agent, question, session=session)
        finally:
            await client.close()

    return asyncio.run(go())


def sent_text(fake: FakeProvider) -> str:
    return json.dumps(fake.requests[-1]["body"]["input"])


def test_a_runs_items_are_recorded_once_and_the_next_run_gets_locis_context(
        loci: Loci) -> None:
    replies: list[Any] = [CALL, "Sunny in Lisbon.", "You asked about Lisbon."]
    loci.remember("The user is travelling to Lisbon in May", type="project_context")
    with FakeProvider(reply=lambda body: replies.pop(0)) as fake:
        session = LociSession("trip", loci)
        assert run(fake, session, "Weather in Lisbon?").final_output == "Sunny in Lisbon."
        events = loci.events("trip")
        assert [(e.type, e.role) for e in events] == [
            ("message", "user"), ("tool_call", "assistant"), ("tool_result", "tool"),
            ("message", "assistant")]
        assert events[2].content == "22°C and sunny in Lisbon"
        second = run(fake, session, "What did I ask?")
    assert second.final_output == "You asked about Lisbon."
    # The second run was given Loci's context: the first run's exchange, once, and the
    # memory of the trip.
    text = sent_text(fake)
    assert text.count("Weather in Lisbon?") == 1 and "travelling to Lisbon in May" in text
    assert [e.content for e in loci.events("trip") if e.type == "message"][-2:] == [
        "What did I ask?", "You asked about Lisbon."]


def test_items_come_back_as_added_pop_archives_and_clear_erases(loci: Loci) -> None:
    session = LociSession("raw", loci, compiled=False)
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather in Lisbon?"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
        {"type": "function_call", "call_id": "call_w", "name": "weather",
         "arguments": '{"city": "Lisbon"}', "id": "fc_1"},
        {"type": "function_call_output", "call_id": "call_w", "output": "sunny"},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}]}]

    async def go() -> tuple[Any, ...]:
        assert await session.get_items() == []
        await session.add_items(items)
        every, last_two = await session.get_items(), await session.get_items(limit=2)
        popped = await session.pop_item()
        after = await session.get_items()
        # The reasoning item rode with the call it led to, as the proxy keeps it; the
        # popped message is archived, not deleted.
        events = loci.events("raw")
        assert events[1].metadata["provider_blocks"] == [items[1]]
        assert events[3].archived and not any(e.archived for e in events[:3])
        await session.clear_session()
        return every, last_two, popped, after, await session.get_items()

    every, last_two, popped, after, cleared = asyncio.run(go())
    assert every == items and last_two == items[-2:]
    assert popped == items[-1] and after == items[:-1]
    assert cleared == []
    with pytest.raises(NotFoundError):
        loci.events("raw")


def test_a_popped_item_leaves_the_compiled_history_and_is_taken_once(loci: Loci) -> None:
    """Found by an attack: a compile kept its cached live events after a pop (the
    popped answer stayed in the history, or came twice), and pops of two sessions on one
    id took the same item many times."""
    compiled = LociSession("shared", loci)
    raw = LociSession("shared", loci, compiled=False)

    def shown() -> list[str]:
        return [str(i.get("content")) for i in asyncio.run(compiled.get_items())
                if i.get("role") == "assistant"]

    async def fill() -> None:
        await raw.add_items([{"role": "user", "content": "hello"},
                             {"role": "assistant", "content": "answer one"}])
        await raw.add_items([{"role": "user", "content": "again"},
                             {"role": "assistant", "content": "answer two"}])
    asyncio.run(fill())
    assert any("answer two" in text for text in shown())
    assert asyncio.run(compiled.pop_item()) == {"role": "assistant", "content": "answer two"}
    assert not any("answer two" in text for text in shown())

    async def pop_all() -> list[Any]:
        sessions = [LociSession("shared", loci, compiled=False) for _ in range(2)]
        return await asyncio.gather(*[s.pop_item() for s in sessions for _ in range(5)])
    popped = [p for p in asyncio.run(pop_all()) if p is not None]
    assert len(popped) == 3 and len({json.dumps(p, sort_keys=True) for p in popped}) == 3
    assert asyncio.run(raw.get_items()) == []


def test_odd_items_and_limits(loci: Loci) -> None:
    """What the SDK's own sessions take, this one takes; what is no item is a clear
    error (found by an attack: raw AttributeError, TypeError, RecursionError)."""
    session = LociSession("odd", loci, compiled=False)
    deep: Any = "x"
    for _ in range(5_000):
        deep = {"a": deep}

    async def go() -> None:
        for bad in ("hello", None, 5):
            with pytest.raises(ValidationError):
                await session.add_items([bad])
        await session.add_items([
            {"role": "user", "content": 5},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": {"a": 1}},
            {"type": "function_call_output", "call_id": "c1", "output": "done"}])
        with pytest.raises(ValidationError):
            await session.add_items([{"type": "function_call", "call_id": "c2", "name": "f",
                                      "arguments": deep}])
        assert len(await session.get_items()) == 3
        assert await session.get_items(limit=0) == []
        assert len(await session.get_items(limit=10)) == 3
        assert (await session.get_items(limit=1))[0]["output"] == "done"
        with pytest.raises(ValidationError):
            await session.get_items(limit=-1)
    asyncio.run(go())
    call = next(e for e in loci.events("odd") if e.type == "tool_call")
    assert call.args == {"a": 1}
    assert loci.events("odd")[0].content == "5"


def test_compiled_items_keep_calls_with_their_outputs_and_what_a_message_showed(
        loci: Loci) -> None:
    """The newest N compiled items never start with an output whose call was cut off
    (the API refuses it); a message of an image alone, or a refusal, is not lost."""
    session = LociSession("shown", loci)

    async def go() -> list[list[dict[str, Any]]]:
        await session.add_items([
            {"role": "user", "content": "Look up c1"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "found"},
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]},
            {"role": "user", "content": [{"type": "input_image",
                                          "image_url": "data:image/png;base64,AAAA"}]}])
        return [await session.get_items(limit=n) for n in (2, 3, 4)]
    for items in asyncio.run(go()):
        outputs = {i.get("call_id") for i in items if i.get("type") == "function_call_output"}
        calls = {i.get("call_id") for i in items if i.get("type") == "function_call"}
        assert outputs <= calls
    texts = json.dumps(asyncio.run(session.get_items()))
    assert "I can't." in texts and "[image: image/png]" in texts


def test_items_with_no_event_of_their_own_wait_for_the_next(loci: Loci) -> None:
    """A reasoning or hosted-tool item added alone was dropped, and popping a message
    dropped the reasoning that rode with it (found by an attack); they wait now."""
    session = LociSession("riders", loci, compiled=False)
    question = {"role": "user", "content": "q"}
    thought = {"type": "reasoning", "id": "rs_1", "summary": []}
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    answer = {"type": "message", "role": "assistant",
              "content": [{"type": "output_text", "text": "ans"}]}

    async def go() -> None:
        await session.add_items([question])
        await session.add_items([thought])
        await session.add_items([search])
        assert await session.get_items() == [question, thought, search]
        await session.add_items([answer])  # they ride with it now
        assert await session.get_items() == [question, thought, search, answer]
        assert await session.pop_item() == answer
        assert await session.get_items() == [question, thought, search]
        assert await session.pop_item() == search
        assert await session.get_items() == [question, thought]
        await session.clear_session()
        assert await session.get_items() == []
    asyncio.run(go())
    assert loci.state() == []
