"""Small records of the SQLite backend: key/value state, server API keys and the usage
ledger (``store.usage``)."""

from __future__ import annotations

from datetime import datetime

from loci.models import ApiKey, NewUsage, Scope, StateItem, UsageRecord
from loci.store import usage
from loci.store.codec import to_micros
from loci.store.rows import API_KEY_COLUMNS, to_api_key, to_state
from loci.store.sqlite.base import SQLiteBase


class SQLiteRecords(SQLiteBase):
    """State, API keys and usage."""

    def add_usage(self, scope: Scope, call: NewUsage) -> UsageRecord:
        sql, params = usage.insert("?", scope, call)
        with self._write() as db:
            row = db.execute(sql, params).fetchone()
        return usage.inserted(scope, call, row)

    def list_usage(self, tenant: str, agent: str | None = None, session: str | None = None,
                   since: datetime | None = None, until: datetime | None = None,
                   ) -> list[UsageRecord]:
        return usage.select(self._query, "?", tenant, agent, session, since, until)

    def set_state(self, scope: Scope, key: str, value: str, now: datetime) -> StateItem:
        with self._write() as db:
            db.execute(
                "INSERT INTO state (tenant, agent, key, value, updated) VALUES (?,?,?,?,?) "
                "ON CONFLICT (tenant, agent, key) DO UPDATE SET value = excluded.value, "
                "updated = excluded.updated",
                (scope.tenant, scope.agent, key, value, to_micros(now)),
            )
        return StateItem(key=key, value=value, updated_at=now)

    def get_state(self, scope: Scope, key: str) -> StateItem | None:
        rows = self._query(
            "SELECT key, value, updated FROM state WHERE tenant = ? AND agent = ? AND key = ?",
            (scope.tenant, scope.agent, key),
        )
        return to_state(rows[0]) if rows else None

    def list_state(self, scope: Scope) -> list[StateItem]:
        rows = self._query(
            "SELECT key, value, updated FROM state WHERE tenant = ? AND agent = ? ORDER BY key",
            (scope.tenant, scope.agent),
        )
        return [to_state(r) for r in rows]

    def delete_state(self, scope: Scope, key: str) -> bool:
        with self._write() as db:
            cursor = db.execute(
                "DELETE FROM state WHERE tenant = ? AND agent = ? AND key = ?",
                (scope.tenant, scope.agent, key),
            )
            return cursor.rowcount > 0

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
            f"SELECT {API_KEY_COLUMNS} FROM api_keys WHERE secret_hash = ? AND revoked = 0",
            (secret_hash,),
        )
        return to_api_key(rows[0]) if rows else None

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKey]:
        where, params = ("WHERE tenant = ? ", (tenant,)) if tenant is not None else ("", ())
        rows = self._query(
            f"SELECT {API_KEY_COLUMNS} FROM api_keys {where}ORDER BY created, id", params)
        return [to_api_key(r) for r in rows]

    def revoke_api_key(self, key_id: str) -> bool:
        with self._write() as db:
            return db.execute(
                "UPDATE api_keys SET revoked = 1 WHERE id = ? AND revoked = 0", (key_id,)
            ).rowcount > 0
