"""One call per turn (``Loci.turn`` / ``Loci.reply``): the official ``openai`` and
``anthropic`` clients send ``Turn.request`` to the fake provider, which refuses what the
providers refuse (broken tool pairs, altered thinking signatures), and the answers they
return go back to ``reply`` as the SDK objects they are."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from loci import Loci, Turn, ValidationError
from loci.testing import FakeProvider

#: Each test that takes ``loci`` runs on Loci and on AsyncLoci (``tests/conftest.py``).
BOTH_APIS = True
pytestmark = [pytest.mark.loci_settings(memory_mirror=False), pytest.mark.real_clock]

CALL = [{"id": "call_w", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}]
TOOLS = [{"type": "function", "function": {
    "name": "weather", "parameters": {"type": "object",
                                      "properties": {"city": {"type": "string"}}}}}]


def scripted(body: dict[str, Any]) -> Any:
    """Tool calls when the user asks about the weather; text otherwise."""
    messages = body.get("messages") or body.get("input") or []
    last = messages[-1]
    text = str(last.get("content"))
    if "weather" in text and "tool" not in text:
        return CALL
    return "It is 22°C in Lisbon." if last.get("role") == "tool" or "tool_result" in text \
        or last.get("type") == "function_call_output" else "Noted."


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider(reply=scripted) as provider:
        yield provider


def texts(loci: Loci, session: str) -> list[tuple[str, str | None, str]]:
    return [(e.type, e.role, e.content) for e in loci.events(session)]


def test_the_new_message_goes_once_and_is_recorded_with_the_answer(
        loci: Loci, fake: FakeProvider) -> None:
    client = openai.OpenAI(base_url=fake.url + "/v1", api_key="x")
    turn = loci.turn("s1", "I live in Lisbon.", model="gpt-4o")
    assert isinstance(turn, Turn)
    sent = turn.request["messages"]
    assert [m["content"] for m in sent].count("I live in Lisbon.") == 1
    assert loci.sessions() == []  # nothing recorded until the answer
    answer = client.chat.completions.create(model="gpt-4o", **turn.request)
    result = loci.reply(turn, answer)
    assert result.clean == "Noted."
    assert texts(loci, "s1") == [("message", "user", "I live in Lisbon."),
                                 ("message", "assistant", "Noted.")]
    with pytest.raises(ValidationError, match="recorded already"):
        loci.reply(turn, answer)
    # The ledger has the call, with the usage the provider reported.
    [call] = loci.usage.records("s1")
    assert call.usage.input_tokens == answer.usage.prompt_tokens > 0


def test_a_failed_call_retried_records_the_message_once(loci: Loci) -> None:
    loci.turn("s1", "Remember: the deploy key rotates on Fridays.")  # the call failed
    turn = loci.turn("s1", "Remember: the deploy key rotates on Fridays.")
    loci.reply(turn, "Noted.")
    assert [e.content for e in loci.events("s1")] == [
        "Remember: the deploy key rotates on Fridays.", "Noted."]


def test_a_client_that_resends_the_whole_list_records_only_what_is_new(
        loci: Loci, fake: FakeProvider) -> None:
    client = openai.OpenAI(base_url=fake.url + "/v1", api_key="x")
    messages: list[Any] = [{"role": "system", "content": "You are terse."},
                           {"role": "user", "content": "Hi, I'm Ana."},
                           {"role": "assistant", "content": "Hello Ana."},
                           {"role": "user", "content": "I live in Lisbon."}]
    turn = loci.turn("s1", messages, model="gpt-4o")
    # A new session imports the earlier messages; the client's system text goes first.
    assert turn.request["messages"][0] == {"role": "system", "content": "You are terse."}
    assert turn.context.static_prefix == ""  # a guest: no persona of Loci's own
    answer = client.chat.completions.create(model="gpt-4o", **turn.request)
    loci.reply(turn, answer)
    messages += [answer.choices[0].message, {"role": "user", "content": "And you?"}]
    loci.reply(loci.turn("s1", messages, model="gpt-4o"), "Fine.")
    assert [e.content for e in loci.events("s1")] == [
        "Hi, I'm Ana.", "Hello Ana.", "I live in Lisbon.", "Noted.", "And you?", "Fine."]


def test_an_openai_tool_loop(loci: Loci, fake: FakeProvider) -> None:
    client = openai.OpenAI(base_url=fake.url + "/v1", api_key="x")
    messages: list[Any] = [{"role": "user", "content": "What's the weather?"}]
    turn = loci.turn("s1", messages, model="gpt-4o")
    answer = client.chat.completions.create(model="gpt-4o", tools=TOOLS, **turn.request)
    loci.reply(turn, answer)
    messages += [answer.choices[0].message,
                 {"role": "tool", "tool_call_id": "call_w", "content": "22°C, sunny"}]
    for _ in range(2):  # a retried call records its results once
        turn = loci.turn("s1", messages, model="gpt-4o")
    assert turn.message is None
    sent = turn.request["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == "call_w" and sent[-1]["role"] == "tool"
    answer = client.chat.completions.create(model="gpt-4o", tools=TOOLS, **turn.request)
    loci.reply(turn, answer)
    assert texts(loci, "s1") == [
        ("message", "user", "What's the weather?"), ("tool_call", "assistant", ""),
        ("tool_result", "tool", "22°C, sunny"),
        ("message", "assistant", "It is 22°C in Lisbon.")]


def test_an_upstream_that_reuses_call_ids_has_each_loop_s_result_recorded_and_sent(
        loci: Loci, fake: FakeProvider) -> None:
    """Local and compatible servers number calls per answer (the fake says ``call_w``
    every time): a second loop's result is a new one, not the first loop's again."""
    client = openai.OpenAI(base_url=fake.url + "/v1", api_key="x")
    for city, result in (("Lisbon", "22°C, sunny"), ("Oslo", "-5°C, snow")):
        messages: list[Any] = [{"role": "user", "content": f"What's the weather, {city}?"}]
        turn = loci.turn("s1", messages, model="gpt-4o")
        answer = client.chat.completions.create(model="gpt-4o", tools=TOOLS, **turn.request)
        loci.reply(turn, answer)
        messages += [answer.choices[0].message,
                     {"role": "tool", "tool_call_id": "call_w", "content": result}]
        for _ in range(2):  # a retried call still records its result once
            turn = loci.turn("s1", messages, model="gpt-4o")
        assert turn.request["messages"][-1]["content"] == result
        loci.reply(turn, client.chat.completions.create(
            model="gpt-4o", tools=TOOLS, **turn.request))
    assert [e.content for e in loci.events("s1") if e.type == "tool_result"] == [
        "22°C, sunny", "-5°C, snow"]


def weather_calls(*cities: str) -> list[dict[str, Any]]:
    return [{"id": "call_0", "type": "function", "function": {
        "name": "weather", "arguments": f'{{"city": "{city}"}}'}} for city in cities]


def test_two_calls_of_one_id_in_one_answer_keep_both_results_once(loci: Loci) -> None:
    messages: list[Any] = [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": weather_calls("Paris", "Oslo")},
        {"role": "tool", "tool_call_id": "call_0", "content": "Paris: sun"},
        {"role": "tool", "tool_call_id": "call_0", "content": "Oslo: snow"}]
    for _ in range(2):  # the retry records nothing more
        turn = loci.turn("s1", messages, model="gpt-4o")
    assert [(e.type, e.content) for e in loci.events("s1")][1:] == [
        ("tool_call", ""), ("tool_call", ""), ("tool_result", "Paris: sun"),
        ("tool_result", "Oslo: snow")]
    sent = turn.request["messages"]
    calls = [c["id"] for m in sent for c in m.get("tool_calls") or ()]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == calls
    assert len(set(calls)) == 2


def test_a_call_left_unanswered_before_a_message_is_not_the_next_of_its_id(
        loci: Loci) -> None:
    """The log's ``call_0`` (Paris) never got its result and the user moved on: the
    client's later ``call_0`` (Oslo) with its result is a new call, recorded with it."""
    loci.add_events("s1", [{"type": "message", "role": "user", "content": "Paris?"},
                           {"type": "tool_call", "tool_name": "weather",
                            "tool_call_id": "call_0", "args": {"city": "Paris"}},
                           {"type": "message", "role": "user", "content": "Oslo?"}])
    loci.turn("s1", [
        {"role": "user", "content": "Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": weather_calls("Oslo")},
        {"role": "tool", "tool_call_id": "call_0", "content": "Oslo: snow"}], model="gpt-4o")
    assert [(e.type, e.args) for e in loci.events("s1")][3:] == [
        ("tool_call", {"city": "Oslo"}), ("tool_result", None)]


