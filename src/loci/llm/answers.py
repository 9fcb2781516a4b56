"""A model's answer in one shape, whatever API gave it: a :class:`Completion`.

Read from an OpenAI Chat Completions payload, an Anthropic Messages payload or an
OpenAI Responses payload, as dicts or as the providers' SDK objects. Tool calls come out
in OpenAI's shape; blocks that must go back to the provider as they came (Anthropic's
signed ``thinking``, its ``compaction`` summaries, Responses ``reasoning`` items) come
out whole. Shared by the proxy's upstreams and ``Loci.reply``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loci.errors import ValidationError
from loci.llm.wire import as_dict, mapping, message_text, read_usage
from loci.models import Usage

#: Anthropic blocks kept as they came: signed thinking, and the summary of the
#: provider's own compaction (``compact_20260112``), round-tripped verbatim.
KEPT_BLOCKS = ("thinking", "redacted_thinking", "compaction")
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                 "tool_use": "tool_calls"}


@dataclass
class Completion:
    content: str
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)
    tool_calls: list[Any] | None = None
    id: str | None = None
    #: Provider blocks that must go back as they came (Anthropic ``thinking`` and
    #: ``redacted_thinking`` with their signatures), in their order.
    blocks: list[dict[str, Any]] | None = None


def read_answer(answer: Any) -> Completion:
    """Any model answer as a :class:`Completion`: text; a chat ``message`` dict (the
    assistant's, with ``tool_calls``); a Chat Completions, Messages or Responses payload
    (dict or SDK object)."""
    if isinstance(answer, Completion):
        return answer
    if isinstance(answer, str):
        return Completion(content=answer)
    data = as_dict(answer)
    if "choices" in data:
        return chat_answer(data)
    if "output" in data:
        return responses_answer(data)
    if data.get("type") == "message" or (isinstance(data.get("content"), list) and (
            data.get("role") == "assistant" and "tool_calls" not in data)):
        return anthropic_answer(data)
    if data.get("role") == "assistant":
        return Completion(content=message_text(data.get("content")),
                          tool_calls=data.get("tool_calls") or None)
    raise ValidationError("an answer must be text, an assistant message, or a Chat "
                          "Completions, Messages or Responses result")


def chat_answer(payload: Mapping[str, Any]) -> Completion:
    """A Chat Completions payload's first choice."""
    choices = payload.get("choices") or [{}]
    choice = mapping(choices[0])
    message = mapping(choice.get("message"))
    return Completion(
        content=message_text(message.get("content")),
        finish_reason=str(choice.get("finish_reason") or "stop"),
        usage=read_usage(payload.get("usage")),
        tool_calls=message.get("tool_calls") or None,
        id=payload.get("id") if isinstance(payload.get("id"), str) else None,
    )


def anthropic_answer(payload: Mapping[str, Any]) -> Completion:
    """A Messages payload: its text blocks, ``tool_use`` blocks as tool calls."""
    blocks = [b for b in payload.get("content") or () if isinstance(b, dict)]
    return Completion(
        content="".join(str(b["text"]) for b in blocks
                        if b.get("type") == "text" and isinstance(b.get("text"), str)),
        finish_reason=STOP_REASONS.get(str(payload.get("stop_reason")), "stop"),
        usage=read_usage(payload.get("usage")),
        tool_calls=anthropic_calls(blocks) or None,
        id=payload.get("id") if isinstance(payload.get("id"), str) else None,
        blocks=[b for b in blocks if b.get("type") in KEPT_BLOCKS] or None,
    )


def anthropic_calls(blocks: Any) -> list[dict[str, Any]]:
    """The ``tool_use`` blocks of a Messages answer as OpenAI ``tool_calls``."""
    return [{"id": block.get("id"), "type": "function",
             "function": {"name": block.get("name"),
                          "arguments": json.dumps(block.get("input") or {})}}
            for block in blocks or ()
            if isinstance(block, dict) and block.get("type") == "tool_use"]


def responses_answer(payload: Mapping[str, Any]) -> Completion:
    """A ``response`` object: its ``message`` text, ``function_call`` items as tool
    calls, ``reasoning`` items kept whole."""
    output = [mapping(item) for item in payload.get("output") or ()]
    text = "".join(str(part.get("text") or "") for item in output
                   if item.get("type") == "message"
                   for part in map(mapping, item.get("content") or ())
                   if part.get("type") == "output_text")
    calls = [responses_call(item) for item in output if item.get("type") == "function_call"]
    cut = mapping(payload.get("incomplete_details")).get("reason") == "max_output_tokens"
    return Completion(
        content=text, usage=read_usage(payload.get("usage")), tool_calls=calls or None,
        finish_reason="tool_calls" if calls else "length" if cut else "stop",
        id=payload.get("id") if isinstance(payload.get("id"), str) else None,
        blocks=[dict(item) for item in output if item.get("type") == "reasoning"] or None)


def responses_call(item: Mapping[str, Any]) -> dict[str, Any]:
    """A ``function_call`` item as an OpenAI tool call."""
    return {"id": str(item.get("call_id") or ""), "type": "function",
            "function": {"name": str(item.get("name") or ""),
                         "arguments": str(item.get("arguments") or "{}")}}
