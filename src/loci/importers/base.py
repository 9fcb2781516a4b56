"""What every importer produces, and the event fields they share.

An importer reads one log format into :class:`ImportedSession` values: a session name,
the stable id of its source (a Claude Code or Codex session id, a file name) and the
fields of each event, in log order. Every event carries an ``import_id`` in its metadata
(the source's own record id where it has one, else the source id and the position):
writing a session again skips the events already there, so importing twice changes
nothing and importing a log that grew adds only its new events.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loci.errors import ValidationError
from loci.eventlog import IMPORT_ID, jsonl_lines
from loci.timeutil import parse_timestamp


@dataclass(frozen=True)
class ImportedSession:
    """One session read from a log, not yet stored."""

    name: str
    source_id: str
    events: list[dict[str, Any]] = field(default_factory=list)
    #: Lines of its log file that could not be read (cut short, not JSON): passed over.
    unreadable: int = 0


@dataclass(frozen=True)
class ImportedCount:
    """What importing one session did: events added, events already there, and lines
    of its log that could not be read."""

    session: str
    source_id: str
    added: int
    skipped: int
    tool_calls: int
    tool_results: int
    unreadable: int = 0


@dataclass(frozen=True)
class ImportReport:
    """What ``Loci.import_log`` did, per session."""

    format: str
    sessions: list[ImportedCount]

    @property
    def added(self) -> int:
        return sum(s.added for s in self.sessions)

    @property
    def skipped(self) -> int:
        return sum(s.skipped for s in self.sessions)


def read_text(path: Path) -> str:
    """A file's text; a ``.gz`` file is read through gzip. A file that is not UTF-8, or
    a ``.gz`` cut short, is a ``ValidationError``."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                return handle.read()
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path} is not UTF-8 text ({exc.reason} at byte "
                              f"{exc.start})") from None
    except OSError as exc:  # a folder where a file was wanted, a name too long
        raise ValidationError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ValidationError(f"{path} is not a whole gzip file ({exc})") from None


def jsonl_records(path: Path, unreadable: list[int] | None = None
                  ) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file with their line numbers; a line cut short (a log
    still being written, a redacted line) is passed over, never fatal, its number added
    to ``unreadable``."""
    for number, line in enumerate(jsonl_lines(read_text(path)), start=1):
        if not line.strip():
            continue
        try:
            record = mended(json.loads(line), line)
        except (ValueError, RecursionError):  # ValueError: also a 5,000-digit number
            if unreadable is not None:
                unreadable.append(number)
            continue
        if isinstance(record, dict):
            yield number, record


#: A JSON escape of half a surrogate pair without its other half: a log written by a
#: program that cut an emoji in two (JavaScript strings are UTF-16) holds text no store
#: accepts. (An escaped emoji, a whole pair, is not one.)
_HALF_PAIR = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
                        r"|(?<![0-9a-fA-F]{4})\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_LONE = re.compile("[\ud800-\udfff]")


def mended(value: Any, raw: str) -> Any:
    """``value`` (parsed from ``raw``) with each half of a surrogate pair, which cannot
    be stored, replaced by U+FFFD; the rest of the record is kept."""
    return _mend(value) if _HALF_PAIR.search(raw) else value


def _mend(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_mend(item) for item in value]
    if isinstance(value, dict):
        return {_mend(key): _mend(item) for key, item in value.items()}
    return value


def list_name(path: Path) -> str:
    """A session name from a file name without its extensions (``a.json.gz`` → ``a``)."""
    name = path.name
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return name or "imported"


def load_json(path: Path) -> Any:
    """A whole JSON file, or each line of a JSONL one as a list."""
    text = read_text(path)
    try:
        return mended(json.loads(text), text)
    except (ValueError, RecursionError):
        try:
            return [mended(json.loads(line), line) for line in jsonl_lines(text)
                    if line.strip()]
        except (ValueError, RecursionError) as exc:
            raise ValidationError(f"{path}: neither JSON nor JSONL: {exc}") from None


def stamp(value: Any) -> datetime | None:
    """A record's timestamp (ISO 8601 text or Unix seconds), if it has a readable one."""
    if isinstance(value, str) and value.strip():
        try:
            return parse_timestamp(value)
        except (ValueError, ValidationError):
            return None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):  # past what a datetime holds
            return None
    return None


def arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments as an object: a JSON object as it is, JSON text parsed,
    anything else (a free-form tool's input, text that is not JSON) under ``input``."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):
            return {"input": raw}
        return value if isinstance(value, dict) else {"input": value}
    return {} if raw is None else {"input": raw}


def content_text(content: Any) -> str:
    """The text of a message's or a tool result's content (a string, or a list of typed
    parts: text kept, an image or file named so the reader knows it was there)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, Mapping):
            text = part.get("text")
            if isinstance(text, str):
                parts.append(text)
            elif part.get("type"):
                parts.append(f"[{part['type']}]")
    return "\n".join(p for p in parts if p)


def message(role: str, text: str, when: datetime | None, **metadata: Any) -> dict[str, Any]:
    return _event({"type": "message", "role": role, "content": text}, when, metadata)


def tool_call(name: str, call_id: str, args: dict[str, Any], when: datetime | None,
              text: str = "", **metadata: Any) -> dict[str, Any]:
    """A call; ``text`` is what the assistant said with it (rendered as the content of
    the assistant message that carries the call)."""
    return _event({"type": "tool_call", "role": "assistant", "content": text,
                   "tool_name": name or "unknown", "tool_call_id": call_id, "args": args},
                  when, metadata)


def tool_result(call_id: str, text: str, when: datetime | None, *, error: bool = False,
                **metadata: Any) -> dict[str, Any]:
    """A call's result (its tool's name is filled in by ``name_tools``)."""
    fields: dict[str, Any] = {"type": "tool_result", "role": "tool", "content": text,
                              "tool_call_id": call_id}
    if error:
        metadata["is_error"] = True
    return _event(fields, when, metadata)


def _event(fields: dict[str, Any], when: datetime | None, metadata: dict[str, Any]
           ) -> dict[str, Any]:
    if when is not None:
        fields["timestamp"] = when
    fields["metadata"] = {k: v for k, v in metadata.items() if v is not None}
    return fields


def number_events(source_id: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give each event without one an ``import_id`` from its position in the source
    (stable as long as the source only grows at its end)."""
    for index, fields in enumerate(events):
        fields["metadata"].setdefault(IMPORT_ID, f"{source_id}#{index}")
    return events


def name_tools(events: list[dict[str, Any]]) -> None:
    """Give each tool result the name of the call it answers, where the log left it out."""
    names = {e["tool_call_id"]: e["tool_name"] for e in events if e["type"] == "tool_call"}
    for fields in events:
        if fields["type"] == "tool_result" and "tool_name" not in fields:
            name = names.get(fields["tool_call_id"])
            if name:
                fields["tool_name"] = name
