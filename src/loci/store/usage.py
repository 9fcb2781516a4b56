"""The usage ledger's SQL, written once for both backends over a parameter marker: one
row per LLM call, recorded with the session's log as it stood (tokens and events, the
summaries left out, and its compactions), counted by the same statement.

The log is counted on from the session's previous record (its counts plus the events
appended since, ``last_event``): each event is counted with the tokens it was appended
with, before masking shrank them, and a call reads only the events since the last one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from loci.models import NewUsage, Scope, UsageRecord
from loci.store.codec import dump_json, from_micros, load_json, to_micros

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]

CREATE = """
    CREATE TABLE usage (
        id {id}, tenant TEXT NOT NULL, agent TEXT NOT NULL,
        session TEXT NOT NULL, at BIGINT NOT NULL, model TEXT NOT NULL,
        face TEXT NOT NULL, input_tokens BIGINT NOT NULL, cached_tokens BIGINT NOT NULL,
        cache_write_tokens BIGINT NOT NULL, output_tokens BIGINT NOT NULL,
        latency_ms DOUBLE PRECISION, context_tokens BIGINT NOT NULL, layers TEXT NOT NULL,
        prefix_hash TEXT NOT NULL, base_tokens BIGINT NOT NULL, log_tokens BIGINT NOT NULL,
        log_events BIGINT NOT NULL, compactions BIGINT NOT NULL, last_event BIGINT NOT NULL);
    CREATE INDEX usage_by_session ON usage (tenant, agent, session, id);
    CREATE INDEX usage_by_time ON usage (tenant, at)"""
_COLUMNS = ("agent, session, at, model, face, input_tokens, cached_tokens, "
            "cache_write_tokens, output_tokens, latency_ms, context_tokens, layers, "
            "prefix_hash, base_tokens, log_tokens, log_events, compactions, last_event, id")


def create_sql(identity: str) -> list[str]:
    """The table and its indexes; ``identity`` is the backend's increasing primary key."""
    return [s.strip() for s in CREATE.format(id=identity).split(";")]


def insert(mark: str, scope: Scope, call: NewUsage) -> tuple[str, tuple[Any, ...]]:
    """The statement that records ``call`` and counts the session's log with it; it
    returns the row that :func:`inserted` reads."""
    m = mark
    u = call.usage
    values = (scope.tenant, scope.agent, call.session, to_micros(call.at), call.model,
              call.face, u.input_tokens, u.cached_tokens, u.cache_write_tokens,
              u.output_tokens, call.latency_ms, call.context_tokens,
              dump_json(dict(call.layers)) or "{}", call.prefix_hash, call.base_tokens)
    where = f"tenant = {m} AND agent = {m} AND session = {m}"
    key = (scope.tenant, scope.agent, call.session)
    sql = (f"WITH prev AS (SELECT log_tokens, log_events, last_event FROM usage WHERE {where} "
           "ORDER BY id DESC LIMIT 1) "
           "INSERT INTO usage (tenant, agent, session, at, model, face, input_tokens, "
           "cached_tokens, cache_write_tokens, output_tokens, latency_ms, context_tokens, "
           "layers, prefix_hash, base_tokens, log_tokens, log_events, compactions, "
           f"last_event) SELECT {', '.join([m] * len(values))}, "
           "COALESCE((SELECT log_tokens FROM prev), 0) + COALESCE(SUM(tokens), 0), "
           "COALESCE((SELECT log_events FROM prev), 0) + COUNT(*), "
           f"(SELECT COUNT(*) FROM compactions WHERE {where}), "
           "COALESCE(MAX(id), (SELECT last_event FROM prev), 0) "
           f"FROM events WHERE {where} AND type <> 'summary' "
           "AND id > COALESCE((SELECT last_event FROM prev), 0) "
           "RETURNING log_tokens, log_events, compactions, last_event, id")
    return sql, (*key, *values, *key, *key)


def inserted(scope: Scope, call: NewUsage, row: Sequence[Any]) -> UsageRecord:
    log_tokens, log_events, compactions, last_event, row_id = row
    u = call.usage
    return UsageRecord(int(row_id), scope.agent, call.session, call.at, call.model, call.face,
                       u.input_tokens, u.cached_tokens, u.cache_write_tokens,
                       u.output_tokens, call.latency_ms, call.context_tokens,
                       dict(call.layers), call.prefix_hash, call.base_tokens,
                       int(log_tokens), int(log_events), int(compactions), int(last_event))


def select(query: Query, mark: str, tenant: str, agent: str | None, session: str | None,
           since: datetime | None, until: datetime | None) -> list[UsageRecord]:
    """The tenant's calls, oldest first, narrowed to an agent, a session, a time range."""
    where, params = [f"tenant = {mark}"], [tenant]
    for clause, value in (("agent = {}", agent), ("session = {}", session),
                          ("at >= {}", since and to_micros(since)),
                          ("at < {}", until and to_micros(until))):
        if value is not None:
            where.append(clause.format(mark))
            params.append(value)  # type: ignore[arg-type]
    rows = query(f"SELECT {_COLUMNS} FROM usage WHERE {' AND '.join(where)} ORDER BY id",
                 params)
    return [_record(r) for r in rows]


def _record(r: tuple[Any, ...]) -> UsageRecord:
    layers = load_json(r[11])
    return UsageRecord(int(r[18]), r[0], r[1], from_micros(r[2]), r[3], r[4], int(r[5]),
                       int(r[6]), int(r[7]), int(r[8]), r[9], int(r[10]),
                       layers if isinstance(layers, dict) else {}, r[12], int(r[13]),
                       int(r[14]), int(r[15]), int(r[16]), int(r[17]))


def import_rows(mark: str, scope: Scope, records: Sequence[UsageRecord]
                ) -> tuple[str, list[tuple[Any, ...]]]:
    """The ``INSERT`` and its rows that copy ``records`` into ``scope``, ids kept."""
    columns = f"tenant, {_COLUMNS}"
    rows = [(scope.tenant, scope.agent, r.session, to_micros(r.at), r.model, r.face,
             r.input_tokens, r.cached_tokens, r.cache_write_tokens, r.output_tokens,
             r.latency_ms, r.context_tokens, dump_json(dict(r.layers)) or "{}",
             r.prefix_hash, r.base_tokens, r.log_tokens, r.log_events, r.compactions,
             r.last_event, r.id) for r in records]
    return f"INSERT INTO usage ({columns}) VALUES ({', '.join([mark] * 20)})", rows
