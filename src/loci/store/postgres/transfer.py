"""Whole-scope export and import in the PostgreSQL backend (``loci migrate``): the
shared ``store.transfer`` in PostgreSQL's dialect, plus its vectors and sequences."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from loci.errors import ValidationError
from loci.models import ApiKey, Scope
from loci.store import transfer
from loci.store.base import Renumber, ScopeData, Vectors
from loci.store.postgres.base import PostgresBase
from loci.store.postgres.rows import (
    COMPACTION_COLUMNS,
    DOCUMENT_COLUMNS,
    EVENT_COLUMNS,
    KINDS,
    MEMORY_COLUMNS,
    check_text,
    json_value,
    path_to_ltree,
)

DIALECT = transfer.Dialect(
    mark="%s", events=EVENT_COLUMNS, memories=MEMORY_COLUMNS, documents=DOCUMENT_COLUMNS,
    compactions=COMPACTION_COLUMNS, seq="seq",
    read_tags=lambda column: f"loci_words({column})",
    read_json=lambda column: f"{column}::text",
    bytewise=lambda column: f'{column} COLLATE "C"',
    tags=list, json=json_value, json_cast="::jsonb", check=check_text,
    document_key=("lpath", "::ltree", path_to_ltree),
)


class PostgresTransfer(PostgresBase):
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
            f"SELECT {k.key}, embedding FROM {k.table} WHERE tenant = %s AND agent = %s "
            f"AND embedding IS NOT NULL ORDER BY {k.order}", (scope.tenant, scope.agent))
        if not rows:
            return [], np.zeros((0, 0), np.float32)
        vectors = np.stack([np.asarray(r[1].to_numpy(), np.float32) for r in rows])
        return [str(r[0]) for r in rows], vectors

    def import_scopes(self, scopes: Sequence[ScopeData],
                      renumber: Renumber | None = None) -> None:
        """Import ``scopes`` in one transaction (``transfer.placed`` gives their rows
        fresh ids where theirs are taken); their vectors after it."""
        with self._write() as cur:
            # No insert may take an id between the check for free ids and the import:
            # appends wait (reads go on) until it commits.
            cur.execute(f"LOCK TABLE {', '.join(transfer.NUMBERED)} IN SHARE ROW EXCLUSIVE MODE")

            def query(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
                return cur.execute(sql, params).fetchall()

            scopes = transfer.placed(query, DIALECT, scopes, renumber)
            try:
                for data in scopes:
                    transfer.import_events(cur, DIALECT, data.scope, data.events)
                    transfer.import_rows(cur, DIALECT, data)
            except psycopg.IntegrityError as exc:
                # Rows that clash with each other or the store's (a memory id held twice)
                raise ValidationError(f"the imported rows do not fit this store: {exc}"
                                      ) from exc
            # Ids were given explicitly: move the sequences past them.
            for table in transfer.NUMBERED:
                cur.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"GREATEST((SELECT MAX(id) FROM {table}), 1))")
        for data in scopes:
            self.set_vectors_of(data)
