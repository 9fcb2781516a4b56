"""Claude Code sessions: ``~/.claude/projects/<project>/<session id>.jsonl``.

Each line is one record ``{type, uuid, parentUuid, sessionId, timestamp, message, ...}``;
``user`` and ``assistant`` records carry a Messages message (``message_events``).
Claude Code logs a reply as it streams, one record per content block, all under the same
``message.id``: consecutive ones are joined back into the one message the model wrote.
``isSidechain`` records are a subagent's (the Task tool's): in the session's own file
(older versions) or in ``agent-<id>.jsonl`` files beside it or under
``<session>/subagents/``; each subagent becomes its own session
``claude-code/<session>/agent-<id>``. A compaction is a ``compact_boundary`` system
record followed by a user record with ``isCompactSummary``: the summary is kept as the
user message Claude Code sends, marked ``compact_summary`` with the boundary's trigger.
Snapshots, progress, queue and title records are left out; a line that is not JSON (a
log cut short, a redacted line) is passed over.

A path is one session file or a project folder (every ``*.jsonl`` under it). Events are
keyed by their record's ``uuid``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from loci.eventlog import IMPORT_ID
from loci.importers.anthropic import message_events
from loci.importers.base import ImportedSession, jsonl_records, name_tools, stamp

PREFIX = "claude-code"


@dataclass
class _Unit:
    """One message as the model wrote or read it, from one record or several."""

    uuid: str
    message: dict[str, Any]
    when: datetime | None
    metadata: dict[str, Any] = field(default_factory=dict)


def read(path: Path, session: str | None = None) -> list[ImportedSession]:
    files = sorted(path.rglob("*.jsonl*")) if path.is_dir() else [path]
    found: dict[str, ImportedSession] = {}
    for file in files:
        unreadable: list[int] = []
        for number, (name, units) in enumerate(
                _threads(file, session if len(files) == 1 else None, unreadable)):
            events = [e for unit in units for e in _events(unit)]
            if name in found:
                found[name].events.extend(events)
            elif events:
                # A file's unreadable lines are counted with its first (main) thread.
                found[name] = ImportedSession(name, name.removeprefix(f"{PREFIX}/"),
                                              events, len(unreadable) if number == 0 else 0)
    for imported in found.values():
        name_tools(imported.events)
    return list(found.values())


def _threads(path: Path, session: str | None, unreadable: list[int]
             ) -> Iterator[tuple[str, list[_Unit]]]:
    """The main thread and each subagent's thread of one file, as named sessions."""
    stem = path.name.split(".jsonl")[0]
    main = session or f"{PREFIX}/{stem}"
    threads: dict[str, list[_Unit]] = {}
    chain: dict[str, str] = {}  # record uuid → its sidechain's name
    boundary: dict[str, Any] = {}
    for number, record in jsonl_records(path, unreadable):
        kind, uuid = record.get("type"), str(record.get("uuid") or f"{stem}:{number}")
        if kind == "system" and record.get("subtype") == "compact_boundary":
            boundary = dict(record.get("compactMetadata") or {})
            continue
        if kind not in ("user", "assistant") or not isinstance(record.get("message"),
                                                               Mapping):
            continue
        name = main
        if record.get("isSidechain"):
            parent = session or f"{PREFIX}/{record.get('sessionId') or stem}"
            name = _sidechain(record, chain, parent)
        metadata: dict[str, Any] = {}
        if record.get("isCompactSummary"):
            metadata = {"compact_summary": True, **{
                k: boundary.get(k) for k in ("trigger", "preTokens") if k in boundary}}
        elif record.get("isMeta"):
            metadata = {"meta": True}
        _add(threads.setdefault(name, []), _Unit(uuid, dict(record["message"]),
                                                 stamp(record.get("timestamp")), metadata))
    yield from threads.items()


def _sidechain(record: Mapping[str, Any], chain: dict[str, str], parent: str) -> str:
    """A subagent's session: by its ``agentId``, else (older logs, which interleave
    subagents in the main file) by the first record of its chain of ``parentUuid``s."""
    uuid = str(record.get("uuid") or "")
    if record.get("agentId"):
        name = f"{parent}/agent-{record['agentId']}"
    else:
        name = chain.get(str(record.get("parentUuid") or "")) or (
            f"{parent}/sidechain-{uuid[:8] or len(chain)}")
    chain[uuid] = name
    return name


def _add(units: list[_Unit], unit: _Unit) -> None:
    """Append a record's message, or join it to the reply it streams a block of."""
    last = units[-1] if units else None
    reply = unit.message.get("id")
    if (last is not None and reply and unit.message.get("role") == "assistant"
            and last.message.get("role") == "assistant" and last.message.get("id") == reply):
        last.message["content"] = _blocks(last.message) + _blocks(unit.message)
        return
    units.append(unit)


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": content}] if isinstance(content, str) and content else []


def _events(unit: _Unit) -> list[dict[str, Any]]:
    model = unit.message.get("model") if unit.message.get("role") == "assistant" else None
    events = message_events(unit.message, unit.when, model=model, **unit.metadata)
    for index, fields in enumerate(events):
        fields["metadata"][IMPORT_ID] = unit.uuid if index == 0 else f"{unit.uuid}.{index}"
    return events
