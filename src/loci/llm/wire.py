"""Reading provider payloads as they come: the text of a message's content, the token
counts of a usage object. Shared by the chat clients and the server's proxy faces."""

from __future__ import annotations

from typing import Any


def message_text(content: Any) -> str:
    """Text of an OpenAI-style ``content``: a string, None or a list of typed parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return str(content)


def usage_int(usage: Any, *keys: str) -> int:
    """The first integer found under ``keys`` in a usage object, else 0."""
    if isinstance(usage, dict):
        for key in keys:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return 0
