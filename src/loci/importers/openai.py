"""OpenAI message lists: Chat Completions messages or Responses items, even mixed.

A file holds the list itself, or an object with it under ``messages`` (a Chat request,
an agent harness's trajectory), ``input`` and/or ``output`` (a Responses request or
response); JSON, JSONL (one message or item a line) or gzipped.

- Chat: ``system``/``developer``, ``user`` and ``assistant`` messages (an assistant's
  ``tool_calls`` become ``tool_call`` events, its text riding on the first), ``tool``
  messages ``tool_result`` events.
- Responses: ``message`` items, ``function_call``/``custom_tool_call``/
  ``local_shell_call`` items calls, ``*_output`` items results; a hosted tool's call
  (``web_search_call``, ...) a call with its action; ``reasoning`` is left out.

A message of another role (a harness's own, such as an ``exit`` record) is kept as a
system message naming that role. Codex rollouts are read through ``item_events``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from loci.errors import ValidationError
from loci.importers.base import (
    ImportedSession,
    arguments,
    content_text,
    list_name,
    load_json,
    message,
    name_tools,
    number_events,
    stamp,
    tool_call,
    tool_result,
)

_ROLES = {"user": "user", "assistant": "assistant", "system": "system",
          "developer": "system"}
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
_LEFT_OUT = ("reasoning", "compaction", "item_reference")
#: How a shell tool's output states its exit code (Codex's ``exec`` outputs).
_EXIT_CODE = re.compile(r"^(?:Exit code|Process exited with code):? (-?\d+)", re.MULTILINE)


def read(path: Path, session: str | None = None) -> list[ImportedSession]:
    data = load_json(path)
    if isinstance(data, Mapping):
        data = _listed(data)
    if not isinstance(data, list):
        raise ValidationError(f"{path}: expected a list of messages or items, or an "
                              "object with one under 'messages', 'input' or 'output'")
    events: list[dict[str, Any]] = []
    for item in data:
        if not isinstance(item, Mapping):
            raise ValidationError(f"{path}: each message or item must be a JSON object")
        events += item_events(item, stamp(item.get("timestamp") or item.get("created_at")))
    source = path.name
    name_tools(events)
    return [ImportedSession(session or f"openai/{list_name(path)}", source,
                            number_events(source, events))]


def _listed(data: Mapping[str, Any]) -> Any:
    if "messages" in data:
        return data["messages"]
    found = []
    for key in ("input", "output"):
        value = data.get(key)
        if isinstance(value, str):
            found.append({"role": "user", "content": value})
        elif isinstance(value, list):
            found += value
    return found or None


def item_events(item: Mapping[str, Any], when: datetime | None,
                **metadata: Any) -> list[dict[str, Any]]:
    """One Chat message or Responses item as events."""
    kind = item.get("type")
    if kind in _LEFT_OUT:
        return []
    if kind in _CALLS:
        return [_call(item, when, metadata)]
    if kind in _OUTPUTS:
        return [_output(item, when, metadata)]
    if isinstance(kind, str) and kind.endswith("_call"):  # a hosted tool's call
        return [tool_call(kind.removesuffix("_call"), str(item.get("id") or ""),
                          arguments(item.get("action")), when, **metadata)]
    role = item.get("role")
    if role == "tool":
        return [tool_result(str(item.get("tool_call_id") or ""),
                            content_text(item.get("content")), when, **metadata)]
    text = content_text(item.get("content"))
    listed = item.get("tool_calls")
    calls = [c for c in listed if isinstance(c, Mapping)] if isinstance(listed, list) else []
    if role == "assistant" and calls:  # the text rides with the first call
        return [tool_call(str(_mapping(c.get("function")).get("name") or ""),
                          str(c.get("id") or ""),
                          arguments(_mapping(c.get("function")).get("arguments")), when,
                          text if number == 0 else "", **metadata)
                for number, c in enumerate(calls)]
    if role in _ROLES:
        return [message(_ROLES[role], text, when, **metadata)] if text.strip() else []
    return [message("system", text, when, original_role=str(role), **metadata)]


def _call(item: Mapping[str, Any], when: datetime | None, metadata: dict[str, Any]
          ) -> dict[str, Any]:
    kind = item["type"]
    call_id = str(item.get("call_id") or item.get("id") or "")
    if kind == "local_shell_call":
        return tool_call("local_shell", call_id, arguments(item.get("action")), when,
                         **metadata)
    raw = item.get("arguments") if kind == "function_call" else item.get("input")
    return tool_call(str(item.get("name") or ""), call_id, arguments(raw), when, **metadata)


def _output(item: Mapping[str, Any], when: datetime | None, metadata: dict[str, Any]
            ) -> dict[str, Any]:
    """A call's output; an error when it says so: a shell's exit code that is not 0, or
    a ``success`` of false."""
    output = item.get("output")
    error = False
    if isinstance(output, str):
        try:  # older Codex outputs: {"output": ..., "metadata": {"exit_code": ...}}
            parsed = json.loads(output)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, Mapping) and "output" in parsed:
            output = parsed
    if isinstance(output, Mapping):
        code = _mapping(output.get("metadata")).get("exit_code")
        error = output.get("success") is False or (isinstance(code, int) and code != 0)
        output = output.get("output", output.get("content"))
    text = content_text(output)
    found = _EXIT_CODE.search(text[:200])
    error = error or (found is not None and found.group(1) != "0")
    return tool_result(str(item.get("call_id") or ""), text, when, error=error, **metadata)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
