"""Knowledge documents in the PostgreSQL backend: paths (text and ltree), versions and
search."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from loci.errors import ConflictError
from loci.models import Document, DocumentVersion, Scope
from loci.store.codec import from_micros, to_micros
from loci.store.postgres.base import Cursor, PostgresBase
from loci.store.postgres.rows import (
    DOCUMENT_COLUMNS,
    check_text,
    json_value,
    path_to_ltree,
    prefix_filter,
)
from loci.store.rows import check_unchanged, in_order, to_document, to_document_version


def upsert_document(cur: Cursor, scope: Scope, document: Document,
                    expected_sha256: str | None = None) -> Document:
    """Insert, or keep the stored version in ``document_versions`` and replace it
    with the next version number; identical content, tags and metadata: no-op. With
    ``expected_sha256``, the stored content must be the one the writer saw."""
    key = (scope.tenant, scope.agent, document.path)
    tags, metadata = list(document.tags), json_value(document.metadata)
    if expected_sha256:  # the writer saw a version: it must still be there
        cur.execute("SELECT content FROM documents WHERE tenant = %s AND agent = %s "
                    "AND path = %s FOR UPDATE", key)
        row = cur.fetchone()
        check_unchanged(document.path, row[0] if row else None, expected_sha256)
    # Insert-if-absent first: of two processes creating one path, one inserts and the
    # other falls through to the locked read below (no unique-violation error).
    cur.execute(
        "INSERT INTO documents (tenant, agent, path, lpath, content, tags, version, "
        "created, updated, metadata) VALUES (%s, %s, %s, %s::ltree, %s, %s, %s, %s, %s, "
        "%s::jsonb) ON CONFLICT (tenant, agent, path) DO NOTHING",
        (*key, path_to_ltree(document.path), document.content, tags, document.version,
         to_micros(document.created_at), to_micros(document.updated_at), metadata),
    )
    if cur.rowcount:
        return document
    if expected_sha256 == "":  # the writer saw no document, and there is one
        raise ConflictError(f"{document.path} changed since it was read (it exists "
                            "now): read it again and retry")
    cur.execute(
        "SELECT version, content, tags, metadata = %s::jsonb OR (metadata IS NULL AND "
        "%s::jsonb IS NULL), created, updated FROM documents WHERE tenant = %s "
        "AND agent = %s AND path = %s FOR UPDATE", (metadata, metadata, *key))
    old = cur.fetchone()
    assert old is not None
    if (old[1], list(old[2]), bool(old[3])) == (document.content, tags, True):
        return replace(document, version=old[0], created_at=from_micros(old[4]),
                       updated_at=from_micros(old[5]))
    cur.execute(
        "INSERT INTO document_versions (tenant, agent, path, version, content, tags, "
        "created, updated, metadata, superseded) SELECT tenant, agent, path, version, "
        "content, tags, created, updated, metadata, %s FROM documents "
        "WHERE tenant = %s AND agent = %s AND path = %s "
        "ON CONFLICT (tenant, agent, path, version) DO UPDATE SET "
        "content = excluded.content, tags = excluded.tags, created = excluded.created, "
        "updated = excluded.updated, metadata = excluded.metadata, "
        "superseded = excluded.superseded",
        (to_micros(document.updated_at), *key),
    )
    version = max(document.version, old[0] + 1)
    cur.execute(
        "UPDATE documents SET embedding = CASE WHEN content = %s THEN embedding END, "
        "content = %s, tags = %s, version = %s, updated = %s, metadata = %s::jsonb "
        "WHERE tenant = %s AND agent = %s AND path = %s",
        (document.content, document.content, tags, version,
         to_micros(document.updated_at), metadata, *key),
    )
    return replace(document, version=version, created_at=from_micros(old[4]))


class PostgresDocuments(PostgresBase):
    """Mixed into :class:`PostgresStore`."""

    def put_document(self, scope: Scope, document: Document) -> Document:
        return self.put_documents(scope, [document])[0]

    def put_documents(self, scope: Scope, documents: Sequence[Document],
                      expected: Mapping[str, str] | None = None) -> list[Document]:
        for d in documents:
            check_text(d.path, d.content, *d.tags)
        expected = expected or {}
        with self._write() as cur:
            written = [upsert_document(cur, scope, d, expected.get(d.path)) for d in documents]
        self._grew("documents", len(written))
        return written

    def get_document(self, scope: Scope, path: str) -> Document | None:
        rows = self._query(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents "
            "WHERE tenant = %s AND agent = %s AND path = %s",
            (scope.tenant, scope.agent, path),
        )
        return to_document(rows[0]) if rows else None

    def get_documents(self, scope: Scope, paths: Sequence[str]) -> list[Document]:
        if not paths:
            return []
        rows = self._query(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents "
            "WHERE tenant = %s AND agent = %s AND path = ANY(%s)",
            (scope.tenant, scope.agent, list(paths)),
        )
        return in_order(paths, [to_document(r) for r in rows])

    def list_documents(self, scope: Scope, prefix: str = "/") -> list[Document]:
        where, params = prefix_filter("d", prefix)
        rows = self._query(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE tenant = %s AND agent = %s"
            f"{where} ORDER BY path COLLATE \"C\"",
            (scope.tenant, scope.agent, *params),
        )
        return [to_document(r) for r in rows]

    def delete_document(self, scope: Scope, path: str) -> bool:
        key = (scope.tenant, scope.agent, path)
        with self._write() as cur:
            cur.execute("DELETE FROM documents WHERE tenant = %s AND agent = %s "
                        "AND path = %s", key)
            deleted = cur.rowcount > 0
            cur.execute("DELETE FROM document_versions WHERE tenant = %s AND agent = %s "
                        "AND path = %s", key)
            return deleted

    def redact_document_version(self, scope: Scope, path: str, version: int,
                                metadata: Mapping[str, Any]) -> bool:
        with self._write() as cur:
            cur.execute(
                "UPDATE document_versions SET content = '', tags = '{}', metadata = %s::jsonb "
                "WHERE tenant = %s AND agent = %s AND path = %s AND version = %s",
                (json_value(dict(metadata)), scope.tenant, scope.agent, path, version))
            return cur.rowcount > 0

    def document_history(self, scope: Scope, path: str) -> list[DocumentVersion]:
        rows = self._query(
            "SELECT path, version, content, loci_words(tags), created, updated, superseded, "
            "metadata::text FROM document_versions WHERE tenant = %s AND agent = %s "
            "AND path = %s ORDER BY version",
            (scope.tenant, scope.agent, path),
        )
        return [to_document_version(r) for r in rows]
