"""A compiled context as the messages of one provider call: the client's own system
text first (Loci is a guest in its agent), then Loci's context, and the new message's
attachments after its text (``llm.media``). One builder per API, shared by the proxy's
upstreams and ``Loci.turn``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loci.context.compiled import CompiledContext
from loci.llm.media import anthropic_blocks, openai_parts, responses_parts

#: The ``cache_control`` marks Anthropic accepts in one request.
MAX_BREAKPOINTS = 4
_TOOL_MEDIA = "(the images and files of the tool results above)"


def openai_messages(context: CompiledContext, system: Sequence[dict[str, Any]],
                    attachments: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """Chat Completions ``messages``."""
    messages = [{"role": "system", "content": block["text"]} for block in system]
    messages += context.to_openai()
    if attachments and messages[-1]["role"] == "tool":
        # A tool message holds text only: the results' images follow as the user's.
        messages.append({"role": "user", "content": [
            {"type": "text", "text": _TOOL_MEDIA}, *openai_parts(attachments)]})
    elif attachments:
        last = messages[-1]
        messages[-1] = {**last, "content": [{"type": "text", "text": last["content"]},
                                             *openai_parts(attachments)]}
    return messages


def responses_input(context: CompiledContext, system: Sequence[dict[str, Any]],
                    attachments: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """Responses ``input`` items (the client's system text as ``developer`` messages)."""
    items = [{"role": "developer", "content": block["text"]} for block in system]
    items += context.to_responses()
    if attachments:
        last = items[-1]
        items[-1] = {**last, "content": [{"type": "input_text", "text": last["content"]},
                                         *responses_parts(attachments)]}
    return items


def anthropic_request(context: CompiledContext, system: Sequence[dict[str, Any]],
                      attachments: Sequence[dict[str, Any]] = (), *, thinking: bool = False,
                      compaction: bool = False, tools: Sequence[dict[str, Any]] = ()
                      ) -> dict[str, Any]:
    """Messages ``system`` and ``messages`` (and ``tools`` if given), within Anthropic's
    limit of cache breakpoints (``limit_breakpoints``)."""
    rendered = context.to_anthropic(thinking=thinking, compaction=compaction)
    own = [dict(block) for block in system]
    messages = rendered["messages"]
    history = [b for m in messages for b in m["content"] if "cache_control" in b]
    if attachments:
        messages[-1]["content"] += anthropic_blocks(attachments)
    body: dict[str, Any] = {"system": own + rendered["system"], "messages": messages}
    if tools:
        body["tools"] = list(tools)
    limit_breakpoints(body, len(own), history)
    return body


def limit_breakpoints(body: dict[str, Any], own: int, history: list[dict[str, Any]]
                      ) -> None:
    """At most ``MAX_BREAKPOINTS`` ``cache_control`` marks in all, Anthropic's limit:
    Loci's first system block and the end of its ``history`` keep their marks, the
    client's marks (on its tools, its ``own`` first system blocks, its attachments)
    come next, latest first, and Loci's second system block keeps its mark if there is
    room left."""
    system = body["system"]
    loci = [b for b in system[own:] if "cache_control" in b]
    kept = len(loci[:1]) + len(history)
    blocks = [*(body.get("tools") or ()), *system[:own],
              *(b for m in body["messages"] for b in m["content"])]
    clients = [b for b in blocks if "cache_control" in b and not any(b is h for h in history)]
    for block in clients[:max(0, len(clients) - (MAX_BREAKPOINTS - kept))]:
        del block["cache_control"]
    if kept + len(clients) + len(loci[1:]) > MAX_BREAKPOINTS:
        for block in loci[1:]:
            del block["cache_control"]
