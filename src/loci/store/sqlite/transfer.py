"""Whole-scope export and import in the SQLite backend (``loci migrate``): the shared
``store.transfer`` in SQLite's dialect, plus its vectors and full-text rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np

from loci.errors import ValidationError
from loci.models import ApiKey, Scope
from loci.store import transfer
from loci.store.base import Renumber, ScopeData, Vectors
from loci.store.codec import dump_json, dump_tags
from loci.store.sqlite.base import SQLiteBase
from loci.store.sqlite.rows import (
    COMPACTION_COLUMNS,
    DOCUMENT_COLUMNS,
    EVENT_COLUMNS,
    KEY_MASK,
    KINDS,
    MEMORY_COLUMNS,
    index_events,
)

DIALECT = transfer.Dialect(
    mark="?", events=EVENT_COLUMNS, memories=MEMORY_COLUMNS, documents=DOCUMENT_COLUMNS,
    compactions=COMPACTION_COLUMNS, seq="rowid", read_tags=str, read_json=str,
    bytewise=str,  # SQLite compares text byte by byte already
    tags=dump_tags, json=dump_json,
    max_id=KEY_MASK,  # an event's full-text rowid holds its id in these bits
)


class SQLiteTransfer(SQLiteBase):
    """Scopes, meta and keys listed; scopes exported and imported whole."""

    def list_scopes(self) -> list[Scope]:
        return transfer.list_scopes(self._query, DIALECT)

    def list_meta(self) -> dict[str, str]:
        return transfer.list_meta(self._query)

    def export_api_keys(self) -> list[tuple[ApiKey, str]]:
        return transfer.export_api_keys(self._query, DIALECT)

    def export_scope(self, scope: Scope) -> ScopeData:
        vectors = {kind: self._export_vectors(kind, scope) for kind in KINDS}
        return transfer.export_scope(self._query, DIALECT, scope, vectors)

    def _export_vectors(self, kind: str, scope: Scope) -> tuple[list[str], Vectors]:
        k = KINDS[kind]
        rows = self._query(
            f"SELECT {k.public}, embedding FROM {k.table} WHERE tenant = ? AND agent = ? "
            f"AND embedding IS NOT NULL AND length(embedding) > 0 ORDER BY {k.key}",
            (scope.tenant, scope.agent))
        if not rows:
            return [], np.zeros((0, 0), np.float32)
        vectors = np.stack([np.frombuffer(r[1], np.float32) for r in rows])
        return [str(r[0]) for r in rows], vectors

    def import_scopes(self, scopes: Sequence[ScopeData],
                      renumber: Renumber | None = None) -> None:
        """Import ``scopes`` in one transaction (``transfer.placed`` gives their rows
        fresh ids where theirs are taken); their vectors after it."""
        with self._write() as db:
            scopes = transfer.placed(lambda sql, params: db.execute(sql, params).fetchall(),
                                     DIALECT, scopes, renumber)
            try:
                for data in scopes:
                    scope = data.scope
                    transfer.import_events(db, DIALECT, scope, data.events)
                    index_events(db, scope, "e.tenant = ? AND e.agent = ?",
                                 (scope.tenant, scope.agent))
                    transfer.import_rows(db, DIALECT, data)
            except (sqlite3.IntegrityError, OverflowError) as exc:
                # Rows that clash with each other or the store's (a memory id held twice)
                raise ValidationError(f"the imported rows do not fit this store: {exc}"
                                      ) from exc
        for data in scopes:
            self.set_vectors_of(data)
