"""Erasure in the PostgreSQL backend: rows deleted with their postings (the triggers of
``keywords``) and their search statistics; vectors go with their rows, and this
process's vector indexes of the scope with them (other processes' keep the erased
vectors in memory, never returned, until they restart). Dead tuples stay in the table
files until PostgreSQL vacuums them, as for every delete."""

from __future__ import annotations

from loci.models import Scope
from loci.store.postgres.base import PostgresBase
from loci.store.postgres.rows import KINDS
from loci.store.transfer import SCOPED_TABLES, key_tables


class PostgresErasure(PostgresBase):
    """Sessions and tenants erased."""

    def erase_session(self, scope: Scope, session: str) -> int:
        where = "WHERE tenant = %s AND agent = %s AND session = %s"
        key = (scope.tenant, scope.agent, session)
        with self._write() as cur:
            cur.execute(f"DELETE FROM events {where}", key)
            erased = cur.rowcount
            cur.execute(f"DELETE FROM compactions {where}", key)
            cur.execute(f"DELETE FROM usage {where}", key)
        self._forget_vectors(scope, ["event"])
        return int(erased)

    def erase_tenant(self, tenant: str) -> int:
        scopes = [s for s in self.list_scopes() if s.tenant == tenant]
        erased = 0
        with self._write() as cur:
            for table in (*SCOPED_TABLES, *key_tables(tenant)):
                cur.execute(f"DELETE FROM {table} WHERE tenant = %s", (tenant,))
                erased += cur.rowcount
            # The deletes' triggers wrote negative counts: the tenant's name goes too.
            cur.execute("DELETE FROM fts_stats WHERE tenant = %s", (tenant,))
        for scope in scopes:
            self._forget_vectors(scope, KINDS)
        return erased
