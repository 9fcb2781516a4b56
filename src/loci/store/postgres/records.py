"""Small records of the PostgreSQL backend: key/value state, API keys and the usage
ledger (``store.usage``)."""

from __future__ import annotations

from datetime import datetime

from loci.models import ApiKey, NewUsage, Scope, StateItem, UsageRecord
from loci.store import usage
from loci.store.codec import to_micros
from loci.store.postgres.base import PostgresBase
from loci.store.postgres.rows import check_text
from loci.store.rows import API_KEY_COLUMNS, to_api_key, to_state


class PostgresRecords(PostgresBase):
    """State, API keys and usage."""

    # -- usage --------------------------------------------------------------------
    def add_usage(self, scope: Scope, call: NewUsage) -> UsageRecord:
        check_text(call.session, call.model, call.face, call.prefix_hash)
        sql, params = usage.insert("%s", scope, call)
        with self._write() as cur:
            cur.execute(sql, params)
            row = cur.fetchone()
        assert row is not None
        return usage.inserted(scope, call, row)

    def list_usage(self, tenant: str, agent: str | None = None, session: str | None = None,
                   since: datetime | None = None, until: datetime | None = None,
                   ) -> list[UsageRecord]:
        return usage.select(self._query, "%s", tenant, agent, session, since, until)

    # -- state --------------------------------------------------------------------
    def set_state(self, scope: Scope, key: str, value: str, now: datetime) -> StateItem:
        check_text(key, value)
        with self._write() as cur:
            cur.execute(
                "INSERT INTO state (tenant, agent, key, value, updated) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant, agent, key) "
                "DO UPDATE SET value = excluded.value, updated = excluded.updated",
                (scope.tenant, scope.agent, key, value, to_micros(now)),
            )
        return StateItem(key=key, value=value, updated_at=now)

    def get_state(self, scope: Scope, key: str) -> StateItem | None:
        rows = self._query(
            "SELECT key, value, updated FROM state WHERE tenant = %s AND agent = %s "
            "AND key = %s", (scope.tenant, scope.agent, key))
        return to_state(rows[0]) if rows else None

    def list_state(self, scope: Scope) -> list[StateItem]:
        rows = self._query(
            "SELECT key, value, updated FROM state WHERE tenant = %s AND agent = %s "
            "ORDER BY key COLLATE \"C\"", (scope.tenant, scope.agent))
        return [to_state(r) for r in rows]

    def delete_state(self, scope: Scope, key: str) -> bool:
        with self._write() as cur:
            cur.execute("DELETE FROM state WHERE tenant = %s AND agent = %s AND key = %s",
                        (scope.tenant, scope.agent, key))
            return cur.rowcount > 0

    # -- API keys -----------------------------------------------------------------
    def add_api_key(self, key: ApiKey, secret_hash: str) -> None:
        check_text(key.id, key.tenant, key.label, secret_hash)
        with self._write() as cur:
            cur.execute(
                "INSERT INTO api_keys (id, secret_hash, tenant, label, created, revoked) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (key.id, secret_hash, key.tenant, key.label, to_micros(key.created_at),
                 key.revoked),
            )

    def find_api_key(self, secret_hash: str) -> ApiKey | None:
        rows = self._query(
            f"SELECT {API_KEY_COLUMNS} FROM api_keys WHERE secret_hash = %s AND NOT revoked",
            (secret_hash,))
        return to_api_key(rows[0]) if rows else None

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKey]:
        rows = self._query(
            f"SELECT {API_KEY_COLUMNS} FROM api_keys WHERE (%s::text IS NULL OR tenant = %s) "
            "ORDER BY created, id COLLATE \"C\"", (tenant, tenant))
        return [to_api_key(r) for r in rows]

    def revoke_api_key(self, key_id: str) -> bool:
        with self._write() as cur:
            cur.execute("UPDATE api_keys SET revoked = true WHERE id = %s AND NOT revoked",
                        (key_id,))
            return cur.rowcount > 0
