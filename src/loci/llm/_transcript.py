"""What the extractive summarizer reads: events or chat messages, as a list of turns.

Loci's own injections are skipped (events marked ``metadata["injected"]``, system
messages, and lines carrying ``[STICKY]``/``[MEMORY]``/``[STATE]``), as the memory
extractor does; earlier compaction summaries become ``summary`` turns to fold in.
Chat messages are read the way a summarization prompt presents them: a system prompt
(the instructions), optionally a ``[CONTEXT SUMMARY]``, and the conversation either as
separate messages or as one transcript whose lines start with ``user:``/``assistant:``/
``tool:`` labels.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from loci.apis.wire import message_text
from loci.models import SUMMARY_HEADER, Event, speaker

_INJECTED_LINE = re.compile(r"^\s*\[(?:STICKY|MEMORY|STATE|RECALL)\b", re.IGNORECASE)
_LABEL = re.compile(
    r"^\s*\[?(?P<role>user|assistant|tool|system|human|ai)\]?"
    r"(?:\s*[(\[](?P<name>[^)\]]{1,60})[)\]])?\s*:\s?(?P<rest>.*)$",
    re.IGNORECASE,
)
_SUMMARY_TAG = re.compile(r"<previous_summary>(.*?)</previous_summary>", re.DOTALL | re.I)
_SECTION_HEADING = re.compile(r"^#{1,6}\s+\w", re.MULTILINE)
_ROLE_ALIASES = {"human": "user", "ai": "assistant"}


@dataclass(frozen=True)
class Turn:
    """One unit to read: kind is "message", "tool_call", "tool_result" or "summary"."""

    kind: str
    role: str
    text: str
    tool_name: str | None = None
    args: Mapping[str, Any] | None = None
    #: Who said a message, when its event or transcript line names them.
    speaker: str | None = None
    #: When a message was said, for stored events.
    when: datetime | None = None


def turns_from_events(events: Sequence[Event]) -> list[Turn]:
    """Turns of a span of stored events."""
    turns: list[Turn] = []
    for event in events:
        if event.metadata.get("injected"):
            continue
        text = event.content or ""
        if event.type == "summary" or text.lstrip().startswith(SUMMARY_HEADER):
            turns.append(Turn("summary", "system", strip_header(text)))
        elif event.type == "tool_call":
            if not text and turns and turns[-1].kind == "message" and (
                    turns[-1].role == "assistant"):
                # A reply stored as text then calls (the proxy) reads like one call.
                text = turns.pop().text
            turns.append(Turn("tool_call", "assistant", text, event.tool_name, event.args))
        elif event.type == "tool_result" or event.role == "tool":
            turns.append(Turn("tool_result", "tool", text, event.tool_name))
        elif event.role in ("user", "assistant"):
            turns.append(Turn("message", event.role, without_injected_lines(text),
                              speaker=speaker(event.metadata), when=event.timestamp))
    return turns


def turns_from_messages(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[Turn], list[str]]:
    """Turns of chat messages, and the instructions found in non-summary system messages."""
    turns: list[Turn] = []
    instructions: list[str] = []
    for message in messages:
        role = _ROLE_ALIASES.get(str(message.get("role", "user")).lower(),
                                 str(message.get("role", "user")).lower())
        text = message_text(message.get("content"))
        if role in ("system", "developer"):
            if looks_like_summary(text):
                turns.append(Turn("summary", "system", strip_header(text)))
            elif text.strip():
                instructions.append(text)
            continue
        if role == "tool":
            name = message.get("name")
            turns.append(Turn("tool_result", "tool", text, str(name) if name else None))
            continue
        for call in message.get("tool_calls") or ():
            turns.append(_tool_call_turn(call))
        turns.extend(parse_transcript(text, role))
    return turns, instructions


def parse_transcript(text: str, default_role: str) -> list[Turn]:
    """Split a rendered transcript into turns; text without labels is one turn."""
    turns: list[Turn] = []
    for match in _SUMMARY_TAG.finditer(text):
        turns.append(Turn("summary", "system", match.group(1).strip()))
    text = _SUMMARY_TAG.sub("", text)
    role, name, kind = default_role, None, "message"
    lines: list[str] = []

    def flush() -> None:
        body = "\n".join(lines).strip()
        if body:
            if kind == "summary":
                turns.append(Turn(kind, role, body))
            elif kind == "tool_result":
                turns.append(Turn(kind, role, without_injected_lines(body), name))
            else:
                turns.append(Turn(kind, role, without_injected_lines(body), speaker=name))
        lines.clear()

    for line in text.splitlines():
        label = _LABEL.match(line)
        if label:
            flush()
            role = _ROLE_ALIASES.get(label["role"].lower(), label["role"].lower())
            name = label["name"]
            kind = "tool_result" if role == "tool" else "message"
            line = label["rest"]
        if line.lstrip().startswith(SUMMARY_HEADER):
            flush()
            kind, role = "summary", "system"
            line = line.lstrip()[len(SUMMARY_HEADER):]
        lines.append(line)
    flush()
    return turns


def looks_like_summary(text: str) -> bool:
    """A previous compaction summary: Loci's header, or our section headings."""
    stripped = text.lstrip()
    if stripped.startswith(SUMMARY_HEADER):
        return True
    return len(_SECTION_HEADING.findall(text)) >= 2 and "## " in text and any(
        f"## {name}" in text for name in ("Facts", "Critical context", "Completed work",
                                           "Decisions"))


def strip_header(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith(SUMMARY_HEADER):
        stripped = stripped[len(SUMMARY_HEADER):].strip()
    return stripped


def without_injected_lines(text: str) -> str:
    """``text`` without the lines Loci injected itself (``[STICKY]``, ``[MEMORY …]``,
    ``[STATE]``, ``[RECALL …]``) and the markup an agent harness adds to a user's turn
    (``without_harness``)."""
    text = without_harness(text)
    return "\n".join(line for line in text.splitlines() if not _INJECTED_LINE.match(line))


#: An element a harness writes into a turn (``<system-reminder>…</system-reminder>``,
#: ``<task-notification>…``, ``<command-name>…``): a compound lower-case tag name, which
#: prose and the HTML a person pastes do not use.
_HARNESS = re.compile(r"<(?P<tag>[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+)(?:\s[^<>]*)?>"
                      r".*?</(?P=tag)>", re.DOTALL)


def without_harness(text: str) -> str:
    """``text`` without the harness's markup elements (what is left is the person's)."""
    return _HARNESS.sub(" ", text).strip() if "</" in text else text


def _tool_call_turn(call: Any) -> Turn:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        return Turn("tool_call", "assistant", "", None)
    raw = function.get("arguments")
    args: Any = raw
    if isinstance(raw, str):
        try:
            args = json.loads(raw)
        except ValueError:
            args = {"arguments": raw}
    name = function.get("name")
    return Turn("tool_call", "assistant", "", str(name) if name else None,
                args if isinstance(args, Mapping) else None)
