"""A user's data as one portable archive, and back.

The archive is a zip file: ``manifest.json`` (format, user, agents, time), and per agent
``agents/<n>/scope.json`` (every event with its flags, memories with their history, state,
documents with their versions, compactions: what :class:`ScopeData` holds, ids
included) and ``agents/<n>/sessions/<m>.jsonl`` (each session in the JSONL format that
``loci import`` reads, for people and other tools). Vectors are left out: the importing
store embeds with its own model. Importing needs a store that holds nothing of that user.
The user's shared memories (``memory.scopes``) travel as the agent ``SHARED_AGENT``'s.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import asdict, fields
from datetime import datetime
from typing import Any, get_type_hints

from loci.checks import check_name
from loci.erasure import scopes_of
from loci.errors import ConflictError, ValidationError
from loci.eventlog import dump_jsonl
from loci.models import (
    SHARED_AGENT,
    Compaction,
    Document,
    DocumentVersion,
    Event,
    Memory,
    MemoryVersion,
    Scope,
    StateItem,
    UsageRecord,
)
from loci.store.base import ScopeData, Store
from loci.timeutil import format_timestamp, parse_timestamp

FORMAT = "loci-user-export"
VERSION = 1
_ROWS: dict[str, type[Any]] = {
    "events": Event, "memories": Memory, "state": StateItem, "documents": Document,
    "document_versions": DocumentVersion, "compactions": Compaction, "usage": UsageRecord,
}


def export_user(store: Store, user: str, now: datetime) -> bytes:
    """The archive of everything ``user`` holds, every agent."""
    scopes = scopes_of(store, user)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", json.dumps({
            "format": FORMAT, "version": VERSION, "user": user,
            "agents": [s.agent for s in scopes], "exported_at": format_timestamp(now)},
            ensure_ascii=False, indent=2))
        for n, scope in enumerate(scopes):
            data = store.export_scope(scope)
            archive.writestr(f"agents/{n}/scope.json", json.dumps(
                _scope_json(data), ensure_ascii=False))
            sessions = sorted({e.session for e in data.events})
            for m, session in enumerate(sessions):
                lines = dump_jsonl(e for e in data.events if e.session == session)
                archive.writestr(f"agents/{n}/sessions/{m}.jsonl",
                                 "".join(line + "\n" for line in lines))
    return buffer.getvalue()


def import_user(store: Store, archive_bytes: bytes) -> list[Scope]:
    """Write an archive's scopes into ``store``, ids and versions kept; refused (and
    nothing written) if the store holds anything of that user."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive_bytes)) as archive:
            manifest = json.loads(archive.read("manifest.json"))
            if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
                raise ValidationError(f"not a {FORMAT} archive of version {VERSION}")
            scopes = [_scope_data(json.loads(archive.read(f"agents/{n}/scope.json")))
                      for n in range(len(manifest["agents"]))]
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError) as exc:
        raise ValidationError(f"cannot read the archive: {exc}") from exc
    user = check_name("user", manifest["user"])
    for data in scopes:  # names enter the store here too: the one rule applies
        if data.scope.agent != SHARED_AGENT or data.events:
            check_name("agent", data.scope.agent)
        for session in {e.session for e in data.events}:
            check_name("session", session)
    if scopes_of(store, user):
        raise ConflictError(f"the store already holds data of user {user!r}: erase it first")
    for data in scopes:
        if data.scope.tenant != user:
            raise ValidationError("the archive mixes users")
    for data in scopes:
        store.import_scope(data)
    return [data.scope for data in scopes]


def _scope_json(data: ScopeData) -> dict[str, Any]:
    found: dict[str, Any] = {"tenant": data.scope.tenant, "agent": data.scope.agent}
    for name in _ROWS:
        found[name] = [_plain(asdict(row)) for row in getattr(data, name)]
    found["memory_versions"] = [{**_plain(asdict(v)), "source": source}
                                for v, source in data.memory_versions]
    return found


def _scope_data(raw: dict[str, Any]) -> ScopeData:
    # Archives written before a kind of row existed lack its list.
    rows: dict[str, Any] = {name: tuple(_row(cls, item) for item in raw.get(name, ()))
                            for name, cls in _ROWS.items()}
    versions = tuple((_row(MemoryVersion, {k: v for k, v in item.items() if k != "source"}),
                      item["source"]) for item in raw["memory_versions"])
    return ScopeData(scope=Scope(raw["tenant"], raw["agent"]), memory_versions=versions,
                     **rows)


def _plain(value: Any) -> Any:
    """JSON values: times as ISO 8601, tuples as lists."""
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _row(cls: type[Any], item: dict[str, Any]) -> Any:
    """A model dataclass from its JSON form (times parsed, lists back to tuples)."""
    hints = get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields(cls):
        value = item.get(f.name)
        kind = str(hints[f.name])
        if value is not None and "datetime" in kind:
            value = parse_timestamp(value)
        elif isinstance(value, list) and "tuple" in kind:
            value = tuple(value)
        if f.name in item:
            values[f.name] = value
    return cls(**values)
