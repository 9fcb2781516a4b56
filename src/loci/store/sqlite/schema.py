"""SQLite schema migrations: numbered functions, each recorded in ``migrations``.

A migration runs inside the caller's transaction; append new ones at the end and never
edit one that has shipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from loci.search import conversation
from loci.store import usage
from loci.store.codec import load_json
from loci.store.sqlite.rows import FULL_TEXT, MAX_SCOPES, SCOPE_SHIFT, SPEAKER, FullText

FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"


def run_script(db: sqlite3.Connection, script: str) -> None:
    """Execute a multi-statement script inside the current transaction.

    ``executescript`` would commit the open transaction first; splitting on complete
    statements (which keeps trigger bodies whole) keeps the migration atomic.
    """
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                db.execute(pending)
            pending = ""


def _v1_initial(db: sqlite3.Connection) -> None:
    run_script(
        db,
        f"""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

        CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant TEXT NOT NULL, agent TEXT NOT NULL, session TEXT NOT NULL,
            type TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,
            ts INTEGER NOT NULL, tokens INTEGER NOT NULL,
            tool_name TEXT, tool_call_id TEXT, args TEXT, metadata TEXT,
            archived INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX events_by_session ON events (tenant, agent, session, id);
        CREATE VIRTUAL TABLE events_fts USING fts5(
            content, content='events', content_rowid='id', tokenize='{FTS_TOKENIZER}');
        -- No insert trigger: append_events indexes each batch with one statement,
        -- about five times faster than a per-row trigger.
        CREATE TRIGGER events_ad AFTER DELETE ON events BEGIN
            INSERT INTO events_fts (events_fts, rowid, content)
            VALUES ('delete', old.id, old.content);
        END;
        CREATE TRIGGER events_au AFTER UPDATE OF content ON events BEGIN
            INSERT INTO events_fts (events_fts, rowid, content)
            VALUES ('delete', old.id, old.content);
            INSERT INTO events_fts (rowid, content) VALUES (new.id, new.content);
        END;

        CREATE TABLE memories (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            tenant TEXT NOT NULL, agent TEXT NOT NULL,
            type TEXT NOT NULL, content TEXT NOT NULL, tags TEXT NOT NULL,
            created INTEGER NOT NULL, updated INTEGER NOT NULL, expires INTEGER,
            source TEXT, metadata TEXT
        );
        CREATE INDEX memories_by_scope ON memories (tenant, agent, updated);
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            content, tags, content='memories', content_rowid='rowid',
            tokenize='{FTS_TOKENIZER}');
        CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, content, tags)
            VALUES (new.rowid, new.content, new.tags);
        END;
        CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, content, tags)
            VALUES ('delete', old.rowid, old.content, old.tags);
        END;
        CREATE TRIGGER memories_au AFTER UPDATE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, content, tags)
            VALUES ('delete', old.rowid, old.content, old.tags);
            INSERT INTO memories_fts (rowid, content, tags)
            VALUES (new.rowid, new.content, new.tags);
        END;

        CREATE TABLE state (
            tenant TEXT NOT NULL, agent TEXT NOT NULL, key TEXT NOT NULL,
            value TEXT NOT NULL, updated INTEGER NOT NULL,
            PRIMARY KEY (tenant, agent, key)
        );

        CREATE TABLE documents (
            rowid INTEGER PRIMARY KEY,
            tenant TEXT NOT NULL, agent TEXT NOT NULL, path TEXT NOT NULL,
            content TEXT NOT NULL, tags TEXT NOT NULL, version INTEGER NOT NULL,
            created INTEGER NOT NULL, updated INTEGER NOT NULL, metadata TEXT,
            UNIQUE (tenant, agent, path)
        );
        CREATE VIRTUAL TABLE documents_fts USING fts5(
            path, content, content='documents', content_rowid='rowid',
            tokenize='{FTS_TOKENIZER}');
        CREATE TRIGGER documents_ai AFTER INSERT ON documents BEGIN
            INSERT INTO documents_fts (rowid, path, content)
            VALUES (new.rowid, new.path, new.content);
        END;
        CREATE TRIGGER documents_ad AFTER DELETE ON documents BEGIN
            INSERT INTO documents_fts (documents_fts, rowid, path, content)
            VALUES ('delete', old.rowid, old.path, old.content);
        END;
        CREATE TRIGGER documents_au AFTER UPDATE ON documents BEGIN
            INSERT INTO documents_fts (documents_fts, rowid, path, content)
            VALUES ('delete', old.rowid, old.path, old.content);
            INSERT INTO documents_fts (rowid, path, content)
            VALUES (new.rowid, new.path, new.content);
        END;

        CREATE TABLE compactions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant TEXT NOT NULL, agent TEXT NOT NULL, session TEXT NOT NULL,
            strategy TEXT NOT NULL, first_event_id INTEGER NOT NULL,
            last_event_id INTEGER NOT NULL, summary_event_id INTEGER,
            summary TEXT NOT NULL, tokens_before INTEGER NOT NULL,
            tokens_after INTEGER NOT NULL, created INTEGER NOT NULL
        );
        CREATE INDEX compactions_by_session ON compactions (tenant, agent, session, id);
        """
    )


#: Tables whose rows carry an embedding, and the column that holds their id.
VECTOR_TABLES = {"event": "events", "memory": "memories", "document": "documents"}


def _v2_embeddings(db: sqlite3.Connection) -> None:
    """Embeddings live in their rows: deleting a row deletes its vector. ``vec_seq``
    orders vector writes so that in-memory indexes refresh incrementally; NULL
    ``embedding`` means "not embedded yet" (an empty blob: nothing to embed)."""
    for table in VECTOR_TABLES.values():
        key = "id" if table == "events" else "rowid"
        run_script(
            db,
            f"""
            ALTER TABLE {table} ADD COLUMN embedding BLOB;
            ALTER TABLE {table} ADD COLUMN vec_seq INTEGER;
            CREATE INDEX {table}_unembedded ON {table} ({key}) WHERE embedding IS NULL;
            CREATE INDEX {table}_by_vec_seq ON {table} (tenant, agent, vec_seq)
                WHERE vec_seq IS NOT NULL;
            """,
        )
    # Writing an embedding must not re-index full-text: narrow the update triggers.
    run_script(
        db,
        """
        DROP TRIGGER memories_au;
        CREATE TRIGGER memories_au AFTER UPDATE OF content, tags ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, content, tags)
            VALUES ('delete', old.rowid, old.content, old.tags);
            INSERT INTO memories_fts (rowid, content, tags)
            VALUES (new.rowid, new.content, new.tags);
        END;
        DROP TRIGGER documents_au;
        CREATE TRIGGER documents_au AFTER UPDATE OF path, content ON documents BEGIN
            INSERT INTO documents_fts (documents_fts, rowid, path, content)
            VALUES ('delete', old.rowid, old.path, old.content);
            INSERT INTO documents_fts (rowid, path, content)
            VALUES (new.rowid, new.path, new.content);
        END;
        """,
    )


def _v3_memory_history(db: sqlite3.Connection) -> None:
    """Superseded versions of memories: updates never lose the old text."""
    run_script(
        db,
        """
        CREATE TABLE memory_versions (
            memory_id TEXT NOT NULL, tenant TEXT NOT NULL, agent TEXT NOT NULL,
            version INTEGER NOT NULL, type TEXT NOT NULL, content TEXT NOT NULL,
            tags TEXT NOT NULL, created INTEGER NOT NULL, updated INTEGER NOT NULL,
            expires INTEGER, source TEXT, superseded INTEGER NOT NULL, reason TEXT NOT NULL,
            PRIMARY KEY (memory_id, version)
        );
        CREATE INDEX memories_by_expiry ON memories (tenant, agent, expires)
            WHERE expires IS NOT NULL;
        """,
    )


def _v4_masking(db: sqlite3.Connection) -> None:
    """What history shows instead of an event's content (observation masking); the
    content itself is never changed, so search and export keep the original."""
    db.execute("ALTER TABLE events ADD COLUMN masked TEXT")


def _v5_hot_path_indexes(db: sqlite3.Connection) -> None:
    """Indexes for what every compile asks: sticky facts by type, a session's live token
    count (covering, so no row is read) and its latest summary."""
    run_script(
        db,
        """
        CREATE INDEX memories_by_type ON memories (tenant, agent, type, created);
        CREATE INDEX events_live_tokens ON events (tenant, agent, session, tokens)
            WHERE archived = 0;
        CREATE INDEX events_summaries ON events (tenant, agent, session, id)
            WHERE type = 'summary';
        """,
    )


def _v6_conversation_search(db: sqlite3.Connection) -> None:
    """Events are searched with more than their content (see ``search.conversation``):
    ``search_extra`` (speaker name, captions) and ``search_context`` (the preceding
    turns of the session), the context at 0.3 of the weight in BM25. Events written
    before this migration keep empty extra columns."""
    run_script(
        db,
        f"""
        ALTER TABLE events ADD COLUMN search_extra TEXT;
        ALTER TABLE events ADD COLUMN search_context TEXT;
        DROP TRIGGER events_ad;
        DROP TRIGGER events_au;
        DROP TABLE events_fts;
        CREATE VIRTUAL TABLE events_fts USING fts5(
            content, search_extra, search_context, content='events', content_rowid='id',
            tokenize='{FTS_TOKENIZER}');
        INSERT INTO events_fts (events_fts) VALUES ('rebuild');
        INSERT INTO events_fts (events_fts, rank) VALUES ('rank', 'bm25(1.0, 1.0, 0.3)');
        CREATE TRIGGER events_ad AFTER DELETE ON events BEGIN
            INSERT INTO events_fts (events_fts, rowid, content, search_extra, search_context)
            VALUES ('delete', old.id, old.content, old.search_extra, old.search_context);
        END;
        CREATE TRIGGER events_au AFTER UPDATE OF content, search_extra, search_context
        ON events BEGIN
            INSERT INTO events_fts (events_fts, rowid, content, search_extra, search_context)
            VALUES ('delete', old.id, old.content, old.search_extra, old.search_context);
            INSERT INTO events_fts (rowid, content, search_extra, search_context)
            VALUES (new.id, new.content, new.search_extra, new.search_context);
        END;
        """,
    )


def _v7_document_history(db: sqlite3.Connection) -> None:
    """Earlier versions of knowledge documents: a new version never loses the old text."""
    run_script(
        db,
        """
        CREATE TABLE document_versions (
            tenant TEXT NOT NULL, agent TEXT NOT NULL, path TEXT NOT NULL,
            version INTEGER NOT NULL, content TEXT NOT NULL, tags TEXT NOT NULL,
            created INTEGER NOT NULL, updated INTEGER NOT NULL, metadata TEXT,
            superseded INTEGER NOT NULL,
            PRIMARY KEY (tenant, agent, path, version)
        );
        """,
    )


def _v8_api_keys(db: sqlite3.Connection) -> None:
    """Server API keys: a secret's hash bound to one tenant."""
    run_script(
        db,
        """
        CREATE TABLE api_keys (
            id TEXT PRIMARY KEY, secret_hash TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL,
            label TEXT NOT NULL, created INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0
        );
        """,
    )


