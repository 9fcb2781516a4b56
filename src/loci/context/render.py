"""Turning events into chat messages that are valid input for the OpenAI API."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loci.context.compiled import canonical_json
from loci.models import Event


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
                    "arguments": canonical_json(event.args or {}),
                },
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last.get("tool_calls"):
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": event.content or None,
                                 "tool_calls": [call]})
        elif event.type == "tool_result":
            messages.append({
                "role": "tool",
                "tool_call_id": event.tool_call_id or "",
                "content": event.content,
            })
        else:
            messages.append({"role": event.role, "content": event.content})
    return messages


def group_turns(events: Sequence[Event]) -> list[list[Event]]:
    """Split history into turns, each starting at a user message, so that history is
    trimmed by whole turns and a tool call never loses its result."""
    turns: list[list[Event]] = []
    for event in events:
        if not turns or (event.type == "message" and event.role == "user"):
            turns.append([])
        turns[-1].append(event)
    return turns
