"""In-memory exact vector search over one scope's rows of one table.

Vectors stay in the database; this index mirrors one (table, tenant, agent) slice as a
contiguous float32 matrix and answers top-k by one matrix-vector product (about 4 ms
for 100k x 384 on two cores). It refreshes incrementally: rows whose ``vec_seq`` is
above the highest one seen are loaded and replace older copies by row id.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


class VectorIndex:
    """Row ids and unit vectors of one scope, searchable by cosine similarity."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.max_seq = 0
        self._ids = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._position: dict[int, int] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def update(self, rows: Iterable[tuple[int, bytes, int]]) -> None:
        """Add or replace rows given as (row id, float32 bytes, vec_seq)."""
        fresh_ids: list[int] = []
        fresh: list[Matrix] = []
        for row_id, blob, seq in rows:
            self.max_seq = max(self.max_seq, seq)
            vector = np.frombuffer(blob, dtype=np.float32) if blob else None
            if vector is None or vector.shape[0] != self.dim:
                vector = np.zeros(self.dim, dtype=np.float32)
            at = self._position.get(row_id)
            if at is not None:
                self._matrix[at] = vector
            else:
                fresh_ids.append(row_id)
                fresh.append(vector)
        if fresh:
            self._append(np.asarray(fresh_ids, dtype=np.int64), np.vstack(fresh))

    def _append(self, ids: npt.NDArray[np.int64], vectors: Matrix) -> None:
        needed = self._size + len(ids)
        if needed > len(self._ids):
            capacity = max(needed, 2 * len(self._ids), 1024)
            self._ids = np.resize(self._ids, capacity)
            matrix = np.zeros((capacity, self.dim), dtype=np.float32)
            matrix[: self._size] = self._matrix[: self._size]
            self._matrix = matrix
        self._ids[self._size : needed] = ids
        self._matrix[self._size : needed] = vectors
        for offset, row_id in enumerate(ids.tolist()):
            self._position[row_id] = self._size + offset
        self._size = needed

    def search(
        self, query: Matrix, k: int, allowed: Iterable[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` most similar row ids with cosine scores, best first; with
        ``allowed``, only those row ids are considered."""
        if self._size == 0 or k <= 0:
            return []
        if allowed is not None:
            positions = np.fromiter(
                (p for p in map(self._position.get, allowed) if p is not None), dtype=np.int64
            )
            if positions.size == 0:
                return []
            scores = self._matrix[positions] @ query
            ids = self._ids[positions]
        else:
            scores = self._matrix[: self._size] @ query
            ids = self._ids[: self._size]
        k = min(k, scores.shape[0])
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(ids[i]), float(scores[i])) for i in top]
