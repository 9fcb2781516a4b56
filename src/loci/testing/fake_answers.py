"""The fake provider's answers in each API's published wire format: OpenAI's chat
completion (whole or as its stream of chunks), Anthropic's message (whole or as its
stream of events, after thinking or compaction blocks) and OpenAI's Responses
``response`` (whole or streamed). Benchmarks build streams from them too."""

from __future__ import annotations

import json
from typing import Any

from loci import token_counter
from loci.testing.prompt_cache import canonical
from loci.testing.provider_rules import block_events, pieces

#: Text, OpenAI-shaped tool calls, or an assistant message (``content``, ``tool_calls``).
Reply = str | list[dict[str, Any]] | dict[str, Any]
_COUNTER = token_counter("gpt-4o")


def split(reply: Reply, anthropic: bool = False) -> tuple[str, list[dict[str, Any]]]:
    """(text, tool calls) of a reply; bare tool calls come after "Checking." on the
    Anthropic side, which answers tool use with a text block first."""
    if isinstance(reply, str):
        return reply, []
    if isinstance(reply, list):
        return ("Checking." if anthropic else ""), reply
    return str(reply.get("content") or ""), list(reply.get("tool_calls") or ())


def output_tokens(reply: Reply) -> int:
    text, calls = split(reply)
    text += canonical(calls) if calls else ""
    # A reply may hold a lone surrogate (a broken provider, in tests): counted as "?".
    return _COUNTER.count(text.encode("utf-8", "replace").decode())


def openai_events(reply: Reply, usage: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A chat completion as OpenAI streams it: text in pieces, or each tool call's id
    and name first and its arguments in pieces; then the finish reason, then the usage
    (only when the request asked for it, ``usage`` None otherwise)."""
    head = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    text, calls = split(reply)
    events = [chunk({"content": piece}) for piece in pieces(text, 4)]
    if not calls:
        events.append(chunk({}, "stop"))
    else:
        for index, call in enumerate(calls):
            events.append(chunk({"tool_calls": [{
                "index": index, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""}}]}))
            events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
                       for p in pieces(call["function"]["arguments"], 5)]
        events.append(chunk({}, "tool_calls"))
    if usage is not None:
        events.append({**head, "choices": [], "usage": usage})
    return events


def anthropic_events(reply: Reply, usage: dict[str, int],
                     before: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """A message as Anthropic streams it: ``message_start`` with the input usage, the
    ``before`` blocks (a compaction, a thinking block), a text block, one ``tool_use``
    block per call with its input in pieces, then ``message_delta`` with the output
    tokens and ``message_stop``."""
    before = before or []
    at = len(before)
    start_usage = {k: v for k, v in usage.items() if k != "output_tokens"}
    text, calls = split(reply, anthropic=True)
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
            "content": [], "usage": {**start_usage, "output_tokens": 1}}},
        *(event for n, block in enumerate(before) for event in block_events(n, block)),
        {"type": "content_block_start", "index": at,
         "content_block": {"type": "text", "text": ""}},
        *({"type": "content_block_delta", "index": at,
           "delta": {"type": "text_delta", "text": p}} for p in pieces(text, 4)),
        {"type": "content_block_stop", "index": at}]
    for index, call in enumerate(calls, start=at + 1):
        events.append({"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": call["id"], "name": call["function"]["name"],
            "input": {}}})
        events += [{"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": p}}
                   for p in pieces(call["function"]["arguments"], 5)]
        events.append({"type": "content_block_stop", "index": index})
    stop = "tool_use" if calls else "end_turn"
    return [*events, {"type": "message_delta", "delta": {"stop_reason": stop},
                      "usage": {"output_tokens": usage["output_tokens"]}},
            {"type": "message_stop"}]


def anthropic_message(reply: Reply, usage: dict[str, int],
                      before: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    text, calls = split(reply, anthropic=True)
    content = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                 "input": json.loads(c["function"]["arguments"] or "{}")} for c in calls]
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
            "content": [*(before or []), *content],
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None, "usage": usage}


def openai_completion(reply: Reply, usage: dict[str, Any]) -> dict[str, Any]:
    text, calls = split(reply)
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return {"id": "chatcmpl-fake", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": usage}


def responses_answer(reply: Reply, usage: dict[str, Any],
                     reasoning: dict[str, Any] | None) -> dict[str, Any]:
    """A Responses ``response``: a reasoning item (when asked for), the message, the
    function calls."""
    text, calls = split(reply)
    output = [reasoning] if reasoning else []
    if text:
        output.append({"type": "message", "id": "msg_fake", "role": "assistant",
                       "status": "completed", "content": [
                           {"type": "output_text", "text": text, "annotations": []}]})
    output += [{"type": "function_call", "id": f"fc_{c['id']}", "call_id": c["id"],
                "name": c["function"]["name"], "arguments": c["function"]["arguments"],
                "status": "completed"} for c in calls]
    return {"id": "resp_fake", "object": "response", "status": "completed",
            "model": "fake", "output": output, "usage": usage}


def responses_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The response as the Responses API streams it: each output item added and done,
    the message's text in deltas, then ``response.completed``."""
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {
        **response, "status": "in_progress", "output": []}}]
    for index, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.added", "output_index": index,
                       "item": {**item, "status": "in_progress"}})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events += [{"type": "response.output_text.delta", "output_index": index,
                        "item_id": item["id"], "content_index": 0, "delta": p}
                       for p in pieces(text, 4)]
        events.append({"type": "response.output_item.done", "output_index": index,
                       "item": item})
    events.append({"type": "response.completed", "response": response})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]
