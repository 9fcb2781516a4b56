"""The providers' published refusals, for the fake provider (``fake_provider``): what
Anthropic and OpenAI answer 400 to, so that tests and benchmarks notice a proxy that
alters a signed block, sends an empty text block or splits a tool call from its result.

Anthropic's extended thinking: with ``thinking`` enabled each answer starts with a signed
``thinking`` block; every thinking block must come back with its text and signature
unchanged, and the assistant turn whose tool results close a request must start with
its thinking block. Tool pairing (both providers): each tool call is answered by a
result right after it, and each result answers a call.
"""

from __future__ import annotations

import hashlib
from typing import Any


def pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def signature(thinking: str) -> str:
    """The fake upstream's signature of a thinking text."""
    return hashlib.sha256(f"fake-upstream|{thinking}".encode()).hexdigest()


def thinking_block(number: int) -> dict[str, Any]:
    text = f"Let me think about step {number}."
    return {"type": "thinking", "thinking": text, "signature": signature(text)}


def empty_text(body: dict[str, Any]) -> str | None:
    """Anthropic's refusal of an empty text block, or None."""
    system = body.get("system")
    places = [("system", system if isinstance(system, list) else [])]
    places += [(f"messages.{n}", m["content"]) for n, m in enumerate(body["messages"])
               if isinstance(m.get("content"), list)]
    for where, blocks in places:
        if any(b.get("type") == "text" and not b.get("text") for b in blocks):
            return f"{where}: text content blocks must be non-empty"
    return None


def thinking_error(body: dict[str, Any]) -> str | None:
    """What Anthropic would refuse in ``body``'s thinking blocks, or None."""
    messages: list[dict[str, Any]] = body.get("messages") or []
    for n, message in enumerate(messages):
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "thinking" and block.get("signature") != signature(
                    block.get("thinking", "")):
                return f"messages.{n}: Invalid `signature` in `thinking` block"
    last = messages[-1] if messages else {}
    last_content = last.get("content")
    if any(b.get("type") == "tool_result"
           for b in (last_content if isinstance(last_content, list) else ())):
        assistant: dict[str, Any] = next(
            (m for m in reversed(messages) if m["role"] == "assistant"), {})
        first = (assistant.get("content") or [{}])[0]
        if not isinstance(first, dict) or first.get("type") not in (
                "thinking", "redacted_thinking"):
            return ("Expected `thinking` or `redacted_thinking`, but found "
                    f"`{first.get('type') if isinstance(first, dict) else 'text'}`. When "
                    "`thinking` is enabled, a final `assistant` message must start with a "
                    "thinking block")
    return None


def block_events(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    """A thinking or compaction block as Anthropic streams it, at ``index``: thinking
    text in pieces and its signature; a compaction block's content in one delta."""
    if block["type"] == "compaction":
        start = {**block, "content": None, "encrypted_content": None}
        deltas = [{"type": "compaction_delta", "content": block["content"],
                   "encrypted_content": block["encrypted_content"]}]
    else:
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [*({"type": "thinking_delta", "thinking": p}
                    for p in pieces(block["thinking"], 9)),
                  {"type": "signature_delta", "signature": block["signature"]}]
    return [{"type": "content_block_start", "index": index, "content_block": start},
            *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
            {"type": "content_block_stop", "index": index}]


def compaction_block(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Anthropic's summary of ``messages`` (``compact_20260112``), signed."""
    content = f"Summary of {len(messages)} earlier message(s)."
    return {"type": "compaction", "content": content,
            "encrypted_content": signature(f"compaction|{content}")}


def compaction_error(body: dict[str, Any]) -> str | None:
    """Anthropic's refusal of a compaction block not sent back as it came, or of
    messages that do not start with the user's."""
    messages = body.get("messages") or [{}]
    if messages[0].get("role") != "user":
        return "messages: the first message must use the \"user\" role"
    for n, message in enumerate(messages):
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "compaction" and block.get("encrypted_content") != (
                    signature(f"compaction|{block.get('content')}")):
                return f"messages.{n}: the compaction block was altered"
    return None


def pairing_error(body: dict[str, Any], anthropic: bool) -> str | None:
    """The provider's refusal of tool calls not answered right after the message that
    made them, or of results that answer no call; None if every pair is whole."""
    messages = list(body.get("messages") or ())
    pending: list[str] = []  # the calls of the message before, awaiting their results
    n = 0
    while n < len(messages):
        start = n
        if not anthropic and messages[n].get("role") == "tool":
            calls: list[str] = []
            results = []
            while n < len(messages) and messages[n].get("role") == "tool":
                results.append(str(messages[n].get("tool_call_id")))
                n += 1
        else:
            calls, results = _tool_ids(messages[n], anthropic)
            n += 1
        if sorted(results) != sorted(pending):
            return (f"messages.{start}: tool calls {pending} must be answered right after "
                    f"the message that made them" if pending else
                    f"messages.{start}: tool results {results} answer no tool call")
        pending = calls
    return f"tool calls {pending} are not answered" if pending else None


def _tool_ids(message: dict[str, Any], anthropic: bool) -> tuple[list[str], list[str]]:
    """(ids of the calls a message makes, ids of the results it brings)."""
    if not anthropic:
        return [str(c.get("id")) for c in message.get("tool_calls") or ()], []
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return ([str(b.get("id")) for b in blocks if b.get("type") == "tool_use"],
            [str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"])


def reasoning_item(number: int) -> dict[str, Any]:
    """A reasoning item of the Responses API, its opaque content signed."""
    item_id = f"rs_{number}"
    return {"type": "reasoning", "id": item_id, "summary": [],
            "encrypted_content": signature(f"reasoning|{item_id}")}


def responses_error(body: dict[str, Any]) -> str | None:
    """What OpenAI's Responses API would refuse in ``body``: a reasoning item whose
    encrypted content was altered, a function call without its output, an output
    without its call; None if none."""
    given = body.get("input")
    items: list[dict[str, Any]] = given if isinstance(given, list) else []
    calls, outputs = [], []
    for item in items:
        kind = item.get("type")
        if kind == "reasoning" and item.get("encrypted_content") != signature(
                f"reasoning|{item.get('id')}"):
            return f"The encrypted content for item {item.get('id')} could not be verified."
        if kind == "function_call":
            calls.append(str(item.get("call_id")))
        elif kind == "function_call_output":
            if str(item.get("call_id")) not in calls:
                return f"No tool call found for function call output {item.get('call_id')}."
            outputs.append(str(item.get("call_id")))
    missing = [c for c in calls if c not in outputs]
    return f"No tool output found for function call {missing[0]}." if missing else None
