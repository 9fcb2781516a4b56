"""Anthropic Messages lists: ``[{role, content}, ...]`` with content as text or blocks.

A file holds the list itself, a request body (``{system, messages}``) or any object
with a ``messages`` list; JSON, JSONL (one message a line) or gzipped. Blocks become
events: ``text`` the message's text, ``tool_use`` (and a server tool's
``server_tool_use``) a ``tool_call`` with its ``input`` as arguments, ``tool_result``
(and a server tool's ``*_tool_result``) a ``tool_result`` keeping ``is_error``; an image
or a document is named in the text; thinking is left out (the model's private notes,
signed for the provider). Claude Code's own logs are read through ``message_events``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from loci.errors import ValidationError
from loci.importers.base import (
    ImportedSession,
    content_text,
    list_name,
    load_json,
    message,
    name_tools,
    number_events,
    tool_call,
    tool_result,
)

_CALLS = ("tool_use", "server_tool_use", "mcp_tool_use")
_SKIPPED = ("thinking", "redacted_thinking")


def read(path: Path, session: str | None = None) -> list[ImportedSession]:
    data = load_json(path)
    system: Any = None
    if isinstance(data, Mapping):
        system, data = data.get("system"), data.get("messages")
    if not isinstance(data, list):
        raise ValidationError(f"{path}: expected a list of Messages messages or an "
                              "object with one under 'messages'")
    events = [message("system", content_text(system), None)] if system else []
    for item in data:
        if not isinstance(item, Mapping) or item.get("role") not in ("user", "assistant"):
            raise ValidationError(f"{path}: each message needs the role 'user' or "
                                  "'assistant'")
        events += message_events(item, None)
    source = path.name
    name_tools(events)
    return [ImportedSession(session or f"anthropic/{list_name(path)}", source,
                            number_events(source, events))]


def message_events(item: Mapping[str, Any], when: datetime | None,
                   **metadata: Any) -> list[dict[str, Any]]:
    """One message as events: an assistant's text rides on its first tool call (as one
    assistant message with calls), a user's tool results come before its text."""
    role, content = str(item.get("role")), item.get("content")
    blocks: Sequence[Any] = content if isinstance(content, list) else [
        {"type": "text", "text": content_text(content)}]
    texts, calls, results = [], [], []
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        kind = str(block.get("type") or "")
        if kind in _CALLS:
            calls.append(block)
        elif kind == "tool_result" or kind.endswith("_tool_result"):
            results.append(block)
        elif kind not in _SKIPPED:
            texts.append(content_text(block))
    text = "\n".join(t for t in texts if t.strip())
    events = [tool_result(str(b.get("tool_use_id") or ""), content_text(b.get("content")),
                          when, error=bool(b.get("is_error")), **metadata) for b in results]
    for number, block in enumerate(calls):
        args = block.get("input")
        events.append(tool_call(str(block.get("name") or ""), str(block.get("id") or ""),
                                args if isinstance(args, dict) else {"input": args}, when,
                                text if number == 0 else "", **metadata))
    if text and not calls:
        events.append(message(role, text, when, **metadata))
    return events
