"""Rows as every backend selects them, turned into models: columns in the order of
``EVENT_COLUMNS``, ``MEMORY_COLUMNS``, ... (see ``sqlite.rows``), times in microseconds,
tags as space-separated text and JSON as text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from loci.errors import ConflictError
from loci.models import (
    ApiKey,
    Compaction,
    Document,
    DocumentVersion,
    Event,
    Memory,
    MemoryVersion,
    NewEvent,
    SearchHit,
    StateItem,
    captions,
    content_sha256,
)
from loci.search import conversation
from loci.store.codec import canonical_json, from_micros, load_json, load_tags, to_micros

#: Characters of an item's text handed to the embedder (models truncate anyway).
EMBED_CHARS = 4_000


def to_hit(kind: str, r: tuple[Any, ...], score: float) -> SearchHit:
    """A hit from a row selected with ``KINDS[kind].hit_columns``."""
    if kind == "event":
        name = r[6]  # the speaker's name, read from the metadata by the query
        text = r[2] if r[5] != "tool_call" else call_text(r[2], r[7], load_json(r[8]))
        shared = captions(load_json(r[9])) if r[9] is not None else []
        return SearchHit(kind="event", id=str(r[0]), score=score, text=text,
                         timestamp=from_micros(r[3]), session=r[1],
                         metadata={"role": r[4], "type": r[5],
                                   **({"name": name} if isinstance(name, str) else {}),
                                   **({"caption": shared} if shared else {})})
    if kind == "memory":
        return SearchHit(kind="memory", id=r[0], score=score, text=r[2],
                         timestamp=from_micros(r[4]),
                         metadata={"type": r[1], "tags": list(load_tags(r[3])),
                                   "expires_at": None if r[5] is None else from_micros(r[5]),
                                   "superseded_by": r[6], "source": r[7]})
    return SearchHit(kind="document", id=r[0], score=score, text=r[1],
                     timestamp=from_micros(r[2]), metadata={"tags": list(load_tags(r[3]))})


def call_text(content: str, tool: str | None, args: Any) -> str:
    """A tool call as a hit shows it: the assistant's text, then ``tool(arguments)``."""
    call = f"{tool or 'tool'}({canonical_json(args) if args else ''})"
    return f"{content}\n{call}" if content.strip() else call


def ordered_hits(kind: str, rows: Sequence[tuple[Any, ...]], scored: Sequence[tuple[int, float]]
                 ) -> list[SearchHit]:
    """Hits for the (key, score) pairs of ``scored``, in their order, from rows selected
    with ``hit_columns`` and then the key; a key without a row is left out."""
    by_key = {int(r[-1]): r[:-1] for r in rows}
    return [to_hit(kind, by_key[key], score) for key, score in scored if key in by_key]


def to_event(r: tuple[Any, ...]) -> Event:
    return Event(
        id=r[0], session=r[1], type=r[2], role=r[3], content=r[4],
        timestamp=from_micros(r[5]), tokens=r[6], tool_name=r[7], tool_call_id=r[8],
        args=load_json(r[9]), metadata=load_json(r[10]) or {}, archived=bool(r[11]),
        masked=r[12],
    )


def to_memory(r: tuple[Any, ...]) -> Memory:
    return Memory(
        id=r[0], type=r[1], content=r[2], tags=load_tags(r[3]),
        created_at=from_micros(r[4]), updated_at=from_micros(r[5]),
        expires_at=None if r[6] is None else from_micros(r[6]), source=r[7],
        metadata=load_json(r[8]) or {},
        confirmed_at=None if r[9] is None else from_micros(r[9]), superseded_by=r[10],
    )


API_KEY_COLUMNS = "id, tenant, label, created, revoked"


def to_api_key(r: tuple[Any, ...]) -> ApiKey:
    return ApiKey(r[0], r[1], r[2], from_micros(r[3]), bool(r[4]))


def to_state(r: tuple[Any, ...]) -> StateItem:
    return StateItem(key=r[0], value=r[1], updated_at=from_micros(r[2]))


def to_document(r: tuple[Any, ...]) -> Document:
    return Document(
        path=r[0], content=r[1], tags=load_tags(r[2]), version=r[3],
        created_at=from_micros(r[4]), updated_at=from_micros(r[5]),
        metadata=load_json(r[6]) or {},
    )


def to_version(r: tuple[Any, ...]) -> MemoryVersion:
    return MemoryVersion(
        memory_id=r[0], version=r[1], type=r[2], content=r[3], tags=load_tags(r[4]),
        created_at=from_micros(r[5]), updated_at=from_micros(r[6]),
        expires_at=None if r[7] is None else from_micros(r[7]),
        superseded_at=from_micros(r[8]), reason=r[9],
    )


def to_compaction(r: tuple[Any, ...]) -> Compaction:
    """A compaction from a row selected with ``COMPACTION_COLUMNS``."""
    return Compaction(
        id=r[0], session=r[1], strategy=r[2], first_event_id=r[3], last_event_id=r[4],
        summary_event_id=r[5], summary=r[6], tokens_before=r[7], tokens_after=r[8],
        created_at=from_micros(r[9]),
    )


def in_order(paths: Sequence[str], documents: Sequence[Document]) -> list[Document]:
    """``documents`` in the order of ``paths`` (those not found left out)."""
    by_path = {d.path: d for d in documents}
    return [by_path[p] for p in dict.fromkeys(paths) if p in by_path]


def to_document_version(r: tuple[Any, ...]) -> DocumentVersion:
    """path, version, content, tags, created, updated, superseded, metadata."""
    return DocumentVersion(
        path=r[0], version=r[1], content=r[2], tags=load_tags(r[3]),
        created_at=from_micros(r[4]), updated_at=from_micros(r[5]),
        superseded_at=from_micros(r[6]), metadata=load_json(r[7]) or {},
    )


def check_unchanged(path: str, stored: str | None, expected: str | None) -> None:
    """Refuse a write whose writer saw other content than is stored (``expected``: its
    SHA-256, "" for no document; None: no condition)."""
    if expected is None:
        return
    actual = content_sha256(stored)
    if actual != expected:
        now = f"its content's sha256 is now {actual}" if actual else "it no longer exists"
        raise ConflictError(f"{path} changed since it was read ({now}): read it again "
                            "and retry")


def in_time_order(events: Sequence[NewEvent], latest: int | None) -> list[NewEvent]:
    """``events`` with each engine-stamped time moved up to the session's ``latest``
    (microseconds) or the batch's previous time, if it fell behind."""
    out = []
    for event in events:
        if event.stamped:
            if latest is not None and to_micros(event.timestamp) < latest:
                event = replace(event, timestamp=from_micros(latest))
            latest = to_micros(event.timestamp)
        out.append(event)
    return out


def event_embedding_text(content: str, metadata: str | None, context: str | None) -> str:
    """What is embedded for an event (``search.conversation.embedding_text``)."""
    meta = load_json(metadata)
    if not content.strip() and not captions(meta):
        return ""  # nothing of its own to embed: a zero row
    text = conversation.embedding_text(content, meta, context)
    return text[:EMBED_CHARS]
