"""A user's data as one portable archive, and back.

The archive is a zip file: ``manifest.json`` (format, user, agents, time), and per agent
``agents/<n>/scope.json`` (every event with its flags, memories with their history, state,
documents with their versions, compactions: what :class:`ScopeData` holds, ids
included) and ``agents/<n>/sessions/<m>.jsonl`` (each session in the JSONL format that
``loci import`` reads, for people and other tools). Vectors are left out: the importing
store embeds with its own model. The user's shared memories (``memory.scopes``) travel as
the agent ``SHARED_AGENT``'s.

Importing needs a store that holds nothing of that user, and an archive whose every row
reads as its type. Event, compaction and usage ids are global to a store: the rows keep
theirs where the store has them free (a user erased and imported back comes back as they
were) and get fresh ones where another user's rows hold them (a user moved between
stores), the texts that name an event renumbered with them.
"""

from __future__ import annotations

import io
import json
import lzma
import zipfile
import zlib
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, fields, replace
from datetime import datetime
from types import UnionType
from typing import Any, get_args, get_origin, get_type_hints

from loci.checks import check_json, check_name
from loci.compaction.masking import PLACEHOLDER, artifact_path
from loci.compaction.service import FLUSHED_PREFIX
from loci.erasure import scopes_of
from loci.errors import ConflictError, ValidationError
from loci.eventlog import dump_jsonl
from loci.memory.service import CONFIRMED_FROM
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
    """Write an archive's scopes into ``store`` in one transaction, versions kept and ids
    too where the store has them free (else fresh ones, and every text that names an
    event renumbered: :func:`_renumbered`); refused, and nothing written, if the archive
    is malformed or the store holds anything of that user."""
    user, scopes = _read(archive_bytes)
    if scopes_of(store, user):
        raise ConflictError(f"the store already holds data of user {user!r}: erase it first")
    store.import_scopes(scopes, _renumbered)
    return [data.scope for data in scopes]


def _read(archive_bytes: bytes) -> tuple[str, list[ScopeData]]:
    """The archive's user and scopes, each row checked; a ``ValidationError`` naming what
    is wrong otherwise."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(archive_bytes))
    except (zipfile.BadZipFile, NotImplementedError, ValueError) as exc:
        raise ValidationError(f"cannot read the archive: {exc}") from exc
    with archive:
        manifest = _json(archive, "manifest.json")
        if not isinstance(manifest, dict) or (manifest.get("format"), manifest.get(
                "version")) != (FORMAT, VERSION):
            raise ValidationError(f"not a {FORMAT} archive of version {VERSION}")
        if "user" not in manifest:
            raise ValidationError("the archive's manifest.json names no user")
        user = check_name("user", manifest["user"])
        agents = manifest.get("agents")
        if not isinstance(agents, list):
            raise ValidationError("the archive's manifest.json: agents must be a list")
        names = [f"agents/{n}/scope.json" for n in range(len(agents))]
        scopes = [_scope_data(_json(archive, name), name) for name in names]
    for data in scopes:  # names enter the store here too: the one rule applies
        if data.scope.tenant != user:
            raise ValidationError("the archive mixes users")
        if data.scope.agent != SHARED_AGENT or data.events:
            check_name("agent", data.scope.agent)
        for session in {e.session for e in data.events}:
            check_name("session", session)
    agents = [data.scope.agent for data in scopes]
    if len(set(agents)) < len(agents):
        raise ValidationError("the archive holds an agent twice")
    return user, scopes


def _json(archive: zipfile.ZipFile, name: str) -> Any:
    try:
        return json.loads(archive.read(name))
    except KeyError:
        raise ValidationError(f"the archive has no {name}") from None
    # A damaged member (zlib's, bz2's (an OSError) or lzma's stream), one compressed or
    # encrypted in a way zipfile cannot read, text that is not JSON (or nested too deep
    # to parse: RecursionError is a RuntimeError).
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, lzma.LZMAError,
            NotImplementedError, RuntimeError, ValueError) as exc:
        raise ValidationError(f"cannot read {name} in the archive: {exc}") from exc


def _renumbered(data: ScopeData, event: Callable[[int], int]) -> ScopeData:
    """``data`` with the event ids its texts name renumbered by ``event`` (when the store
    importing it holds their ids: ``store.transfer.placed``): the memories' sources
    (``event:<id>``), the masks (their event and its artifact), the artifacts' paths and
    metadata, the flush marks of the state."""
    def source(text: str | None) -> str | None:
        kind, _, number = (text or "").partition(":")
        old = _number(number)
        return f"event:{event(old)}" if kind == "event" and old is not None else text

    def confirmed(metadata: dict[str, Any]) -> dict[str, Any]:
        said = metadata.get(CONFIRMED_FROM)
        if not isinstance(said, list):
            return metadata
        return {**metadata, CONFIRMED_FROM: [source(s) if isinstance(s, str) else s
                                             for s in said]}

    def flushed(item: StateItem) -> StateItem:
        old = _number(item.value)
        if not item.key.startswith(FLUSHED_PREFIX) or old is None:
            return item
        return replace(item, value=str(event(old)))

    return replace(
        data,
        events=tuple(replace(e, masked=_mask(e, event(e.id))) for e in data.events),
        memories=tuple(replace(m, source=source(m.source), metadata=confirmed(m.metadata))
                       for m in data.memories),
        memory_versions=tuple((v, source(s)) for v, s in data.memory_versions),
        state=tuple(flushed(item) for item in data.state),
        documents=tuple(replace(d, **_artifact(d.path, d.metadata, event))
                        for d in data.documents),
        document_versions=tuple(replace(v, **_artifact(v.path, v.metadata, event))
                                for v in data.document_versions))


def _number(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def _mask(e: Event, new: int) -> str | None:
    """``e``'s mask naming ``new``: the parts ``compaction.masking`` writes name the event
    and its artifact; the head of the output a mask may keep comes before them."""
    if e.masked is None or new == e.id:
        return e.masked
    text = e.masked
    if text.startswith(PLACEHOLDER):
        text = text.replace(f"(event {e.id}, ", f"(event {new}, ", 1)
    for old_part, new_part in ((f"is event {e.id} — ", f"is event {new} — "),
                               (artifact_path(e.session, e.id), artifact_path(e.session, new))):
        head, found, tail = text.rpartition(old_part)
        text = head + new_part + tail if found else text
    return text


def _artifact(path: str, metadata: dict[str, Any], event: Callable[[int], int]
              ) -> dict[str, Any]:
    """The path and metadata of a document: an artifact (``compaction.masking``) moves
    to its event's new id."""
    session, old = metadata.get("session"), metadata.get("event_id")
    if not isinstance(session, str) or type(old) is not int or (
            path != artifact_path(session, old)):
        return {"path": path, "metadata": metadata}
    return {"path": artifact_path(session, event(old)),
            "metadata": {**metadata, "event_id": event(old)}}


