"""Building validated events and Loci's JSONL session format.

One event per line::

    {"type":"message","role":"user","content":"Hello","timestamp":"..."}
    {"type":"tool_call","toolName":"read","toolCallId":"tc_1","args":{...},"timestamp":"..."}
    {"type":"tool_result","toolCallId":"tc_1","toolName":"read","result":"...","timestamp":"..."}

Optional keys: ``metadata`` (object), ``archived`` (true for what compaction archived,
which an import keeps archived: the summary stays the summary; masks are not carried).
Parsing validates the whole file before anything is stored, and errors name the line.
A line without a ``timestamp`` gets an ``import_id`` in its metadata: hashes of the log
before and up to that line, so importing the log again, or a longer copy of it, adds
only its new lines, while another log that opens with the same lines and then parts
from one the session holds is imported whole (lines with a time are known by their
time, kind and text).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from loci.checks import check_json, check_text
from loci.errors import ValidationError
from loci.models import DEFAULT_ROLE, EVENT_TYPES, ROLES, Event, NewEvent, shared
from loci.store.codec import canonical_json
from loci.timeutil import check_time, format_timestamp, parse_timestamp
from loci.tokens import TokenCounter

MAX_CONTENT_CHARS = 10_000_000
#: The metadata key holding an imported event's stable id.
IMPORT_ID = "import_id"
#: How the id of a JSONL line without a time begins: ``jsonl:<before>><after>``, the
#: hashes of the log before and after the line.
_LINE = "jsonl:"
#: Tokens of a function call's framing beyond its name, id and arguments.
TOOL_CALL_OVERHEAD = 3


#: The fields an event written through the API may have.
EVENT_FIELDS = frozenset({"type", "role", "content", "timestamp", "tool_name", "tool_call_id",
                          "args", "metadata"})


def check_fields(fields: Mapping[str, Any]) -> None:
    """Refuse unknown fields, and summaries (compaction writes those)."""
    unknown = set(fields) - EVENT_FIELDS
    if unknown:
        raise ValidationError(f"unknown event field(s): {', '.join(sorted(unknown))}")
    if fields.get("type") == "summary":
        raise ValidationError("summary events are written by compaction (see compact); add "
                              "a message instead")


def check_message(role: str, content: str) -> str:
    """A new message's content: a user's must hold text (an empty one would go to the
    model as it is)."""
    if role == "user" and isinstance(content, str) and not content.strip():
        raise ValidationError("a user message needs some text")
    return content


def new_event(
    counter: TokenCounter,
    *,
    type: str = "message",
    role: str | None = None,
    content: str = "",
    timestamp: datetime,
    tool_name: str | None = None,
    tool_call_id: str | None = None,
    args: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    stamped: bool = False,
    archived: bool = False,
) -> NewEvent:
    """Validate one event and count its tokens."""
    if type not in EVENT_TYPES:
        raise ValidationError(f"unknown event type {type!r}; expected one of {EVENT_TYPES}")
    role = role or DEFAULT_ROLE.get(type)
    if role not in ROLES:
        raise ValidationError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    check_text("content", content)
    timestamp = check_time("timestamp", timestamp)
    for field, value in (("tool_name", tool_name), ("tool_call_id", tool_call_id)):
        if value is not None:
            check_text(field, value)
    for field, mapping in (("args", args), ("metadata", metadata)):
        if mapping is not None and not isinstance(mapping, dict):
            raise ValidationError(f"{field} must be a JSON object")
        check_json(field, mapping)
    if len(content) > MAX_CONTENT_CHARS:
        raise ValidationError(f"content is longer than {MAX_CONTENT_CHARS:,} characters")
    if type == "tool_call" and not tool_name:
        raise ValidationError("a tool_call needs a tool name")
    return NewEvent(
        type=type, role=role, content=content, timestamp=timestamp,
        tokens=event_tokens(counter, type, role, content + (
            shared(metadata) if type == "message" else ""), tool_name, tool_call_id, args),
        tool_name=tool_name,
        tool_call_id=tool_call_id, args=args, metadata=dict(metadata or {}), stamped=stamped,
        archived=archived,
    )


def event_tokens(
    counter: TokenCounter, type: str, role: str, content: str, tool_name: str | None,
    tool_call_id: str | None, args: dict[str, Any] | None,
) -> int:
    """What the event costs in a prompt: its message, and a tool call's name, id and
    arguments (as providers count a function call), or a result's call id."""
    tokens = counter.count_message(role, content)
    if type == "tool_call":
        tokens += counter.count(tool_name or "") + counter.count(canonical_json(args or {}))
        tokens += TOOL_CALL_OVERHEAD
    if tool_call_id:
        tokens += counter.count(tool_call_id)
    return tokens


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSONL text (a byte-order mark before them dropped): split at ``\n``
    only. ``str.splitlines`` also splits at U+2028, U+2029 and U+0085, which JSON writers
    (ours, Node's ``JSON.stringify``) leave raw inside strings: a line cut there is no
    JSON."""
    return text.removeprefix("\ufeff").split("\n")


def not_held(events: Sequence[NewEvent], held: Sequence[Event]) -> list[NewEvent]:
    """``events`` but those ``held`` already says (the same time, kind, role and text,
    or the same ``import_id``): importing a log twice adds nothing the second time."""
    said = {(e.timestamp, e.type, e.role, e.content) for e in held}
    ids = {i for e in held if (i := import_id(e.metadata)) is not None}
    if _parts_from(events, ids):
        ids = set()
    return [e for e in events if import_id(e.metadata) not in ids and (
        # a line without a time has the import's: its id alone says whether it is held
        (import_id(e.metadata) or "").startswith(_LINE)
        or (e.timestamp, e.type, e.role, e.content) not in said)]


def _parts_from(events: Sequence[NewEvent], ids: set[str]) -> bool:
    """Whether the lines without a time of ``events`` open as a log the session holds
    and then part from it (its next line held is another): another log with the same
    opening, not that log grown."""
    chain = [i for e in events if (i := import_id(e.metadata) or "").startswith(_LINE)]
    opening = 0
    while opening < len(chain) and chain[opening] in ids:
        opening += 1
    if opening in (0, len(chain)):
        return False
    last = chain[opening - 1].rpartition(">")[2]
    return any(i.startswith(f"{_LINE}{last}>") for i in ids)


def import_id(metadata: Mapping[str, Any]) -> str | None:
    """The stable id an import gave an event (any other value under the key is the
    user's own and names nothing)."""
    value = metadata.get(IMPORT_ID)
    return value if isinstance(value, str) else None


def parse_jsonl(
    lines: str | Iterable[str], counter: TokenCounter, default_timestamp: datetime
) -> list[NewEvent]:
    """Parse a whole JSONL session (its text or its lines); any bad line raises before
    anything is returned."""
    events = []
    log = hashlib.sha256()  # the log so far, for the ids of lines without a time
    for number, line in enumerate(jsonl_lines(lines) if isinstance(lines, str) else lines,
                                  start=1):
        if not line.strip():
            continue
        before = log.hexdigest()[:16]
        log.update(line.strip().encode("utf-8", "surrogatepass") + b"\n")
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValidationError("expected a JSON object")
            event = _from_record(record, counter, default_timestamp)
            if not record.get("timestamp"):
                event.metadata.setdefault(IMPORT_ID,
                                          f"{_LINE}{before}>{log.hexdigest()[:16]}")
            events.append(event)
        except ValidationError as exc:
            raise ValidationError(f"line {number}: {exc}") from exc
        except json.JSONDecodeError as exc:
            raise ValidationError(f"line {number}: malformed JSON: {exc.msg}") from exc
        except ValueError as exc:  # a number of over 4,300 digits
            raise ValidationError(f"line {number}: unreadable JSON: {exc}") from None
        except RecursionError:
            raise ValidationError(f"line {number}: JSON nested too deeply") from None
    return events


def _from_record(
    record: dict[str, Any], counter: TokenCounter, default_timestamp: datetime
) -> NewEvent:
    kind = record.get("type", "message")
    content = record.get("result") if kind == "tool_result" else record.get("content")
    if content is None:
        content = record.get("content", "")
    if not isinstance(content, str):
        content = json.dumps(content, sort_keys=True, ensure_ascii=False)
    args = record.get("args")
    if args is not None and not isinstance(args, dict):
        raise ValidationError("args must be an object")
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ValidationError("metadata must be an object")
    stamp = record.get("timestamp")
    archived = record.get("archived", False)
    if not isinstance(archived, bool):
        raise ValidationError("archived must be true or false")
    return new_event(
        counter, type=str(kind), role=record.get("role"), content=content,
        timestamp=parse_timestamp(stamp) if stamp else default_timestamp,
        tool_name=record.get("toolName"), tool_call_id=record.get("toolCallId"),
        args=args, metadata=metadata, archived=archived,
    )


def to_record(event: Event) -> dict[str, Any]:
    """The JSON object of an event in the session format."""
    record: dict[str, Any] = {"type": event.type}
    if event.type in ("message", "summary") or event.role != DEFAULT_ROLE.get(event.type):
        record["role"] = event.role
    if event.tool_name is not None:
        record["toolName"] = event.tool_name
    if event.tool_call_id is not None:
        record["toolCallId"] = event.tool_call_id
    if event.args is not None:
        record["args"] = event.args
    if event.type == "tool_result":
        record["result"] = event.content
    elif event.content or event.type != "tool_call":
        record["content"] = event.content
    record["timestamp"] = format_timestamp(event.timestamp)
    if event.metadata:
        record["metadata"] = event.metadata
    if event.archived:
        record["archived"] = True
    return record


def dump_jsonl(events: Iterable[Event]) -> Iterator[str]:
    """One JSON line (without newline) per event."""
    for event in events:
        yield json.dumps(to_record(event), ensure_ascii=False)
