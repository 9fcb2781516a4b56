"""An agent's trail (files, commands, errors, edits), and the plain texts it is looked
for in: a compiled context, the last N tokens of the transcript.

The trail is read from chat-completions messages (an assistant's ``tool_calls``, ``tool``
messages):

- **files**: paths named in the agent's commands, and a structured tool's ``file_path``
  or ``path`` (Claude Code's Read, Edit, Write, Grep, Glob);
- **commands**: each command's first line (60 characters);
- **errors**: ``SomethingError: ...`` / ``...Exception`` lines in outputs (80 characters);
- **edits**: commands that write a file (``sed -i``, ``cat > f``, ``> f``, ``tee``, a
  script that calls ``write``), held when the command's first line is held; a
  structured edit (Edit, MultiEdit, Write) by the first line of the text it wrote.

An artifact is held when its text appears in a haystack (whitespace collapsed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loci import TokenCounter

CLASSES = ("files", "commands", "errors", "edits")
#: A tool call's arguments as the log writes them (sorted keys, no spaces), to count.
_ARGUMENTS = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
_PATH = re.compile(r"(?<![\w<>=$-])(?:\.{0,2}/)?(?:[\w.-]+/)*[\w-]+\.(?:py|pyi|cfg|toml|ini|txt|md"
                   r"|rst|json|ya?ml|sql|c|h|js|ts|sh|patch|diff|csv|dcm)\b")
_ERROR = re.compile(r"^\s*((?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b.*)$", re.MULTILINE)
_WRITES = re.compile(r"sed\s+-i|cat\s+(?:<<\s*'?\w+'?\s*)?>|\s>>?\s*\S+\.\w+|\btee\b|\.write\(")
_EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})


def squash(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Artifact:
    kind: str
    key: str
    position: int  # index of the message that produced it


@dataclass
class Trail:
    items: dict[tuple[str, str], Artifact] = field(default_factory=dict)

    def add(self, kind: str, key: str, position: int) -> None:
        key = squash(key)
        if len(key) >= 3:
            self.items.setdefault((kind, key), Artifact(kind, key, position))

    def upto(self, position: int) -> list[Artifact]:
        return [a for a in self.items.values() if a.position < position]


def trail_of(messages: list[dict[str, Any]]) -> Trail:
    trail = Trail()
    for index, message in enumerate(messages):
        for call in message.get("tool_calls") or ():
            args = arguments(call)
            command = str(args.get("command", ""))
            first = command.strip().splitlines()[0][:60] if command.strip() else ""
            trail.add("commands", first, index)
            for path in _PATH.findall(command):
                trail.add("files", path, index)
            if _WRITES.search(command):
                trail.add("edits", first, index)
            _structured(trail, call["function"]["name"], args, index)
        if message["role"] == "tool":
            for line in _ERROR.findall(str(message.get("content") or "")):
                trail.add("errors", line.strip()[:80], index)
    return trail


def _structured(trail: Trail, tool: str, args: dict[str, Any], index: int) -> None:
    """The files and edits of a tool called with structured input: an edit is held when
    the first line of the text it wrote is (its first 60 characters)."""
    path = args.get("file_path") or args.get("path")
    if isinstance(path, str) and path.strip():
        trail.add("files", path.strip(), index)
    if tool not in _EDIT_TOOLS:
        return
    listed = args.get("edits")
    edits: list[Any] = listed if isinstance(listed, list) else [args]
    for edit in edits:
        text = edit.get("new_string") or edit.get("content") if isinstance(edit, dict) else None
        lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
        if lines:
            trail.add("edits", lines[0][:60], index)


def arguments(call: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(call["function"].get("arguments") or "{}")
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def call_text(call: dict[str, Any]) -> str:
    """A call as a reader sees it: its command, or its arguments' text unescaped (an
    edit's strings as written, not as JSON)."""
    args = arguments(call)
    if "command" in args:
        return str(args["command"])
    # By key: a stored call's arguments come back in canonical order, not as written.
    edits = [e for e in args.get("edits") or () if isinstance(e, dict)]
    values = [args[k] for k in sorted(args)] + [e[k] for e in edits for k in sorted(e)]
    return "\n".join(v for v in values if isinstance(v, str)) or _ARGUMENTS.encode(args)


def message_tokens(message: dict[str, Any], counter: TokenCounter) -> int:
    """A chat message's tokens as Loci counts an event's: its text, and each call's name,
    id and arguments (canonical JSON, as stored)."""
    tokens = counter.count_message(message["role"], str(message.get("content") or ""))
    for call in message.get("tool_calls") or ():
        tokens += counter.count(call["function"]["name"]) + counter.count(str(call["id"]))
        tokens += counter.count(_ARGUMENTS.encode(arguments(call)))
    return tokens + counter.count(str(message.get("tool_call_id") or ""))


def transcript_lines(messages: list[dict[str, Any]]) -> list[str]:
    lines = []
    for message in messages:
        if message["role"] == "system":
            continue
        text = str(message.get("content") or "")
        for call in message.get("tool_calls") or ():
            text += f"\n$ {call_text(call)}"
        lines.append(f"{message['role']}: {text}")
    return lines


def tail(lines: list[str], tokens: int, count: Callable[[str], int]) -> str:
    """The last ``tokens`` tokens of the transcript (the recency baseline)."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = count(line)
        if used + cost > tokens:
            words = line.split(" ")
            while words and used + count(" ".join(words)) > tokens:
                words = words[len(words) // 8 + 1:]
            kept.append(" ".join(words))
            break
        kept.append(line)
        used += cost
    return "\n".join(reversed(kept))


def context_text(messages: list[dict[str, Any]]) -> str:
    parts = []
    for message in messages:
        parts.append(str(message.get("content") or ""))
        for call in message.get("tool_calls") or ():
            parts.append(call["function"]["name"])
            parts.append(call_text(call))
    return squash("\n".join(parts))


def broken_pairs(history: list[dict[str, Any]]) -> int:
    calls = {c["id"] for m in history for c in m.get("tool_calls") or ()}
    results = {m.get("tool_call_id") for m in history if m["role"] == "tool"}
    return len(calls ^ results)