def _scope_json(data: ScopeData) -> dict[str, Any]:
    found: dict[str, Any] = {"tenant": data.scope.tenant, "agent": data.scope.agent}
    for name in _ROWS:
        found[name] = [_plain(asdict(row)) for row in getattr(data, name)]
    found["memory_versions"] = [{**_plain(asdict(v)), "source": source}
                                for v, source in data.memory_versions]
    return found


def _scope_data(raw: Any, where: str) -> ScopeData:
    if not isinstance(raw, dict):
        raise ValidationError(f"{where} is not a JSON object")
    tenant, agent = raw.get("tenant"), raw.get("agent")
    if not isinstance(tenant, str) or not isinstance(agent, str):
        raise ValidationError(f"{where} names no tenant and agent")
    rows: dict[str, Any] = {
        name: tuple(_row(cls, item, f"{where} {name}[{i}]")
                    for i, item in enumerate(_list(raw, name, where)))
        for name, cls in _ROWS.items()}
    versions = []
    for i, item in enumerate(_list(raw, "memory_versions", where)):
        at = f"{where} memory_versions[{i}]"
        if not isinstance(item, dict):
            raise ValidationError(f"{at} is not a JSON object")
        row = {k: v for k, v in item.items() if k != "source"}
        versions.append((_row(MemoryVersion, row, at),
                         _value(str | None, item.get("source"), f"{at}.source")))
    return ScopeData(scope=Scope(tenant, agent), memory_versions=tuple(versions), **rows)


def _list(raw: dict[str, Any], name: str, where: str) -> list[Any]:
    # Archives written before a kind of row existed lack its list.
    found = raw.get(name, [])
    if not isinstance(found, list):
        raise ValidationError(f"{where}: {name} must be a list, not {type(found).__name__}")
    return found


def _plain(value: Any) -> Any:
    """JSON values: times as ISO 8601, tuples as lists."""
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


#: What a JSON value of each field type must be, as an error says it.
_KINDS: dict[Any, str] = {
    datetime: "an ISO 8601 time", tuple: "a list of strings", dict: "a JSON object",
    Mapping: "a JSON object", float: "a number", int: "an integer", str: "a string",
    bool: "true or false"}


def _row(cls: type[Any], item: Any, where: str) -> Any:
    """A model dataclass from its JSON form, each field checked against its type (times
    parsed, lists back to tuples); a ``ValidationError`` naming ``where`` otherwise."""
    if not isinstance(item, dict):
        raise ValidationError(f"{where} is not a JSON object")
    hints = get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in item:
            at = f"{where}.{f.name}"
            values[f.name] = _value(hints[f.name], check_json(at, item[f.name]), at)
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ValidationError(f"{where} has no {f.name}")
    return cls(**values)


def _value(kind: Any, value: Any, where: str) -> Any:
    """``value`` as a field of type ``kind`` holds it."""
    if isinstance(kind, UnionType):  # the models' unions are ``X | None``
        if value is None:
            return None
        kind = next(k for k in get_args(kind) if k is not type(None))
    base = get_origin(kind) or kind
    if base is datetime and isinstance(value, str):
        try:
            return parse_timestamp(value)
        except ValidationError as exc:
            raise ValidationError(f"{where}: {exc}") from None
    if base is tuple and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    if base in (dict, Mapping) and isinstance(value, dict):
        return value
    if base is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if base in (int, str, bool) and type(value) is base:
        return value
    raise ValidationError(f"{where} must be {_KINDS.get(base, base)}, not "
                          f"{type(value).__name__}")