def test_an_anthropic_tool_loop_with_thinking(loci: Loci, fake: FakeProvider) -> None:
    client = anthropic.Anthropic(base_url=fake.url, api_key="x")
    tools = [{"name": "weather", "input_schema": {"type": "object"}}]
    thinking = {"type": "enabled", "budget_tokens": 1024}
    messages: list[Any] = [{"role": "user", "content": "What's the weather?"}]

    def call() -> Any:
        turn = loci.turn("s1", messages, api="anthropic", system="Be brief.",
                         model="claude-opus-4-5", thinking=True)
        answer = client.messages.create(model="claude-opus-4-5", max_tokens=2048,
                                        tools=tools, thinking=thinking, **turn.request)
        loci.reply(turn, answer)
        return turn, answer

    turn, first = call()
    assert turn.request["system"][0]["text"] == "Be brief."
    assert first.content[0].type == "thinking"
    messages += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_w",
                                               "content": "22°C, sunny"}]}]
    # The fake refuses a thinking block that does not come back as it was signed.
    turn, answer = call()
    sent_back = fake.requests[1]["body"]["messages"][1]["content"][0]
    assert sent_back["signature"] == first.content[0].signature
    assert answer.content[-1].text == "It is 22°C in Lisbon."
    assert [e.type for e in loci.events("s1")] == [
        "message", "message", "tool_call", "tool_result", "message"]


