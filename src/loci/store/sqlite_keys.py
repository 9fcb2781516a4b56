"""Server API keys in the SQLite backend."""

from __future__ import annotations

from typing import Any

from loci.models import ApiKey
from loci.store.codec import from_micros, to_micros
from loci.store.sqlite_base import SQLiteBase

_COLUMNS = "id, tenant, label, created, revoked"


def _to_key(row: tuple[Any, ...]) -> ApiKey:
    return ApiKey(row[0], row[1], row[2], from_micros(row[3]), bool(row[4]))


class SQLiteKeys(SQLiteBase):
    """Mixed into :class:`SQLiteStore`."""

    def add_api_key(self, key: ApiKey, secret_hash: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO api_keys (id, secret_hash, tenant, label, created, revoked) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (key.id, secret_hash, key.tenant, key.label, to_micros(key.created_at),
                 int(key.revoked)),
            )

    def find_api_key(self, secret_hash: str) -> ApiKey | None:
        rows = self._query(
            f"SELECT {_COLUMNS} FROM api_keys WHERE secret_hash = ? AND revoked = 0",
            (secret_hash,),
        )
        return _to_key(rows[0]) if rows else None

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKey]:
        where, params = ("WHERE tenant = ? ", (tenant,)) if tenant is not None else ("", ())
        rows = self._query(f"SELECT {_COLUMNS} FROM api_keys {where}ORDER BY created, id", params)
        return [_to_key(r) for r in rows]

    def revoke_api_key(self, key_id: str) -> bool:
        with self._write() as db:
            return db.execute(
                "UPDATE api_keys SET revoked = 1 WHERE id = ? AND revoked = 0", (key_id,)
            ).rowcount > 0