Migration = Callable[[sqlite3.Connection], None]

#: Version → (name, function). Append only.
def _v9_scoped_full_text(db: sqlite3.Connection) -> None:
    """Full-text rowids carry their scope, so that a keyword search ranks its own rows
    only (``store.sqlite.keywords``); every full-text index is rebuilt once."""
    run_script(db, partition_sql(FTS_TOKENIZER))


def _v10_tool_arguments(db: sqlite3.Connection) -> None:
    """Tool calls are searched with their name and arguments (``search.conversation``):
    the calls stored before get them in ``search_extra`` (the update trigger indexes)."""
    rows = db.execute(
        "SELECT id, metadata, tool_name, args FROM events WHERE type = 'tool_call'").fetchall()
    db.executemany("UPDATE events SET search_extra = ? WHERE id = ?", [
        (conversation.extra_text(load_json(meta), name, load_json(args)), key)
        for key, meta, name, args in rows])


def _v11_scope_statistics(db: sqlite3.Connection) -> None:
    """Keyword statistics per scope, so that BM25 in one scope never counts another
    tenant's rows (``store.sqlite.keywords``)."""
    run_script(db, statistics_sql())


def _v12_usage(db: sqlite3.Connection) -> None:
    """The usage ledger: one row per LLM call (``store.usage``)."""
    for statement in usage.create_sql("INTEGER PRIMARY KEY AUTOINCREMENT"):
        db.execute(statement)


