"""Whole-scope export and import (``loci migrate``, ``loci user import``), written once for
both backends over a small :class:`Dialect`; each backend adds its vectors and its own
bookkeeping.

Event, compaction and usage ids are global to a store, so an imported scope keeps its
ids only while no other row holds them (a copy into an empty store, a user imported
back where they were erased); otherwise they move past the store's highest id, every
reference along (:func:`placed`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import groupby
from typing import Any, Protocol

from loci.checks import OPERATOR
from loci.errors import ConflictError, ValidationError
from loci.models import ApiKey, Event, Scope
from loci.search import conversation
from loci.store import usage
from loci.store.base import Renumber, ScopeData, Vectors
from loci.store.codec import to_micros
from loci.store.rows import (
    API_KEY_COLUMNS,
    to_api_key,
    to_compaction,
    to_document,
    to_document_version,
    to_event,
    to_memory,
    to_state,
    to_version,
)

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]

SCOPED_TABLES = ("events", "memories", "memory_versions", "state", "documents",
                 "document_versions", "compactions", "usage")
#: The tables whose integer ids are global to a store, not per scope.
NUMBERED = ("events", "compactions", "usage")


def key_tables(tenant: str) -> tuple[str, ...]:
    """The key table erasing ``tenant`` empties, unless ``tenant`` is the operator's:
    erasing rows stored under that name (older versions accepted it as a user's) never
    revokes the operator keys."""
    return () if tenant == OPERATOR else ("api_keys",)


class Executor(Protocol):
    """What a write transaction hands out: a SQLite connection or a psycopg cursor."""

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], /) -> object: ...


class JsonValue(Protocol):
    """A value as the database takes a JSON column (None for empty, unless kept)."""

    def __call__(self, value: Any, *, keep_empty: bool = False) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    """How a backend spells what export and import need."""

    #: The parameter marker (``?`` or ``%s``).
    mark: str
    #: The columns selected for events, memories, documents and compactions, in the
    #: order ``store.rows`` reads them.
    events: str
    memories: str
    documents: str
    compactions: str
    #: Insertion order of memories and documents (it breaks ties in listings).
    seq: str
    #: SQL reading a stored tags column as space-joined words, and JSON as text.
    read_tags: Callable[[str], str]
    read_json: Callable[[str], str]
    #: Byte order for a text column in ORDER BY.
    bytewise: Callable[[str], str]
    #: Values as the database takes them.
    tags: Callable[[tuple[str, ...]], Any]
    json: JsonValue
    #: Casts after the marker of a JSON parameter (e.g. ``::jsonb``).
    json_cast: str = ""
    #: Refuses text the database cannot store (before anything is written).
    check: Callable[..., None] = lambda *texts: None
    #: A derived document column: (name, cast, value from the path), or None.
    document_key: tuple[str, str, Callable[[str], Any]] | None = None
    #: The highest id a numbered row may have.
    max_id: int = 2**63 - 1

    def values(self, *casts: str) -> str:
        """``VALUES (...)`` with one marker per column, each followed by its cast."""
        return f"VALUES ({', '.join(self.mark + cast for cast in casts)})"


def list_scopes(query: Query, d: Dialect) -> list[Scope]:
    union = " UNION ".join(f"SELECT tenant, agent FROM {t}" for t in SCOPED_TABLES)
    rows = query(f"SELECT tenant, agent FROM ({union}) s "
                 f"ORDER BY {d.bytewise('tenant')}, {d.bytewise('agent')}", ())
    return [Scope(r[0], r[1]) for r in rows]


def list_meta(query: Query) -> dict[str, str]:
    return {r[0]: r[1] for r in query("SELECT key, value FROM meta", ())}


def export_api_keys(query: Query, d: Dialect) -> list[tuple[ApiKey, str]]:
    rows = query(f"SELECT {API_KEY_COLUMNS}, secret_hash FROM api_keys "
                 f"ORDER BY created, {d.bytewise('id')}", ())
    return [(to_api_key(r[:-1]), r[-1]) for r in rows]


def export_scope(
    query: Query, d: Dialect, scope: Scope, vectors: dict[str, tuple[list[str], Vectors]]
) -> ScopeData:
    """Everything ``scope`` holds; ``vectors`` come from the backend."""
    s = (scope.tenant, scope.agent)
    where = f"WHERE tenant = {d.mark} AND agent = {d.mark}"
    return ScopeData(
        scope=scope,
        events=tuple(to_event(r) for r in query(
            f"SELECT {d.events} FROM events {where} ORDER BY id", s)),
        memories=tuple(to_memory(r) for r in query(
            f"SELECT {d.memories} FROM memories {where} ORDER BY {d.seq}", s)),
        memory_versions=tuple((to_version(r[:-1]), r[-1]) for r in query(
            f"SELECT memory_id, version, type, content, {d.read_tags('tags')}, created, "
            f"updated, expires, superseded, reason, source FROM memory_versions {where} "
            f"ORDER BY {d.bytewise('memory_id')}, version", s)),
        state=tuple(to_state(r) for r in query(
            f"SELECT key, value, updated FROM state {where} ORDER BY {d.bytewise('key')}",
            s)),
        documents=tuple(to_document(r) for r in query(
            f"SELECT {d.documents} FROM documents {where} ORDER BY {d.seq}", s)),
        document_versions=tuple(to_document_version(r) for r in query(
            f"SELECT path, version, content, {d.read_tags('tags')}, created, updated, "
            f"superseded, {d.read_json('metadata')} FROM document_versions {where} "
            f"ORDER BY {d.bytewise('path')}, version", s)),
        compactions=tuple(to_compaction(r) for r in query(
            f"SELECT {d.compactions} FROM compactions {where} ORDER BY id", s)),
        usage=tuple(usage.select(query, d.mark, scope.tenant, scope.agent, None, None, None)),
        vectors=vectors,
    )


def placed(query: Query, d: Dialect, scopes: Sequence[ScopeData],
           renumber: Renumber | None) -> list[ScopeData]:
    """``scopes`` as this store can take them, read inside the importing transaction: ids
    kept while none of a table's is taken, else all of that table's moved by one step
    past its highest id, so that their order and gaps stay (recall reads a turn's
    neighbours as the ids next to it). Without ``renumber`` taken ids are refused."""
    ids = {"events": [e.id for s in scopes for e in s.events],
           "compactions": [c.id for s in scopes for c in s.compactions],
           "usage": [u.id for s in scopes for u in s.usage]}
    steps = {table: _step(query, d, table, ids[table]) for table in NUMBERED}
    if not any(steps.values()):
        return list(scopes)
    if renumber is None:
        raise ConflictError("this store holds rows with the ids of the scope imported "
                            "(event ids are global): import it into an empty store")

    def event(old: int) -> int:
        return old + steps["events"] if old > 0 else old  # 0 names no event

    return [_moved(renumber(s, event), steps, event) for s in scopes]


def _step(query: Query, d: Dialect, table: str, ids: Sequence[int]) -> int:
    """How far ``ids`` move in ``table``: 0 while none is taken."""
    if not ids:
        return 0
    low, high = min(ids), max(ids)
    if low < 1:
        raise ValidationError(f"{table} ids must be positive, not {low}")
    unique = sorted(set(ids))
    taken = any(query(f"SELECT 1 FROM {table} WHERE id IN ({', '.join([d.mark] * len(part))})"
                      " LIMIT 1", part) for part in _parts(unique))
    step = (query(f"SELECT MAX(id) FROM {table}", ())[0][0] or 0) + 1 - low if taken else 0
    if high + step > d.max_id:
        raise ValidationError(f"{table} ids beyond {d.max_id} do not fit this store")
    return int(step)


def _parts(ids: list[int], size: int = 500) -> Iterator[list[int]]:
    for start in range(0, len(ids), size):
        yield ids[start:start + size]


def _moved(data: ScopeData, steps: dict[str, int], event: Callable[[int], int]
           ) -> ScopeData:
    """``data`` with its numbered rows moved by ``steps`` and the columns that name an
    event (a compaction's span and summary, a usage record's last event, an event's
    vector) moved by ``event``."""
    ids, vectors = data.vectors.get("event", ([], None))
    return replace(
        data,
        events=tuple(replace(e, id=event(e.id)) for e in data.events),
        compactions=tuple(replace(
            c, id=c.id + steps["compactions"], first_event_id=event(c.first_event_id),
            last_event_id=event(c.last_event_id),
            summary_event_id=None if c.summary_event_id is None else event(c.summary_event_id))
            for c in data.compactions),
        usage=tuple(replace(u, id=u.id + steps["usage"], last_event=event(u.last_event))
                    for u in data.usage),
        vectors={**data.vectors, "event": ([str(event(int(i))) for i in ids], vectors)}
        if vectors is not None else data.vectors)


def import_events(db: Executor, d: Dialect, scope: Scope, events: Sequence[Event]) -> None:
    """Insert events with their ids; search columns are derived per session, in order,
    as appending them would have (``search.conversation``)."""
    rows = []
    ordered = sorted(events, key=lambda e: (e.session, e.id))
    for session, group in groupby(ordered, key=lambda e: e.session):
        batch = list(group)
        columns = conversation.index_columns(batch, [])
        for e, (extra, ctx) in zip(batch, columns, strict=True):
            d.check(session, e.type, e.role, e.content, e.tool_name, e.tool_call_id,
                    e.masked, extra, ctx)
            rows.append((e.id, scope.tenant, scope.agent, session, e.type, e.role, e.content,
                         to_micros(e.timestamp), e.tokens, e.tool_name, e.tool_call_id,
                         d.json(e.args, keep_empty=True), d.json(e.metadata), e.archived,
                         e.masked, extra, ctx))
    j = d.json_cast
    db.executemany(
        "INSERT INTO events (id, tenant, agent, session, type, role, content, ts, tokens, "
        "tool_name, tool_call_id, args, metadata, archived, masked, search_extra, "
        f"search_context) {d.values(*[''] * 11, j, j, *[''] * 4)}", rows)


def import_rows(db: Executor, d: Dialect, data: ScopeData) -> None:
    """Memories (and history), state, documents (and history), compactions, usage."""
    s = (data.scope.tenant, data.scope.agent)
    j = d.json_cast
    for m in data.memories:
        d.check(m.id, m.type, m.content, m.source, m.superseded_by, *m.tags)
    db.executemany(
        "INSERT INTO memories (id, tenant, agent, type, content, tags, created, updated, "
        f"expires, source, metadata, confirmed, superseded_by) {d.values(*[''] * 10, j, '', '')}",
        [(m.id, *s, m.type, m.content, d.tags(m.tags), to_micros(m.created_at),
          to_micros(m.updated_at), _micros(m.expires_at), m.source, d.json(m.metadata),
          _micros(m.confirmed_at), m.superseded_by) for m in data.memories])
    db.executemany(
        "INSERT INTO memory_versions (memory_id, tenant, agent, version, type, content, "
        f"tags, created, updated, expires, source, superseded, reason) {d.values(*[''] * 13)}",
        [(v.memory_id, *s, v.version, v.type, v.content, d.tags(v.tags),
          to_micros(v.created_at), to_micros(v.updated_at), _micros(v.expires_at), source,
          to_micros(v.superseded_at), v.reason) for v, source in data.memory_versions])
    db.executemany(
        f"INSERT INTO state (tenant, agent, key, value, updated) {d.values(*[''] * 5)}",
        [(*s, i.key, i.value, to_micros(i.updated_at)) for i in data.state])
    _import_documents(db, d, data)
    db.executemany(
        "INSERT INTO compactions (id, tenant, agent, session, strategy, first_event_id, "
        "last_event_id, summary_event_id, summary, tokens_before, tokens_after, created) "
        f"{d.values(*[''] * 12)}",
        [(c.id, *s, c.session, c.strategy, c.first_event_id, c.last_event_id,
          c.summary_event_id, c.summary, c.tokens_before, c.tokens_after,
          to_micros(c.created_at)) for c in data.compactions])
    db.executemany(*usage.import_rows(d.mark, data.scope, data.usage))


def _import_documents(db: Executor, d: Dialect, data: ScopeData) -> None:
    s = (data.scope.tenant, data.scope.agent)
    j = d.json_cast
    key_column, key_cast, key = d.document_key or ("", "", None)
    columns = ["tenant", "agent", "path", *([key_column] if key else []), "content", "tags",
               "version", "created", "updated", "metadata"]
    casts = ["", "", "", *([key_cast] if key else []), "", "", "", "", "", j]
    db.executemany(
        f"INSERT INTO documents ({', '.join(columns)}) {d.values(*casts)}",
        [(*s, doc.path, *([key(doc.path)] if key else []), doc.content, d.tags(doc.tags),
          doc.version, to_micros(doc.created_at), to_micros(doc.updated_at),
          d.json(doc.metadata)) for doc in data.documents])
    db.executemany(
        "INSERT INTO document_versions (tenant, agent, path, version, content, tags, "
        f"created, updated, metadata, superseded) {d.values(*[''] * 8, j, '')}",
        [(*s, v.path, v.version, v.content, d.tags(v.tags), to_micros(v.created_at),
          to_micros(v.updated_at), d.json(v.metadata), to_micros(v.superseded_at))
         for v in data.document_versions])


def _micros(value: Any) -> int | None:
    return None if value is None else to_micros(value)
