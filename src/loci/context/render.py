"""Turning events into chat messages that are valid input for the OpenAI API.

An event may carry provider blocks that must go back to that provider byte for byte
(Anthropic's signed ``thinking`` blocks, or the ``reasoning`` items of OpenAI's Responses
API with their ``encrypted_content``, of the assistant turn it starts, in
``metadata["provider_blocks"]``): its message keeps them under ``PROVIDER_BLOCKS``, which
the Chat Completions rendering drops and the Anthropic and Responses ones put first in
the assistant turn, each only its own provider's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from loci.llm.messages import PROVIDER_BLOCKS
from loci.models import Event
from loci.store.codec import canonical_json

#: Anthropic's kept blocks (signed thinking; its own compaction's summary); the
#: Responses API's.
THINKING_BLOCKS = ("thinking", "redacted_thinking")
COMPACTION_BLOCKS = ("compaction",)
REASONING_ITEMS = ("reasoning",)
#: A provider's context edit that clears old tool results itself (Anthropic's
#: ``clear_tool_uses_20250919``): with it, Loci leaves tool outputs whole.
CLEARS_TOOLS = "clear_tool_uses"
#: A provider's edit that compacts the conversation itself (Anthropic's
#: ``compact_20260112``): its ``compaction`` block stands for what came before it, so
#: Loci's history and Loci's own compactions start there.
COMPACTS = "compact_"


def events_to_messages(events: Sequence[Event]) -> list[dict[str, Any]]:
    """OpenAI chat messages; consecutive tool calls form one assistant message."""
    messages: list[dict[str, Any]] = []
    for event in events:
        if event.type == "tool_call":
            call = {
                "id": event.tool_call_id or f"call_{event.id}",
                "type": "function",
                "function": {
                    "name": event.tool_name,
                    "arguments": canonical_json(event.args) if event.args else "{}",
                },
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last.get("tool_calls"):
                last["tool_calls"].append(call)
            else:
                messages.append(_with_blocks(event, {
                    "role": "assistant", "content": event.content or None,
                    "tool_calls": [call]}))
        elif event.type == "tool_result":
            content = event.content if event.masked is None else event.masked
            if answers_open_call(messages, event.tool_call_id):
                messages.append({"role": "tool", "tool_call_id": event.tool_call_id,
                                 "content": content})
            else:  # its call is not right before it: a tool message would be refused
                name = f" of {event.tool_name}" if event.tool_name else ""
                messages.append({"role": "user", "content": f"[tool result{name}, call "
                                 f"{event.tool_call_id or '?'}]\n{content}"})
        else:
            messages.append(_with_blocks(event, {"role": event.role,
                                                 "content": event.content}))
    return messages


def _with_blocks(event: Event, message: dict[str, Any]) -> dict[str, Any]:
    blocks = (event.metadata or {}).get(PROVIDER_BLOCKS)
    if event.role == "assistant" and isinstance(blocks, list) and blocks:
        message[PROVIDER_BLOCKS] = blocks
    return message


def openai_message(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` without the keys that are Loci's own (provider blocks)."""
    if PROVIDER_BLOCKS not in message:
        return message
    return {k: v for k, v in message.items() if k != PROVIDER_BLOCKS}


def answers_open_call(messages: Sequence[dict[str, Any]], call_id: str | None) -> bool:
    """Whether a tool result for ``call_id`` may follow ``messages``: the assistant's
    tool calls (then only other results) come right before it, with that id unanswered."""
    answered: set[str] = set()
    for message in reversed(messages):
        if message["role"] == "tool":
            answered.add(message["tool_call_id"])
            continue
        calls = message.get("tool_calls") if message["role"] == "assistant" else None
        return bool(calls) and call_id is not None and call_id not in answered and any(
            call["id"] == call_id for call in calls or ())
    return False


def to_anthropic_messages(messages: Sequence[dict[str, Any]], *, thinking: bool = False,
                          compaction: bool = False) -> list[dict[str, Any]]:
    """OpenAI-style history as Anthropic Messages: tool calls become ``tool_use`` blocks,
    tool results ``tool_result`` blocks in a user turn, and same-role turns merge. With
    ``thinking`` (the request enables it), an assistant turn starts with the thinking
    blocks it was answered with, as they came; with ``compaction`` (the request asks
    the provider to compact), with its compaction block."""
    wanted = (THINKING_BLOCKS if thinking else ()) + (COMPACTION_BLOCKS if compaction else ())
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        kept = [b for b in message.get(PROVIDER_BLOCKS) or () if b.get("type") in
                wanted] if role == "assistant" else None
        if kept:
            _append(out, "assistant", [dict(block) for block in kept])
        if role == "tool":
            block: dict[str, Any] = {"type": "tool_result",
                                     "tool_use_id": message.get("tool_call_id", ""),
                                     "content": message.get("content") or ""}
            role = "user"
        elif message.get("tool_calls"):
            blocks: list[dict[str, Any]] = []
            if message.get("content"):
                blocks.append({"type": "text", "text": message["content"]})
            blocks += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                        "input": json.loads(c["function"]["arguments"] or "{}")}
                       for c in message["tool_calls"]]
            _append(out, "assistant", blocks)
            continue
        else:
            role = "assistant" if role == "assistant" else "user"
            block = {"type": "text", "text": message.get("content") or ""}
        _append(out, role, [block])
    return out


def _append(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def to_responses_input(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages as Responses input items: messages, ``function_call`` and
    ``function_call_output`` items, an assistant turn's kept ``reasoning`` items first."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        items += [dict(b) for b in message.get(PROVIDER_BLOCKS) or ()
                  if b.get("type") in REASONING_ITEMS] if role == "assistant" else []
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": message.get("content") or ""})
            continue
        if message.get("content"):
            items.append({"role": "developer" if role == "system" else role,
                          "content": message["content"]})
        items += [{"type": "function_call", "call_id": c["id"], "name": c["function"]["name"],
                   "arguments": c["function"]["arguments"] or "{}"}
                  for c in message.get("tool_calls") or ()]
    return items


def since_provider_compaction(events: Sequence[Event]) -> list[Event]:
    """``events`` from the turn whose answer holds the provider's latest compaction
    summary on (all of them if none does): the provider ignores what came before that
    answer, which its summary stands for; the user's message that opened the turn stays,
    since a request starts with the user's."""
    for at in range(len(events) - 1, -1, -1):
        blocks = (events[at].metadata or {}).get(PROVIDER_BLOCKS)
        if isinstance(blocks, list) and any(
                isinstance(b, dict) and b.get("type") in COMPACTION_BLOCKS
                and b.get("content") for b in blocks):
            opener = next((n for n in range(at, -1, -1) if events[n].type == "message"
                           and events[n].role == "user"), at)
            return list(events[opener:])
    return list(events)
