"""What the extractive summarizer reads: stored events, as a list of turns.

Loci's own injections are skipped (events marked ``metadata["injected"]``, and lines
carrying ``[STICKY]``/``[MEMORY]``/``[STATE]``/``[RECALL]``), as the memory extractor
does (``without_injected_lines``, ``without_harness``); earlier compaction summaries
become ``summary`` turns to fold in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from loci.models import SUMMARY_HEADER, Event, shared, speaker

_INJECTED_LINE = re.compile(r"^\s*\[(?:STICKY|MEMORY|STATE|RECALL)\b", re.IGNORECASE)


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
            turns.append(Turn("message", event.role,
                              without_injected_lines(text) + shared(event.metadata),
                              speaker=speaker(event.metadata), when=event.timestamp))
    return turns


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
