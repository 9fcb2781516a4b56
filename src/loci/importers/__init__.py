"""Importing the logs agents already write: one reader per format, one writer.

``FORMATS`` names the readers (``claude-code``, ``codex``, ``openai``, ``anthropic``);
each turns a file or a folder into :class:`ImportedSession` values, and
``import_log`` appends their events to a ``Loci``'s sessions, skipping the ones a
previous import stored (by their ``import_id``): importing twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loci.checks import check_name
from loci.errors import ValidationError
from loci.eventlog import IMPORT_ID, import_id
from loci.importers import anthropic, claude_code, codex, openai
from loci.importers.base import ImportedCount, ImportedSession, ImportReport

if TYPE_CHECKING:
    from loci.engine import ScopeView
    from loci.models import Event

Reader = Callable[[Path, "str | None"], list[ImportedSession]]

#: The formats ``import_log`` reads, by name.
FORMATS: dict[str, Reader] = {
    "claude-code": claude_code.read,
    "codex": codex.read,
    "openai": openai.read,
    "anthropic": anthropic.read,
}

__all__ = ["FORMATS", "ImportReport", "ImportedCount", "ImportedSession", "import_log",
           "read_log"]


def read_log(format: str, path: str | Path, session: str | None = None
             ) -> list[ImportedSession]:
    """The sessions of a log (nothing stored); ``session`` names the one session of a
    single file (a subagent's becomes ``<session>/agent-<id>``)."""
    reader = FORMATS.get(format)
    if reader is None:
        raise ValidationError(f"unknown log format {format!r}; expected one of "
                              f"{', '.join(FORMATS)}")
    source = Path(path).expanduser()
    try:
        found = source.exists()
    except OSError as exc:  # a name too long for the file system
        raise ValidationError(f"cannot read {source}: {exc.strerror or exc}") from None
    if not found:
        raise ValidationError(f"no such file or folder: {source}")
    if session is not None:
        check_name("session", session)
    sessions = reader(source, session)
    for imported in sessions:
        check_name("session", imported.name)
    return sessions


def import_log(loci: ScopeView, format: str, path: str | Path, session: str | None = None
               ) -> ImportReport:
    """Append each session's new events (those whose ``import_id`` the session does not
    hold yet) in one batch per session, in log order. A session holding other events
    under the same ids (another log of the same file name) is refused before anything
    is written: skipping them would lose the new log's."""
    sessions = read_log(format, path, session)
    planned = [(imported, _new_events(loci, imported)) for imported in sessions]
    counts = []
    for imported, new in planned:
        if new:
            loci.add_events(imported.name, new)
        counts.append(ImportedCount(
            session=imported.name, source_id=imported.source_id, added=len(new),
            skipped=len(imported.events) - len(new),
            tool_calls=sum(e["type"] == "tool_call" for e in new),
            tool_results=sum(e["type"] == "tool_result" for e in new),
            unreadable=imported.unreadable))
    return ImportReport(format=format, sessions=counts)


def _streamed_on(stored: Event, fields: Mapping[str, Any]) -> bool:
    """Whether ``fields`` is the first call of the assistant's reply whose text alone
    ``stored`` holds: a streamed reply's blocks are logged one record at a time."""
    return (stored.type, stored.role, fields["type"]) == ("message", "assistant",
                                                          "tool_call") and (
        stored.content == (fields.get("content") or ""))


def _new_events(loci: ScopeView, imported: ImportedSession) -> list[dict[str, Any]]:
    """The events of ``imported`` its session does not hold yet; ``ValidationError`` if
    it holds a different event under one of their ids."""
    held = {import_id(e.metadata): e for e in
            loci.store.list_events(loci.scope, imported.name)}
    new: list[dict[str, Any]] = []
    seen: set[str] = set()
    for fields in imported.events:
        key = fields["metadata"][IMPORT_ID]
        stored = held.get(key)
        if stored is not None and _streamed_on(stored, fields):
            # The reply's text came in before its calls (the log was read mid-reply):
            # its first call comes now, without the text the log holds already.
            key = f"{key}+call"
            fields = {**fields, "content": "", "metadata": {**fields["metadata"],
                                                            IMPORT_ID: key}}
            stored = held.get(key)
        if stored is not None and (stored.type, stored.content) != (
                fields["type"], fields.get("content") or ""):
            raise ValidationError(
                f"session {imported.name!r} already holds another log's events under the "
                f"ids of {imported.source_id!r} (event {key!r} differs): import this one "
                "into its own session (--session NAME)")
        if stored is None and key not in seen:
            seen.add(key)
            new.append(fields)
    return new
