"""Full-text rows partitioned by scope, so a keyword search ranks only its own rows.

FTS5 keeps one index per table, and ``ORDER BY rank`` computes BM25 for every matching
row before a join can drop other tenants' rows: a tenant's keyword search took 0.92 ms
alone and 6.56 ms among ten tenants of the same size (``benchmarks/tenants.py``). So
each full-text row's rowid carries its scope: ``scope number << SCOPE_SHIFT | key``,
where ``scopes`` numbers each (tenant, agent) once and the key is the content row's.
A doclist is sorted by rowid, so one scope's entries sit together, and FTS5 seeks
straight to a ``rowid BETWEEN`` range: ranking (and ``_rare_terms``' counts) cover the
caller's rows only. BM25's IDF still counts the whole table, as before.

The full-text tables read their content through views that compute these rowids
(only ``rebuild`` reads them); triggers, and ``append_events`` for events, write them.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from loci.models import Scope

#: Bits of the content key in a full-text rowid (keys up to ~10^12); the scope number
#: takes the 23 bits above them (8,388,607 scopes; ``scopes`` refuses more).
SCOPE_SHIFT = 40
KEY_MASK = (1 << SCOPE_SHIFT) - 1
MAX_SCOPES = (1 << (63 - SCOPE_SHIFT)) - 1


@dataclass(frozen=True)
class FullText:
    """One content table's full-text index: its key and indexed columns."""

    table: str
    key: str
    columns: tuple[str, ...]
    #: ``bm25`` weights as configured ``rank`` (None: FTS5's default).
    rank: str | None = None
    #: Rows are indexed by a trigger (else the code indexes each batch in one statement).
    insert_trigger: bool = True


#: Migration 9 is built from these: a change here needs a migration of its own that
#: rebuilds the tables it touches.
FULL_TEXT = (
    FullText("events", "id", ("content", "search_extra", "search_context"),
             rank="bm25(1.0, 1.0, 0.3)", insert_trigger=False),
    FullText("memories", "rowid", ("content", "tags")),
    FullText("documents", "rowid", ("path", "content")),
)


def scope_base(db: sqlite3.Connection, scope: Scope) -> int:
    """The lowest full-text rowid of ``scope``, numbering the scope if it is new (call
    inside the write transaction that indexes its rows)."""
    db.execute("INSERT OR IGNORE INTO scopes (tenant, agent) VALUES (?, ?)",
               (scope.tenant, scope.agent))
    number = db.execute("SELECT no FROM scopes WHERE tenant = ? AND agent = ?",
                        (scope.tenant, scope.agent)).fetchone()[0]
    return int(number) << SCOPE_SHIFT


def _rowid(row: str, key: str) -> str:
    """SQL for the full-text rowid of trigger row ``row`` (``new`` or ``old``)."""
    return (f"(((SELECT no FROM scopes WHERE tenant = {row}.tenant AND agent = {row}.agent)"
            f" << {SCOPE_SHIFT}) | {row}.{key})")


def partition_sql(tokenizer: str) -> str:
    """The migration to scoped full-text rowids: number the scopes, rebuild every
    full-text table over a view (merged into one segment, as searches read every
    segment), and recreate its triggers."""
    script = [f"""
        CREATE TABLE scopes (
            no INTEGER PRIMARY KEY CHECK (no BETWEEN 1 AND {MAX_SCOPES}),
            tenant TEXT NOT NULL, agent TEXT NOT NULL, UNIQUE (tenant, agent));
        INSERT OR IGNORE INTO scopes (tenant, agent)
            SELECT tenant, agent FROM events UNION SELECT tenant, agent FROM memories
            UNION SELECT tenant, agent FROM documents ORDER BY 1, 2;"""]
    for ft in FULL_TEXT:
        script.append(_table_sql(ft, tokenizer))
    return "\n".join(script)


def _table_sql(ft: FullText, tokenizer: str) -> str:
    t, fts, cols = ft.table, f"{ft.table}_fts", ", ".join(ft.columns)
    new = ", ".join(f"new.{c}" for c in ft.columns)
    old = ", ".join(f"old.{c}" for c in ft.columns)
    delete = (f"INSERT INTO {fts} ({fts}, rowid, {cols}) "
              f"VALUES ('delete', {_rowid('old', ft.key)}, {old});")
    insert = f"INSERT INTO {fts} (rowid, {cols}) VALUES ({_rowid('new', ft.key)}, {new});"
    numbered = ("INSERT OR IGNORE INTO scopes (tenant, agent) "
                "VALUES (new.tenant, new.agent);")
    sql = f"""
        DROP TRIGGER IF EXISTS {t}_ai; DROP TRIGGER IF EXISTS {t}_ad;
        DROP TRIGGER IF EXISTS {t}_au; DROP TABLE {fts};
        CREATE VIEW {fts}_rows AS
            SELECT (s.no << {SCOPE_SHIFT}) | x.{ft.key} AS fts_rowid,
                   {", ".join(f"x.{c}" for c in ft.columns)}
            FROM {t} x JOIN scopes s ON s.tenant = x.tenant AND s.agent = x.agent;
        CREATE VIRTUAL TABLE {fts} USING fts5(
            {cols}, content='{fts}_rows', content_rowid='fts_rowid', tokenize='{tokenizer}');
        INSERT INTO {fts} ({fts}) VALUES ('rebuild');
        INSERT INTO {fts} ({fts}) VALUES ('optimize');
        CREATE TRIGGER {t}_ad AFTER DELETE ON {t} BEGIN {delete} END;
        CREATE TRIGGER {t}_au AFTER UPDATE OF {cols} ON {t} BEGIN {delete} {insert} END;"""
    if ft.rank:
        sql += f"\n        INSERT INTO {fts} ({fts}, rank) VALUES ('rank', '{ft.rank}');"
    if ft.insert_trigger:
        sql += (f"\n        CREATE TRIGGER {t}_ai AFTER INSERT ON {t} BEGIN {numbered} "
                f"{insert} END;")
    return sql