def _v13_events_by_time(db: sqlite3.Connection) -> None:
    """Events by their time within a scope: a search that names a day reads that day's
    rows instead of the whole scope (``benchmarks/dated_search.py``)."""
    db.execute("CREATE INDEX events_by_time ON events (tenant, agent, ts)")


def _v14_events_by_speaker(db: sqlite3.Connection) -> None:
    """Events by who spoke them: the sessions of the people a question names
    (``retriever``), without reading the scope."""
    db.execute(f"CREATE INDEX events_by_speaker ON events (tenant, agent, {SPEAKER}, session) "
               f"WHERE {SPEAKER} IS NOT NULL")


def _v15_memory_time(db: sqlite3.Connection) -> None:
    """When a memory was last stated again, and the newer fact that superseded it
    (``memory.service``). Older rows keep NULL: never confirmed since saved, never
    superseded."""
    db.execute("ALTER TABLE memories ADD COLUMN confirmed INTEGER")
    db.execute("ALTER TABLE memories ADD COLUMN superseded_by TEXT")


MIGRATIONS: dict[int, tuple[str, Migration]] = {
    1: ("initial schema", _v1_initial),
    2: ("embeddings in rows", _v2_embeddings),
    3: ("memory history", _v3_memory_history),
    4: ("masked tool outputs", _v4_masking),
    5: ("hot path indexes", _v5_hot_path_indexes),
    6: ("conversation search context", _v6_conversation_search),
    7: ("document history", _v7_document_history),
    8: ("api keys", _v8_api_keys),
    9: ("scoped full-text rowids", _v9_scoped_full_text),
    10: ("tool-call arguments searchable", _v10_tool_arguments),
    11: ("keyword statistics per scope", _v11_scope_statistics),
    12: ("usage ledger", _v12_usage),
    13: ("events by time", _v13_events_by_time),
    14: ("events by speaker", _v14_events_by_speaker),
    15: ("memory confirmation and supersession", _v15_memory_time),
}


