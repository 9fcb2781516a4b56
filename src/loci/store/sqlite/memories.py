"""Memories in the SQLite backend: typed facts, their history, expiry and search."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from loci.errors import NotFoundError, StoreError
from loci.models import Memory, MemoryVersion, Scope
from loci.store.base import SearchFilters, Vectors
from loci.store.codec import dump_json, dump_tags, to_micros
from loci.store.rows import to_memory, to_version
from loci.store.sqlite.base import SQLiteBase
from loci.store.sqlite.rows import MEMORY_COLUMNS, memory_filters


class SQLiteMemories(SQLiteBase):
    """Mixed into :class:`SQLiteStore`."""


    def put_memory(self, scope: Scope, memory: Memory) -> None:
        self.put_memories(scope, [memory])

    def put_memories(
        self, scope: Scope, memories: Sequence[Memory], vectors: Vectors | None = None
    ) -> None:
        with self._write() as db:
            for start in range(0, len(memories), 500):
                ids = [m.id for m in memories[start : start + 500]]
                taken = db.execute(
                    f"SELECT id FROM memories WHERE id IN ({', '.join('?' * len(ids))}) "
                    "AND (tenant != ? OR agent != ?) LIMIT 1",
                    (*ids, scope.tenant, scope.agent),
                ).fetchone()
                if taken is not None:
                    raise StoreError(f"memory id {taken[0]} is taken")
            self._upsert_memories(db, scope, memories)
        if vectors is not None:
            self.set_embeddings(scope, "memory", [m.id for m in memories], vectors)

    @staticmethod
    def _upsert_memories(
        db: sqlite3.Connection, scope: Scope, memories: Sequence[Memory]
    ) -> None:
        db.executemany(
            "INSERT INTO memories (id, tenant, agent, type, content, tags, created, "
            "updated, expires, source, metadata, confirmed, superseded_by) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT (id) DO UPDATE SET type = excluded.type, "
            "embedding = CASE WHEN content = excluded.content THEN embedding END, "
            "content = excluded.content, tags = excluded.tags, "
            "created = excluded.created, updated = excluded.updated, "
            "expires = excluded.expires, source = excluded.source, "
            "metadata = excluded.metadata, confirmed = excluded.confirmed, "
            "superseded_by = excluded.superseded_by",
            [
                (
                    m.id, scope.tenant, scope.agent, m.type, m.content, dump_tags(m.tags),
                    to_micros(m.created_at), to_micros(m.updated_at),
                    _micros(m.expires_at),
                    m.source, dump_json(m.metadata), _micros(m.confirmed_at),
                    m.superseded_by,
                )
                for m in memories
            ],
        )

    def get_memory(self, scope: Scope, memory_id: str) -> Memory | None:
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ? AND tenant = ? AND agent = ?",
            (memory_id, scope.tenant, scope.agent),
        )
        return to_memory(rows[0]) if rows else None

    def list_memories(
        self,
        scope: Scope,
        *,
        types: Sequence[str] = (),
        now: datetime | None = None,
        expired_only: bool = False,
        limit: int | None = None,
    ) -> list[Memory]:
        where, params = memory_filters(SearchFilters(types=tuple(types), now=now), expired_only)
        # With types, read that type's rows (few, e.g. sticky) rather than walking the
        # whole scope in update order.
        index = " INDEXED BY memories_by_type" if types else ""
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories m{index} WHERE tenant = ? AND agent = ?"
            f"{where} ORDER BY updated DESC, rowid DESC LIMIT ?",
            (scope.tenant, scope.agent, *params, -1 if limit is None else limit),
        )
        return [to_memory(r) for r in rows]

    def delete_memory(self, scope: Scope, memory_id: str) -> bool:
        with self._write() as db:
            cursor = db.execute(
                "DELETE FROM memories WHERE id = ? AND tenant = ? AND agent = ?",
                (memory_id, scope.tenant, scope.agent),
            )
            if cursor.rowcount:
                db.execute("DELETE FROM memory_versions WHERE memory_id = ? AND tenant = ? "
                           "AND agent = ?", (memory_id, scope.tenant, scope.agent))
                self._mark_for_scrub(db, ["memories"], scope, ["memory"])
        if cursor.rowcount:
            self.finish_erasure()
        return cursor.rowcount > 0

    def supersede_memory(self, scope: Scope, memory: Memory, reason: str, now: datetime) -> int:
        with self._write() as db:
            version = db.execute(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM memory_versions WHERE memory_id = ?",
                (memory.id,),
            ).fetchone()[0]
            copied = db.execute(
                "INSERT INTO memory_versions (memory_id, tenant, agent, version, type, content, "
                "tags, created, updated, expires, source, superseded, reason) "
                "SELECT id, tenant, agent, ?, type, content, tags, created, updated, expires, "
                "source, ?, ? FROM memories WHERE id = ? AND tenant = ? AND agent = ?",
                (version, to_micros(now), reason, memory.id, scope.tenant, scope.agent),
            )
            if copied.rowcount == 0:
                raise NotFoundError(f"no memory {memory.id!r}")
            self._upsert_memories(db, scope, [memory])
        return int(version)

    def memory_history(self, scope: Scope, memory_id: str) -> list[MemoryVersion]:
        rows = self._query(
            "SELECT memory_id, version, type, content, tags, created, updated, expires, "
            "superseded, reason FROM memory_versions WHERE memory_id = ? AND tenant = ? "
            "AND agent = ? ORDER BY version",
            (memory_id, scope.tenant, scope.agent),
        )
        return [to_version(r) for r in rows]

    def purge_expired(self, scope: Scope, now: datetime) -> int:
        with self._write() as db:
            ids = [r[0] for r in db.execute(
                "SELECT id FROM memories WHERE tenant = ? AND agent = ? AND expires <= ? "
                "AND superseded_by IS NULL",
                (scope.tenant, scope.agent, to_micros(now)),
            )]
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                db.execute(f"DELETE FROM memories WHERE id IN ({marks})", chunk)
                db.execute(f"DELETE FROM memory_versions WHERE memory_id IN ({marks})", chunk)
        return len(ids)


def _micros(value: datetime | None) -> int | None:
    return None if value is None else to_micros(value)
