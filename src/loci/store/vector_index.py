"""In-memory vector search over one scope's rows of one table.

Vectors stay in the database; this index mirrors one (table, tenant, agent) slice as a
contiguous float32 matrix and answers top-k exactly by one matrix-vector product. Past
``ANN_THRESHOLD`` rows, unfiltered searches go to a persisted HNSW graph instead (see
``store.ann``); filtered ones stay exact over the allowed rows. It refreshes
incrementally: rows whose ``vec_seq`` is above the highest one seen are loaded and
replace older copies by row id.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from loci.store.ann import ANN_THRESHOLD, AnnIndex

Matrix = npt.NDArray[np.float32]
HAVE_ANN = importlib.util.find_spec("usearch") is not None


class VectorIndex:
    """Row ids and unit vectors of one scope, searchable by cosine similarity."""

    def __init__(self, dim: int, ann_path: Path | None = None,
                 ann_threshold: int = ANN_THRESHOLD) -> None:
        self.dim = dim
        self.max_seq = 0
        self.ann_path = ann_path
        self.ann_threshold = ann_threshold
        self._ann: AnnIndex | None = None
        self._seqs = np.zeros(0, dtype=np.int64)
        self._ids = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._position: dict[int, int] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def update(self, rows: Iterable[tuple[int, bytes, int]]) -> None:
        """Add or replace rows given as (row id, float32 bytes, vec_seq)."""
        fresh_ids: list[int] = []
        fresh_seqs: list[int] = []
        fresh: list[Matrix] = []
        changed: list[int] = []
        for row_id, blob, seq in rows:
            self.max_seq = max(self.max_seq, seq)
            vector = np.frombuffer(blob, dtype=np.float32) if blob else None
            if vector is None or vector.shape[0] != self.dim:
                vector = np.zeros(self.dim, dtype=np.float32)
            at = self._position.get(row_id)
            if at is not None:
                self._matrix[at] = vector
                self._seqs[at] = seq
                changed.append(at)
            else:
                fresh_ids.append(row_id)
                fresh_seqs.append(seq)
                fresh.append(vector)
        if fresh:
            start = self._size
            self._append(np.asarray(fresh_ids, dtype=np.int64),
                         np.asarray(fresh_seqs, dtype=np.int64), np.vstack(fresh))
            changed.extend(range(start, self._size))
        if self._ann is not None and changed:
            where = np.asarray(changed, dtype=np.int64)
            self._ann.upsert(self._ids[where].tolist(), self._matrix[where], self.max_seq)

    def _append(
        self, ids: npt.NDArray[np.int64], seqs: npt.NDArray[np.int64], vectors: Matrix
    ) -> None:
        needed = self._size + len(ids)
        if needed > len(self._ids):
            capacity = max(needed, 2 * len(self._ids), 1024)
            self._ids = np.resize(self._ids, capacity)
            self._seqs = np.resize(self._seqs, capacity)
            matrix = np.zeros((capacity, self.dim), dtype=np.float32)
            matrix[: self._size] = self._matrix[: self._size]
            self._matrix = matrix
        self._ids[self._size : needed] = ids
        self._seqs[self._size : needed] = seqs
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
        if allowed is None and HAVE_ANN and self._size >= self.ann_threshold:
            return self._graph().search(query, k)
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

    def _graph(self) -> AnnIndex:
        """The HNSW graph: loaded from disk if saved, caught up with newer rows."""
        if self._ann is None:
            ann = AnnIndex.open(self.dim, self.ann_path)
            newer = np.nonzero(self._seqs[: self._size] > ann.max_seq)[0]
            for start in range(0, len(newer), 10_000):
                at = newer[start : start + 10_000]
                ann.upsert(self._ids[at].tolist(), self._matrix[at], int(self._seqs[at].max()))
            ann.max_seq = max(ann.max_seq, self.max_seq)
            ann.save()
            self._ann = ann
        return self._ann

    def persist(self) -> None:
        """Save the HNSW graph's new rows, so the next process need not add them."""
        if self._ann is not None:
            self._ann.save()
