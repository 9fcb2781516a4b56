"""Runs of text-only stream events taken out of a read in one pass (issue 48, item 2):
the joined text is exactly what decoding each event gives, whatever the characters;
a read holding any other event, or a template that is not sound, is left to the
event-by-event path; through a real upstream the provider clients' batches carry the
same text in a few merged events."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loci.apis.chat import text_only
from loci.apis.responses import text_delta as responses_text
from loci.llm._runs import TextRuns
from loci.llm.anthropic import AnthropicChat, text_delta
from loci.llm.openai_compat import OpenAICompatibleChat, OpenAIResponses
from loci.testing import FakeProvider, Fault
from loci.testing.fake_answers import (
    anthropic_events,
    openai_events,
    responses_answer,
    responses_events,
)

TRICKY = 'Quotes " and \\ backslash, a\nnewline, tab\t, café ☕ 😀, \u2028 and ] [MEM'


def chunk(text: str, **choice: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "m", "choices": [{"index": 0, "delta": {"content": text},
                                       "finish_reason": None, **choice}]}


def compact(event: Any) -> str:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


def read_of(payloads: list[str], head: str = "data: ") -> str:
    return "\n\n".join(head + p for p in payloads)


def learned(payload: str) -> TextRuns:
    runs = TextRuns("content", text_only)
    runs.learn([payload], [json.loads(payload)])
    return runs


@pytest.mark.parametrize("dumps", [compact, json.dumps], ids=["compact", "spaced"])
def test_a_read_of_text_chunks_is_their_joined_text(dumps: Any) -> None:
    runs = learned(dumps(chunk("Hello")))
    pieces = [TRICKY[i:i + 3] for i in range(0, len(TRICKY), 3)]
    assert runs.merge(read_of([dumps(chunk(p)) for p in pieces])) == TRICKY
    assert runs.event(TRICKY) == chunk(TRICKY)


def test_a_read_with_any_other_event_is_left_to_the_decoder() -> None:
    runs = learned(compact(chunk("Hello")))
    text = [compact(chunk(p)) for p in ("a", "b", "c")]
    assert runs.merge(read_of(text)) == "abc"
    others = [compact(chunk("", finish_reason="stop")), compact(chunk("x", index=1)),
              compact({**chunk("x"), "usage": {"total_tokens": 3}}), "[DONE]",
              compact({"error": {"message": "overloaded"}}), "{broken"]
    for other in others:
        for at in (0, 1, 3):
            payloads = [*text[:at], other, *text[at:]]
            assert runs.merge(read_of(payloads)) is None, (other, at)


def test_two_texts_where_the_template_has_one_are_not_merged() -> None:
    runs = learned(compact(chunk("Hello")))
    prefix, suffix = compact(chunk("\x00")).split('"\\u0000"')
    doubled = prefix + '"a","b"' + suffix  # not JSON, and not one text
    assert runs.merge(read_of([compact(chunk("x")), doubled])) is None


def test_events_with_an_event_line_are_merged_in_their_own_framing() -> None:
    runs = TextRuns("text", text_delta)
    events = anthropic_events("Hello there, friend", {"input_tokens": 1, "output_tokens": 2})
    deltas = [e for e in events if e["type"] == "content_block_delta"]
    payloads = [json.dumps(e) for e in deltas]
    runs.learn(payloads, deltas)
    framed = "\n\n".join(f"event: content_block_delta\ndata: {p}" for p in payloads)
    assert runs.merge(framed) == "Hello there, friend"
    start = json.dumps(events[0])
    assert runs.merge(framed + f"\n\nevent: message_start\ndata: {start}") is None


def test_no_template_is_learned_where_the_text_is_not_the_only_varying_part() -> None:
    nested = {"choices": [{"index": 0, "delta": {"content": "a"}}],
              "meta": {"content": "a"}}  # the key twice: which one is the text?
    runs = TextRuns("content", text_only)
    runs.learn([json.dumps(nested)], [nested])
    assert runs.merge(read_of([json.dumps(nested)] * 3)) is None
    finish = chunk("a", finish_reason="stop")  # not text only: never a template
    runs.learn([json.dumps(finish)], [finish])
    assert runs.merge(read_of([json.dumps(finish)] * 3)) is None


def sse(events: list[dict[str, Any]], anthropic: bool = False) -> bytes:
    if anthropic:
        return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
                        for e in events)
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + \
        b"data: [DONE]\n\n"


def test_a_chat_upstreams_batches_carry_every_character_in_few_chunks() -> None:
    reply = TRICKY * 1500
    body = sse(openai_events(reply, None))
    with FakeProvider(fault=lambda request: Fault(200, body, "text/event-stream")) as up, \
            OpenAICompatibleChat(model="m", base_url=f"{up.url}/v1", api_key="k") as chat:
        batches = list(chat.chat_batches({"model": "m", "stream": True, "messages": []}))
    chunks = [c for batch in batches for c in batch]
    assert "".join(text_only(c) or "" for c in chunks) == reply
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    # A read is one chunk, but for the first (the template is learned from it) and
    # the last (it holds the finish).
    assert sorted(len(batch) for batch in batches)[-3] == 1 and len(batches) > 5


def test_an_anthropic_upstreams_batches_carry_every_character_in_few_events() -> None:
    reply = TRICKY * 1500
    body = sse(anthropic_events(reply, {"input_tokens": 1, "output_tokens": 2}), True)
    with FakeProvider(fault=lambda request: Fault(200, body, "text/event-stream")) as up, \
            AnthropicChat(model="m", base_url=up.url, api_key="k") as chat:
        batches = list(chat.send_batches({"model": "m", "stream": True, "messages": []}))
    events = [data for batch in batches for _, data in batch]
    assert "".join(text_delta(e) or "" for e in events) == reply
    assert events[-1]["type"] == "message_delta"
    assert sorted(len(batch) for batch in batches)[-3] == 1 and len(batches) > 5


def test_a_lone_surrogate_teaches_nothing_and_is_left_to_the_decoder() -> None:
    runs = learned(json.dumps(chunk("\ud800")))
    assert runs.merge(read_of([json.dumps(chunk("a"))] * 2)) is None
    runs = learned(json.dumps(chunk("a")))
    assert runs.merge(read_of([json.dumps(chunk("\ud800")), json.dumps(chunk("b"))])) is None


def padded(event: dict[str, Any], n: int) -> dict[str, Any]:
    """``event`` as OpenAI streams it by default: random padding of varying length."""
    return {**event, "obfuscation": "x" * (n % 7) + "Q\"z" * (n % 2)}


def test_padding_and_numbering_that_vary_by_event_do_not_stop_a_run() -> None:
    runs = learned(compact(padded(chunk("Hello"), 3)))
    pieces = [TRICKY[i:i + 3] for i in range(0, len(TRICKY), 3)]
    read = read_of([compact(padded(chunk(p), n)) for n, p in enumerate(pieces)])
    assert runs.merge(read) == TRICKY
    # Only the fields that say nothing of the answer may vary: another id may not.
    other = {**padded(chunk("x"), 1), "id": "chatcmpl-2"}
    assert runs.merge(read + "\n\ndata: " + compact(other)) is None


def test_a_responses_upstreams_batches_carry_every_character_in_few_events() -> None:
    reply = TRICKY * 1500
    answer = responses_answer(reply, {"input_tokens": 1, "output_tokens": 2,
                                      "total_tokens": 3}, None)
    events = [padded(e, n) if e["type"] == "response.output_text.delta" else e
              for n, e in enumerate(responses_events(answer))]
    body = sse(events, anthropic=True)  # named events, numbered, padded
    with FakeProvider(fault=lambda request: Fault(200, body, "text/event-stream")) as up:
        api = OpenAIResponses(f"{up.url}/v1", "k")
        try:
            batches = list(api.send_batches({"model": "m", "stream": True, "input": "x"}))
        finally:
            api.close()
    got = [data for batch in batches for data in batch]
    assert "".join(responses_text(e) or "" for e in got) == reply
    assert got[-1]["type"] == "response.completed"
    assert sorted(len(batch) for batch in batches)[-3] == 1 and len(batches) > 5
