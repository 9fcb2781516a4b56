"""Anthropic's memory tool run by the proxy (``[proxy] memory_tool = true``).

A client that declares the tool (``{"type": "memory_20250818", "name": "memory"}``) but
runs nothing of it still gets persistent, versioned, searchable files: when every call
of an answer is to that tool, Loci runs the commands on the user's ``/memories`` files
(``knowledge.memory_files``, the texts of the SDK's own file-system tool), records the
calls and their results like any tool loop, and asks the upstream again; the client gets
the first answer that is not only memory-tool calls (streamed: every round's text as it
comes, see ``proxy_turn.Relay.rounds``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from loci import Loci, LociError, MemoryFiles
from loci.apis.turn import Tool

#: Rounds of memory-tool calls run for one request before the answer goes back as is.
MAX_ROUNDS = 8


def memory_tool(loci: Loci, tools: Sequence[Tool]) -> str | None:
    """The name of the memory tool the client declared, if Loci is to run it."""
    if not loci.settings.proxy.memory_tool:
        return None
    for tool in tools:
        if (tool.kind or "").startswith("memory_"):
            return tool.name or "memory"
    return None


def only_calls_to(name: str | None, calls: Sequence[Any] | None) -> bool:
    return bool(name and calls) and all(
        (call.get("function") or {}).get("name") == name for call in calls or ())


def run(loci: Loci, calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each call's command run on the memory files, as ``tool_result`` events (a failed
    command's error text is its result, as the SDK's tool answers)."""
    files = MemoryFiles(loci.knowledge)
    events = []
    for call in calls:
        function = call.get("function") or {}
        try:
            command = json.loads(function.get("arguments") or "{}")
            output = files.run(command if isinstance(command, dict) else {})
        except (LociError, ValueError) as exc:
            output = f"Error: {exc}"
        events.append({"type": "tool_result", "role": "tool", "content": output,
                       "tool_call_id": str(call.get("id") or ""),
                       "tool_name": str(function.get("name") or "")})
    return events
