"""Turning events into chat messages that are valid input for the OpenAI API.

An event may carry provider blocks that must go back to that provider byte for byte
(Anthropic's signed ``thinking`` blocks, or the ``reasoning`` items of OpenAI's Responses
API with their ``encrypted_content``, of the assistant turn it starts, in
``metadata["provider_blocks"]``): its message keeps them under ``PROVIDER_BLOCKS``, which
the Chat Completions rendering drops and the Anthropic and Responses ones
(``loci.apis``) put first in the assistant turn, each only its own provider's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loci.apis.turn import COMPACTION_BLOCKS, PROVIDER_BLOCKS
from loci.models import Event
from loci.store.codec import canonical_json


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