def migrate(db: sqlite3.Connection, applied_at: int) -> list[int]:
    """Apply pending migrations, each in its own transaction; returns those applied."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS migrations ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
    )
    done = {row[0] for row in db.execute("SELECT version FROM migrations")}
    applied = []
    for version in sorted(set(MIGRATIONS) - done):
        name, function = MIGRATIONS[version]
        db.execute("BEGIN IMMEDIATE")
        try:
            # Another process opening the store may have applied it meanwhile.
            if db.execute("SELECT 1 FROM migrations WHERE version = ?", (version,)
                          ).fetchone():
                db.execute("ROLLBACK")
                continue
            function(db)
            db.execute(
                "INSERT INTO migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, applied_at),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        applied.append(version)
    return applied


def _scope_no(row: str) -> str:
    """SQL for the scope number of trigger row ``row`` (``new`` or ``old``)."""
    return f"(SELECT no FROM scopes WHERE tenant = {row}.tenant AND agent = {row}.agent)"


def _rowid(row: str, key: str) -> str:
    """SQL for the full-text rowid of trigger row ``row``."""
    return f"(({_scope_no(row)} << {SCOPE_SHIFT}) | {row}.{key})"


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


def _index_writes(ft: FullText) -> tuple[str, str]:
    """The statements that drop trigger row ``old`` from the index and add ``new``."""
    fts, cols = f"{ft.table}_fts", ", ".join(ft.columns)
    new = ", ".join(f"new.{c}" for c in ft.columns)
    old = ", ".join(f"old.{c}" for c in ft.columns)
    return (f"INSERT INTO {fts} ({fts}, rowid, {cols}) "
            f"VALUES ('delete', {_rowid('old', ft.key)}, {old});",
            f"INSERT INTO {fts} (rowid, {cols}) VALUES ({_rowid('new', ft.key)}, {new});")


_NUMBERED = "INSERT OR IGNORE INTO scopes (tenant, agent) VALUES (new.tenant, new.agent);"


def _table_sql(ft: FullText, tokenizer: str) -> str:
    t, fts, cols = ft.table, f"{ft.table}_fts", ", ".join(ft.columns)
    delete, insert = _index_writes(ft)
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
        sql += (f"\n        CREATE TRIGGER {t}_ai AFTER INSERT ON {t} BEGIN {_NUMBERED} "
                f"{insert} END;")
    return sql


def statistics_sql() -> str:
    """Migration 11: per-scope rows and tokens of each full-text table (``fts_stats``),
    counted once from FTS5's own ``docsize`` records and kept by the triggers that index
    rows (``events_ai`` does not exist: ``rows.index_events`` counts appended events).
    A row's tokens are read from its ``docsize`` after it is indexed and before it is
    dropped, through ``loci_tokens`` (``rows.tokens``, registered on the connection)."""
    script = ["""
        CREATE TABLE fts_stats (
            kind TEXT NOT NULL, scope INTEGER NOT NULL, docs INTEGER NOT NULL,
            tokens INTEGER NOT NULL, PRIMARY KEY (kind, scope)) WITHOUT ROWID;"""]
    for ft in FULL_TEXT:
        t, fts, cols = ft.table, f"{ft.table}_fts", ", ".join(ft.columns)
        delete, insert = _index_writes(ft)
        where = f"WHERE kind = '{t}' AND scope = {_scope_no('old')};"
        uncounted = (f"UPDATE fts_stats SET docs = docs - 1, "
                     f"tokens = tokens - {_size(ft, 'old')} ")
        script.append(f"""
        INSERT INTO fts_stats (kind, scope, docs, tokens)
            SELECT '{t}', id >> {SCOPE_SHIFT}, count(*), sum(loci_tokens(sz))
            FROM {fts}_docsize GROUP BY id >> {SCOPE_SHIFT};
        DROP TRIGGER {t}_ad; DROP TRIGGER {t}_au;
        CREATE TRIGGER {t}_ad AFTER DELETE ON {t} BEGIN {uncounted} {where} {delete} END;
        CREATE TRIGGER {t}_au AFTER UPDATE OF {cols} ON {t} BEGIN {uncounted} {where}
            {delete} {insert} {_counted(t, _size(ft, 'new'))} END;""")
        if ft.insert_trigger:
            script.append(f"""
        DROP TRIGGER {t}_ai;
        CREATE TRIGGER {t}_ai AFTER INSERT ON {t} BEGIN {_NUMBERED} {insert}
            {_counted(t, _size(ft, 'new'))} END;""")
    return "\n".join(script)


def _size(ft: FullText, row: str) -> str:
    """SQL for the tokens of trigger row ``row`` in its full-text index."""
    return (f"(SELECT loci_tokens(sz) FROM {ft.table}_fts_docsize "
            f"WHERE id = {_rowid(row, ft.key)})")


def _counted(table: str, size: str) -> str:
    """The statement that counts trigger row ``new`` of ``table`` in ``fts_stats``."""
    return (f"INSERT INTO fts_stats (kind, scope, docs, tokens) "
            f"VALUES ('{table}', {_scope_no('new')}, 1, {size}) ON CONFLICT (kind, scope) "
            "DO UPDATE SET docs = docs + 1, tokens = tokens + excluded.tokens;")
