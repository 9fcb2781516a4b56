"""Codex rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``.

A rollout is one JSON object a line, ``{timestamp, type, payload}``:
``session_meta`` (the session's ``id``, ``cwd``, ...), ``response_item`` (a Responses
item exactly as the model saw it: messages, function and custom tool calls and their
outputs, reasoning), ``compacted`` (the summary that replaced the history before it,
kept as the user message Codex itself sends), ``turn_context`` and ``event_msg`` (the
UI's copies of the same turns, left out). Rollouts written before the
``{type, payload}`` wrapper hold the meta object on the first line and bare items after.
A path is one rollout or a folder searched for ``rollout-*.jsonl``; each rollout is a
session ``codex/<id>``, each event keyed by its line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loci.eventlog import IMPORT_ID
from loci.importers.base import (
    ImportedSession,
    content_text,
    jsonl_records,
    message,
    name_tools,
    stamp,
)
from loci.importers.openai import item_events


def read(path: Path, session: str | None = None) -> list[ImportedSession]:
    files = sorted(path.rglob("rollout-*.jsonl*")) if path.is_dir() else [path]
    found = [_rollout(file, session if len(files) == 1 else None) for file in files]
    return [s for s in found if s.events]


def _rollout(path: Path, session: str | None) -> ImportedSession:
    source = path.name.split(".jsonl")[0]
    events: list[dict[str, Any]] = []
    unreadable: list[int] = []
    for number, record in jsonl_records(path, unreadable):
        kind, payload = record.get("type"), record.get("payload")
        if kind == "session_meta" and isinstance(payload, Mapping):
            source = str(payload.get("id") or source)
        elif number == 1 and "id" in record and "type" not in record:
            source = str(record["id"])  # an older rollout's meta line
        when = stamp(record.get("timestamp"))
        if kind == "response_item" and isinstance(payload, Mapping):
            found = item_events(payload, when)
        elif kind == "compacted" and isinstance(payload, Mapping):
            summary = content_text(payload.get("message"))
            found = [message("user", summary, when, compact_summary=True)] if summary else []
        elif "payload" not in record and record.get("record_type") is None and (
                "role" in record or str(kind or "").endswith(("_call", "_output"))):
            found = item_events(record, when)
        else:
            found = []
        for index, fields in enumerate(found):
            fields["metadata"][IMPORT_ID] = f"{number}.{index}"
        events += found
    name_tools(events)
    return ImportedSession(session or f"codex/{source}", source, events, len(unreadable))
