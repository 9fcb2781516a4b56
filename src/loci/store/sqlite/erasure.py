"""Erasure in the SQLite backend: rows deleted, then nothing of them left in the file's
full-text segments, freed pages, journal or saved vector graphs."""

from __future__ import annotations

from loci.models import Scope
from loci.store.sqlite.base import SQLiteBase
from loci.store.sqlite.rows import FULL_TEXT, KINDS
from loci.store.transfer import SCOPED_TABLES, key_tables


class SQLiteErasure(SQLiteBase):
    """Sessions and tenants erased."""

    scrubs_files = True

    def erase_session(self, scope: Scope, session: str) -> int:
        where = "WHERE tenant = ? AND agent = ? AND session = ?"
        key = (scope.tenant, scope.agent, session)
        with self._write() as db:
            erased = db.execute(f"DELETE FROM events {where}", key).rowcount
            db.execute(f"DELETE FROM compactions {where}", key)
            db.execute(f"DELETE FROM usage {where}", key)
            self._mark_for_scrub(db, ["events"], scope, ["event"])
        self.finish_erasure()
        return int(erased)

    def erase_tenant(self, tenant: str) -> int:
        scopes = [s for s in self.list_scopes() if s.tenant == tenant]
        erased = 0
        with self._write() as db:
            db.execute("DELETE FROM fts_stats WHERE scope IN "
                       "(SELECT no FROM scopes WHERE tenant = ?)", (tenant,))
            for table in (*SCOPED_TABLES, *key_tables(tenant), "scopes"):
                erased += db.execute(f"DELETE FROM {table} WHERE tenant = ?",
                                     (tenant,)).rowcount
            self._mark_for_scrub(db, [ft.table for ft in FULL_TEXT])
            for scope in scopes:
                self._mark_for_scrub(db, (), scope, KINDS)
        for scope in scopes:
            self._scope_bases.pop(scope, None)
        self.finish_erasure()
        return erased
