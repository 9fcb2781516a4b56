"""Tool calls through the proxy.

An agent's tool loop is two kinds of call: the upstream answers with ``tool_calls``,
then the client sends the tools' results (``role: tool`` messages) and no new user
message. Both become events of the session (``tool_call`` and ``tool_result``), so the
next compiled history shows them as OpenAI expects: an assistant message with
``tool_calls``, then one ``tool`` message per result (``context.render``). Results are
recorded before the upstream is called (the context must contain them); a retried call
sends the same results again and they are recognised by their ``tool_call_id``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from loci.engine import Loci
from loci.errors import NotFoundError, ValidationError
from loci.llm.media import read
from loci.llm.messages import PROVIDER_BLOCKS

#: How far back the session's live events are searched for the calls being answered.
_RECENT_EVENTS = 500


def merge_fragments(fragments: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Streamed tool-call pieces as whole calls: OpenAI streams each call's id and name
    first, then its arguments in pieces, every piece with the call's ``index``."""
    calls: dict[int, dict[str, Any]] = {}
    for piece in fragments:
        index = int(piece.get("index", len(calls)))
        call = calls.setdefault(index, {"id": "", "type": "function",
                                        "function": {"name": "", "arguments": ""}})
        call["id"] = piece.get("id") or call["id"]
        function = piece.get("function") or {}
        call["function"]["name"] = function.get("name") or call["function"]["name"]
        call["function"]["arguments"] += function.get("arguments") or ""
    return [calls[i] for i in sorted(calls)]


def call_events(calls: Sequence[dict[str, Any]],
                metadata: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``tool_call`` events for an assistant's tool calls (OpenAI's shape); the first
    one carries ``metadata`` (the turn's provider blocks)."""
    events: list[dict[str, Any]] = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise ValidationError("each tool call needs a 'function' object")
        name = str(function.get("name") or "")
        if not name:
            raise ValidationError("a tool call without a function name")
        events.append({"type": "tool_call", "role": "assistant", "tool_name": name,
                       "tool_call_id": str(call.get("id") or ""),
                       "args": _arguments(function.get("arguments"))})
    if events and metadata:
        events[0]["metadata"] = metadata
    return events


def _arguments(raw: Any) -> dict[str, Any]:
    """A call's arguments as the object they encode (OpenAI sends a JSON string)."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if raw else {}
    except (TypeError, ValueError):
        value = None
    return value if isinstance(value, dict) else {"arguments": raw}


def split_results(messages: Sequence[dict[str, Any]]
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the messages before, the trailing run of ``tool`` messages); the message just
    before the run must be the assistant's, with the tool calls they answer."""
    start = len(messages)
    while start and messages[start - 1].get("role") == "tool":
        start -= 1
    earlier, results = list(messages[:start]), list(messages[start:])
    if not earlier or earlier[-1].get("role") != "assistant" or not earlier[-1].get(
            "tool_calls"):
        raise ValidationError("tool results must follow the assistant message whose "
                              "tool_calls they answer")
    call_events(earlier[-1]["tool_calls"])  # their shape, before anything is written
    return earlier, results


def record_results(loci: Loci, session: str, asked: dict[str, Any],
                   results: Sequence[dict[str, Any]]) -> None:
    """Append what the log lacks of the assistant's calls (``asked``: when the exchange
    did not come through this proxy) and of their results, in one write."""
    try:
        recent = loci.events(session, include_archived=False)
    except NotFoundError:  # the session's first exchange
        recent = []
    known = {(e.type, e.tool_call_id) for e in recent[-_RECENT_EVENTS:]}
    blocks = asked.get(PROVIDER_BLOCKS)
    calls = call_events(asked["tool_calls"],  # checks their shape first
                        {PROVIDER_BLOCKS: blocks} if blocks else None)
    names = {e["tool_call_id"]: e["tool_name"] for e in calls}
    fresh = [e for e in calls if ("tool_call", e["tool_call_id"]) not in known]
    for result in results:
        call_id = str(result.get("tool_call_id") or "")
        if call_id not in names:
            raise ValidationError(f"tool result for an unknown call {call_id!r}")
        if ("tool_result", call_id) not in known:
            fresh.append({"type": "tool_result", "role": "tool", "tool_call_id": call_id,
                          "tool_name": names[call_id], "content": read(result.get("content"))[1]})
    if fresh:
        loci.add_events(session, fresh)
