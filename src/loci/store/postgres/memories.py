"""Memories in the PostgreSQL backend: typed facts, their history, expiry and search.

Writes go through one path for one memory or a million: COPY into a per-connection
staging table, then one ``INSERT ... ON CONFLICT (id) DO UPDATE`` guarded by the scope.
The primary key makes concurrent upserts of the same id from several processes update
one row (never duplicate it), and the scope guard makes an id owned by another scope
fail the whole batch instead of being overwritten.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from loci.errors import NotFoundError, StoreError
from loci.models import Memory, MemoryVersion, Scope
from loci.store.base import SearchFilters, Vectors
from loci.store.codec import to_micros
from loci.store.postgres.base import Cursor
from loci.store.postgres.rows import MEMORY_COLUMNS, check_text, json_value, memory_filters
from loci.store.postgres.vectors import PostgresVectors
from loci.store.rows import to_memory, to_version

_STAGE = (
    "CREATE TEMP TABLE IF NOT EXISTS memories_in (ord integer, id text, type text, "
    "content text, tags text[], created bigint, updated bigint, expires bigint, "
    "source text, metadata text, embedding vector, vec_seq bigint, confirmed bigint, "
    "superseded_by text) ON COMMIT DELETE ROWS"
)
_COPY = (
    "COPY memories_in (ord, id, type, content, tags, created, updated, expires, source, "
    "metadata, embedding, vec_seq, confirmed, superseded_by) FROM STDIN (FORMAT BINARY)"
)
_COPY_TYPES = ["int4", "text", "text", "text", "text[]", "int8", "int8", "int8", "text",
               "text", "vector", "int8", "int8", "text"]
# The last write of an id in a batch wins, as if the batch were written one by one;
# rows keep the batch's order, which breaks ties in list_memories.
_UPSERT = (
    "INSERT INTO memories (id, tenant, agent, type, content, tags, created, updated, "
    "expires, source, metadata, embedding, vec_seq, confirmed, superseded_by) "
    "SELECT id, %s, %s, type, content, tags, created, updated, expires, source, "
    "metadata::jsonb, embedding, vec_seq, confirmed, superseded_by "
    "FROM (SELECT DISTINCT ON (id) * FROM memories_in "
    "ORDER BY id, ord DESC) s ORDER BY ord "
    "ON CONFLICT (id) DO UPDATE SET type = excluded.type, "
    "embedding = COALESCE(excluded.embedding, CASE WHEN memories.content = excluded.content "
    "THEN memories.embedding END), "
    "vec_seq = CASE WHEN excluded.embedding IS NOT NULL THEN excluded.vec_seq "
    "WHEN memories.content = excluded.content THEN memories.vec_seq END, "
    "content = excluded.content, tags = excluded.tags, created = excluded.created, "
    "updated = excluded.updated, expires = excluded.expires, source = excluded.source, "
    "metadata = excluded.metadata, confirmed = excluded.confirmed, "
    "superseded_by = excluded.superseded_by "
    "WHERE memories.tenant = excluded.tenant AND memories.agent = excluded.agent "
    "RETURNING seq, vec_seq"
)


def _copy_row(i: int, m: Memory, vector: Any, vec_seq: int | None) -> tuple[Any, ...]:
    check_text(m.id, m.type, m.content, m.source, m.superseded_by, *m.tags)
    return (
        i, m.id, m.type, m.content, list(m.tags), to_micros(m.created_at),
        to_micros(m.updated_at), _micros(m.expires_at), m.source, json_value(m.metadata),
        vector, vec_seq, _micros(m.confirmed_at), m.superseded_by,
    )


def _micros(value: datetime | None) -> int | None:
    return None if value is None else to_micros(value)


class PostgresMemories(PostgresVectors):
    """Mixed into :class:`PostgresStore`."""


    def put_memory(self, scope: Scope, memory: Memory) -> None:
        self.put_memories(scope, [memory])

    def put_memories(
        self, scope: Scope, memories: Sequence[Memory], vectors: Vectors | None = None
    ) -> None:
        if not memories:
            return
        with self._write() as cur:
            # Vectors numbered as ``set_embeddings`` numbers them: memory i is before + 1 + i.
            before = 0 if vectors is None else self._number_vectors(cur, "memory", scope)
            rows = [
                _copy_row(i, m, None, None) if vectors is None else
                _copy_row(i, m, np.asarray(vectors[i], np.float32), before + 1 + i)
                for i, m in enumerate(memories)
            ]
            written = self._upsert_memories(cur, scope, rows)
        self._grew("memories", len(rows))
        if vectors is not None:
            self._hand_over(scope, "memory", before,
                            [(key, seq) for key, seq in written if seq is not None], vectors)

    @staticmethod
    def _upsert_memories(cur: Cursor, scope: Scope, rows: list[tuple[Any, ...]]
                         ) -> list[tuple[int, int | None]]:
        """Write the rows; their keys (``seq``) and ``vec_seq``."""
        cur.execute(_STAGE)
        with cur.copy(_COPY) as copy:
            copy.set_types(_COPY_TYPES)
            for row in rows:
                copy.write_row(row)
        cur.execute(_UPSERT, (scope.tenant, scope.agent))
        if cur.rowcount < len({row[1] for row in rows}):
            # The scope guard skipped ids stored in another scope: refuse the batch.
            cur.execute(
                "SELECT i.id FROM memories_in i JOIN memories m ON m.id = i.id "
                "WHERE m.tenant <> %s OR m.agent <> %s LIMIT 1",
                (scope.tenant, scope.agent),
            )
            taken = cur.fetchone()
            raise StoreError(f"memory id {taken[0] if taken else '?'} is taken")
        return cur.fetchall()

    def get_memory(self, scope: Scope, memory_id: str) -> Memory | None:
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = %s AND tenant = %s "
            "AND agent = %s",
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
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE tenant = %s AND agent = %s"
            f"{where} ORDER BY updated DESC, seq DESC LIMIT %s",
            (scope.tenant, scope.agent, *params, limit),
        )
        return [to_memory(r) for r in rows]

    def delete_memory(self, scope: Scope, memory_id: str) -> bool:
        with self._write() as cur:
            cur.execute(
                "DELETE FROM memories WHERE id = %s AND tenant = %s AND agent = %s",
                (memory_id, scope.tenant, scope.agent),
            )
            deleted = cur.rowcount > 0
            if deleted:
                cur.execute(
                    "DELETE FROM memory_versions WHERE memory_id = %s AND tenant = %s "
                    "AND agent = %s", (memory_id, scope.tenant, scope.agent))
            return deleted

    def supersede_memory(self, scope: Scope, memory: Memory, reason: str, now: datetime) -> int:
        row = _copy_row(0, memory, None, None)
        with self._write() as cur:
            # The row lock orders concurrent supersedes of one memory: version numbers
            # never collide and no version is lost.
            cur.execute(
                "SELECT 1 FROM memories WHERE id = %s AND tenant = %s AND agent = %s "
                "FOR UPDATE", (memory.id, scope.tenant, scope.agent))
            if cur.fetchone() is None:
                raise NotFoundError(f"no memory {memory.id!r}")
            cur.execute(
                "INSERT INTO memory_versions (memory_id, tenant, agent, version, type, "
                "content, tags, created, updated, expires, source, superseded, reason) "
                "SELECT id, tenant, agent, (SELECT COALESCE(MAX(version), 0) + 1 FROM "
                "memory_versions WHERE memory_id = %s), type, content, tags, created, "
                "updated, expires, source, %s, %s FROM memories WHERE id = %s "
                "RETURNING version",
                (memory.id, to_micros(now), reason, memory.id),
            )
            version = cur.fetchone()
            assert version is not None
            self._upsert_memories(cur, scope, [row])
        return int(version[0])

    def memory_history(self, scope: Scope, memory_id: str) -> list[MemoryVersion]:
        rows = self._query(
            "SELECT memory_id, version, type, content, loci_words(tags), created, updated, "
            "expires, superseded, reason FROM memory_versions WHERE memory_id = %s "
            "AND tenant = %s AND agent = %s ORDER BY version",
            (memory_id, scope.tenant, scope.agent),
        )
        return [to_version(r) for r in rows]

    def purge_expired(self, scope: Scope, now: datetime) -> int:
        with self._write() as cur:
            cur.execute(
                "DELETE FROM memories WHERE tenant = %s AND agent = %s AND expires <= %s "
                "AND superseded_by IS NULL RETURNING id",
                (scope.tenant, scope.agent, to_micros(now)))
            ids = [r[0] for r in cur.fetchall()]
            if ids:
                cur.execute(
                    "DELETE FROM memory_versions WHERE memory_id = ANY(%s) AND tenant = %s "
                    "AND agent = %s", (ids, scope.tenant, scope.agent))
        return len(ids)
