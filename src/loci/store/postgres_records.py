"""Small records of the PostgreSQL backend: key/value state, compactions, API keys."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from loci.models import ApiKey, Compaction, Scope, StateItem
from loci.store.base import NewCompaction
from loci.store.codec import from_micros, to_micros
from loci.store.postgres_base import Cursor, PostgresBase
from loci.store.postgres_rows import COMPACTION_COLUMNS, check_text
from loci.store.rows import to_compaction, to_state

_KEY_COLUMNS = "id, tenant, label, created, revoked"


def to_key(row: tuple[Any, ...]) -> ApiKey:
    return ApiKey(row[0], row[1], row[2], from_micros(row[3]), bool(row[4]))


class PostgresRecords(PostgresBase):
    """Mixed into :class:`PostgresStore`."""

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

    # -- compactions --------------------------------------------------------------
    def add_compaction(self, scope: Scope, compaction: NewCompaction) -> Compaction:
        with self._write() as cur:
            return self._insert_compaction(cur, scope, compaction)

    @staticmethod
    def _insert_compaction(cur: Cursor, scope: Scope, c: NewCompaction) -> Compaction:
        check_text(c.session, c.strategy, c.summary)
        cur.execute(
            "INSERT INTO compactions (tenant, agent, session, strategy, first_event_id, "
            "last_event_id, summary_event_id, summary, tokens_before, tokens_after, created) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (scope.tenant, scope.agent, c.session, c.strategy, c.first_event_id,
             c.last_event_id, c.summary_event_id, c.summary, c.tokens_before,
             c.tokens_after, to_micros(c.created_at)),
        )
        row = cur.fetchone()
        assert row is not None
        return Compaction(
            id=int(row[0]), session=c.session, strategy=c.strategy,
            first_event_id=c.first_event_id, last_event_id=c.last_event_id,
            summary_event_id=c.summary_event_id, summary=c.summary,
            tokens_before=c.tokens_before, tokens_after=c.tokens_after,
            created_at=c.created_at,
        )

    def list_compactions(self, scope: Scope, session: str) -> list[Compaction]:
        rows = self._query(
            f"SELECT {COMPACTION_COLUMNS} FROM compactions "
            "WHERE tenant = %s AND agent = %s AND session = %s ORDER BY id",
            (scope.tenant, scope.agent, session),
        )
        return [to_compaction(r) for r in rows]

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
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE secret_hash = %s AND NOT revoked",
            (secret_hash,))
        return to_key(rows[0]) if rows else None

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKey]:
        rows = self._query(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE (%s::text IS NULL OR tenant = %s) "
            "ORDER BY created, id COLLATE \"C\"", (tenant, tenant))
        return [to_key(r) for r in rows]

    def revoke_api_key(self, key_id: str) -> bool:
        with self._write() as cur:
            cur.execute("UPDATE api_keys SET revoked = true WHERE id = %s AND NOT revoked",
                        (key_id,))
            return cur.rowcount > 0