def test_a_user_turn_that_also_answers_the_calls_keeps_the_results(
        loci: Loci, fake: FakeProvider) -> None:
    """Claude Code's turn after the user stops a tool: the rejected call's result and
    the user's words in one user message (a real log's shape). The fake refuses a call
    whose result does not follow it, as Anthropic does."""
    client = anthropic.Anthropic(base_url=fake.url, api_key="x")
    tools = [{"name": "weather", "input_schema": {"type": "object"}}]
    messages: list[Any] = [{"role": "user", "content": "What's the weather?"}]

    def call() -> Any:
        turn = loci.turn("s1", messages, api="anthropic", model="claude-opus-4-5")
        answer = client.messages.create(model="claude-opus-4-5", max_tokens=512,
                                        tools=tools, **turn.request)
        loci.reply(turn, answer)
        return answer

    first = call()
    rejected = ("The user doesn't want to proceed with this tool use. The tool use was "
                "rejected (eg. if it was a file edit, the new_string was NOT written to "
                "the file). STOP what you are doing and wait for the user to tell you how "
                "to proceed.")
    messages += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                 {"role": "user", "content": [
                     {"type": "tool_result", "tool_use_id": "call_w", "is_error": True,
                      "content": rejected},
                     {"type": "text", "text": "[Request interrupted by user for tool use]"},
                     {"type": "text", "text": "Just tell me about Lisbon instead."}]}]
    call()
    sent = fake.requests[1]["body"]["messages"]
    assert sent[-1]["content"][0]["type"] == "tool_result"
    assert sent[-1]["content"][0]["tool_use_id"] == "call_w"
    assert "Lisbon instead" in str(sent[-1]["content"])
    assert [(e.type, e.tool_call_id) for e in loci.events("s1")][2:4] == [
        ("tool_call", "call_w"), ("tool_result", "call_w")]


def test_a_responses_tool_loop(loci: Loci, fake: FakeProvider) -> None:
    client = openai.OpenAI(base_url=fake.url + "/v1", api_key="x")
    tools = [{"type": "function", "name": "weather", "parameters": {"type": "object"}}]
    items: list[Any] = [{"role": "user", "content": "What's the weather?"}]
    turn = loci.turn("s1", items, api="responses", model="gpt-5")
    answer = client.responses.create(model="gpt-5", tools=tools, **turn.request)
    loci.reply(turn, answer)
    items += [*answer.output, {"type": "function_call_output", "call_id": "call_w",
                               "output": "22°C, sunny"}]
    turn = loci.turn("s1", items, api="responses", model="gpt-5")
    kinds = [item.get("type", "message") for item in turn.request["input"]]
    assert kinds[-2:] == ["function_call", "function_call_output"]
    answer = client.responses.create(model="gpt-5", tools=tools, **turn.request)
    assert loci.reply(turn, answer).clean == "It is 22°C in Lisbon."
    assert len(loci.usage.records("s1")) == 2


def test_bad_turns_are_refused_before_anything_is_written(loci: Loci) -> None:
    with pytest.raises(ValidationError, match="api must be one of"):
        loci.turn("s1", "hi", api="gemini")
    with pytest.raises(ValidationError, match="last message"):
        loci.turn("s1", [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": "hello"}])
    with pytest.raises(ValidationError, match="needs some text"):
        loci.turn("s1", "  ")
    with pytest.raises(ValidationError, match="unknown call"):
        loci.turn("s1", [{"role": "assistant", "content": "", "tool_calls": CALL},
                         {"role": "tool", "tool_call_id": "call_x", "content": "?"}])
    with pytest.raises(ValidationError, match="an answer must be"):
        loci.reply(loci.turn("s1", "hi"), 42)
    assert loci.sessions() == []
