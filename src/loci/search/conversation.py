"""What conversation search indexes for an event, beyond its content.

A chat turn alone is often a poor search target: "Yes, last weekend!" answers a question
asked one turn earlier, a photo is only described by its caption, and "what did Ana say
about X" needs to know who spoke. So every event is indexed with:

- **extra text** from its ``metadata``, by this convention (all keys optional):

  - ``name``: who spoke, as in an OpenAI chat message's ``name`` (``"Ana"``);
  - ``caption``: a description of what the message shared (an image caption, an alt
    text), a string or a list of strings;
  - ``attachments``: a list of strings or of objects whose ``caption``, ``alt``,
    ``title``, ``name`` or ``text`` describe each attachment.

  The event's *line* is ``"Ana: <content> (shared: <caption>)"``; a tool call adds
  its tool name and the strings of its arguments (a command, a path), so a command
  or a file finds its step;
- **context**: the lines of the ``CONTEXT_TURNS`` events before it in its session (at
  most ``CONTEXT_CHARS`` characters of each). The log is append-only, so an event's
  context never changes once written.

Keyword search weighs the context at a fraction of the event's own text (the store's
BM25 column weights); the embedding is of the line followed by ``(context: ...)``, the
line first so that a model's token limit cuts the context, not the event.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from loci.models import captions, shared, speaker

#: How many preceding events of the session are indexed with an event.
CONTEXT_TURNS = 2
#: Characters of each preceding event's line kept in the context.
CONTEXT_CHARS = 500
#: Characters of a tool call's name and arguments that are indexed.
TOOL_CHARS = 2_000
#: Argument values looked at, at most (arguments may be huge or deeply nested).
MAX_VISITS = 10_000
_PATHLIKE = re.compile(r"[^\s'\"`]*[\w-][/.][\w-][^\s'\"`]*")
_SEPARATORS = re.compile(r"[/.]+")


def tool_text(tool_name: str | None, args: Mapping[str, Any] | None) -> str | None:
    """A tool call's name and the strings of its arguments (a command, a path, a query),
    so that searching a command or a file finds the step."""
    parts = [tool_name] if tool_name else []
    stack: list[Any] = [args] if args else []
    size, visits = len(tool_name or ""), 0
    while stack and size < TOOL_CHARS and visits < MAX_VISITS:  # hostile nesting ends
        value = stack.pop()
        visits += 1
        if isinstance(value, str) and value.strip():
            parts.append(value)
            size += len(value) + 1
        elif isinstance(value, Mapping):
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list | tuple):
            stack.extend(reversed(value))
    text = " ".join(parts)[:TOOL_CHARS]
    # Paths also as their parts: some full-text parsers keep "src/app.py" as one word.
    pieces = " ".join(_SEPARATORS.sub(" ", p) for p in _PATHLIKE.findall(text))
    return f"{text} {pieces}"[:TOOL_CHARS].strip() if pieces else text or None


def extra_text(metadata: Mapping[str, Any] | None, tool_name: str | None = None,
               args: Mapping[str, Any] | None = None) -> str | None:
    """Speaker name, captions and a tool call's arguments, for the keyword index (None
    when there are none)."""
    parts = [p for p in (speaker(metadata), *captions(metadata), tool_text(tool_name, args))
             if p]
    return " ".join(parts) if parts else None


def line(content: str, metadata: Mapping[str, Any] | None) -> str:
    """``"name: content (shared: caption)"``, or the content alone without metadata."""
    name = speaker(metadata)
    return (f"{name}: {content}" if name else content) + shared(metadata)


def context_text(previous: Iterable[tuple[str, Mapping[str, Any] | None]]) -> str | None:
    """The context of an event from its predecessors (oldest first), or None."""
    lines = [line(content, metadata)[:CONTEXT_CHARS] for content, metadata in previous]
    lines = [text for text in lines if text.strip()]
    return " / ".join(lines) if lines else None


class Indexed(Protocol):
    """What indexing reads of an event (``Event`` and ``NewEvent`` both are)."""

    @property
    def content(self) -> str: ...
    @property
    def metadata(self) -> Mapping[str, Any]: ...
    @property
    def tool_name(self) -> str | None: ...
    @property
    def args(self) -> Mapping[str, Any] | None: ...


def index_columns(
    events: Sequence[Indexed],
    previous: Sequence[tuple[str, Mapping[str, Any] | None]],
) -> list[tuple[str | None, str | None]]:
    """(extra text, context) for each of a batch appended to one session, given the
    (content, metadata) of the events before it, oldest first."""
    window = list(previous)[-CONTEXT_TURNS:] if CONTEXT_TURNS else []
    columns: list[tuple[str | None, str | None]] = []
    for event in events:
        columns.append((extra_text(event.metadata, event.tool_name, event.args),
                        context_text(window)))
        if CONTEXT_TURNS:
            window = [*window, (event.content, event.metadata)][-CONTEXT_TURNS:]
    return columns


def embedding_text(content: str, metadata: Mapping[str, Any] | None,
                   context: str | None) -> str:
    """What is embedded for an event: its line, then its context."""
    text = line(content, metadata)
    if context and text.strip():
        text += f"\n(context: {context})"
    return text
