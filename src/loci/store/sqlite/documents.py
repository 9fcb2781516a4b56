"""Knowledge documents in the SQLite backend: paths, versions and search."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from loci.models import Document, DocumentVersion, Scope
from loci.store.codec import dump_json, dump_tags, from_micros, load_json, load_tags, to_micros
from loci.store.rows import check_unchanged, in_order, to_document
from loci.store.sqlite.base import SQLiteBase
from loci.store.sqlite.rows import DOCUMENT_COLUMNS


def upsert_document(db: sqlite3.Connection, scope: Scope, document: Document,
                    expected_sha256: str | None = None) -> Document:
    """Insert, or keep the stored version in ``document_versions`` and replace it
    with the next version number; identical content, tags and metadata: no-op. With
    ``expected_sha256``, the stored content must be the one the writer saw."""
    key = (scope.tenant, scope.agent, document.path)
    tags, metadata = dump_tags(document.tags), dump_json(document.metadata)
    old = db.execute(
        "SELECT version, content, tags, metadata, created, updated FROM documents "
        "WHERE tenant = ? AND agent = ? AND path = ?", key).fetchone()
    check_unchanged(document.path, old[1] if old else None, expected_sha256)
    if old is None:
        db.execute(
            "INSERT INTO documents (tenant, agent, path, content, tags, version, "
            "created, updated, metadata) VALUES (?,?,?,?,?,?,?,?,?)",
            (*key, document.content, tags, document.version,
             to_micros(document.created_at), to_micros(document.updated_at), metadata),
        )
        return document
    if (old[1], old[2], old[3]) == (document.content, tags, metadata):
        return replace(document, version=old[0], created_at=from_micros(old[4]),
                       updated_at=from_micros(old[5]))
    db.execute(
        "INSERT OR REPLACE INTO document_versions (tenant, agent, path, version, content, "
        "tags, created, updated, metadata, superseded) SELECT tenant, agent, path, "
        "version, content, tags, created, updated, metadata, ? FROM documents "
        "WHERE tenant = ? AND agent = ? AND path = ?",
        (to_micros(document.updated_at), *key),
    )
    version = max(document.version, old[0] + 1)
    db.execute(
        "UPDATE documents SET embedding = CASE WHEN content = ? THEN embedding END, "
        "content = ?, tags = ?, version = ?, updated = ?, metadata = ? "
        "WHERE tenant = ? AND agent = ? AND path = ?",
        (document.content, document.content, tags, version,
         to_micros(document.updated_at), metadata, *key),
    )
    return replace(document, version=version, created_at=from_micros(old[4]))


class SQLiteDocuments(SQLiteBase):
    """Mixed into :class:`SQLiteStore`."""

    def put_document(self, scope: Scope, document: Document) -> Document:
        return self.put_documents(scope, [document])[0]

    def put_documents(self, scope: Scope, documents: Sequence[Document],
                      expected: Mapping[str, str] | None = None) -> list[Document]:
        expected = expected or {}
        with self._write() as db:
            return [upsert_document(db, scope, d, expected.get(d.path)) for d in documents]

    def get_document(self, scope: Scope, path: str) -> Document | None:
        rows = self._query(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents "
            "WHERE tenant = ? AND agent = ? AND path = ?",
            (scope.tenant, scope.agent, path),
        )
        return to_document(rows[0]) if rows else None

    def get_documents(self, scope: Scope, paths: Sequence[str]) -> list[Document]:
        if not paths:
            return []
        rows = self._query(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE tenant = ? AND agent = ? "
            f"AND path IN ({', '.join('?' * len(paths))})",
            (scope.tenant, scope.agent, *paths),
        )
        return in_order(paths, [to_document(r) for r in rows])

    def list_documents(self, scope: Scope, prefix: str = "/") -> list[Document]:
        rows = self._query(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE tenant = ? AND agent = ? "
            "AND substr(path, 1, ?) = ? ORDER BY path",
            (scope.tenant, scope.agent, len(prefix), prefix),
        )
        return [to_document(r) for r in rows]

    def delete_document(self, scope: Scope, path: str) -> bool:
        with self._write() as db:
            cursor = db.execute(
                "DELETE FROM documents WHERE tenant = ? AND agent = ? AND path = ?",
                (scope.tenant, scope.agent, path),
            )
            db.execute("DELETE FROM document_versions WHERE tenant = ? AND agent = ? "
                       "AND path = ?", (scope.tenant, scope.agent, path))
            if cursor.rowcount:
                self._mark_for_scrub(db, ["documents"], scope, ["document"])
        if cursor.rowcount:
            self.finish_erasure()
        return cursor.rowcount > 0

    def redact_document_version(self, scope: Scope, path: str, version: int,
                                metadata: Mapping[str, Any]) -> bool:
        with self._write() as db:
            changed = db.execute(
                "UPDATE document_versions SET content = '', tags = '', metadata = ? "
                "WHERE tenant = ? AND agent = ? AND path = ? AND version = ?",
                (dump_json(dict(metadata)), scope.tenant, scope.agent, path, version),
            ).rowcount
            # The version's words may still be in the full-text segments (from when it
            # was current) and its pages in the journal.
            self._mark_for_scrub(db, ["documents"])
        self.finish_erasure()
        return changed > 0

    def document_history(self, scope: Scope, path: str) -> list[DocumentVersion]:
        rows = self._query(
            "SELECT path, version, content, tags, created, updated, superseded, metadata "
            "FROM document_versions WHERE tenant = ? AND agent = ? AND path = ? "
            "ORDER BY version",
            (scope.tenant, scope.agent, path),
        )
        return [
            DocumentVersion(
                path=r[0], version=r[1], content=r[2], tags=load_tags(r[3]),
                created_at=from_micros(r[4]), updated_at=from_micros(r[5]),
                superseded_at=from_micros(r[6]), metadata=load_json(r[7]) or {},
            )
            for r in rows
        ]
