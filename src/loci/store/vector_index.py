"""In-memory vector search over one scope's rows of one table.

Vectors stay in the database; this index mirrors one (table, tenant, agent) slice as a
contiguous float32 matrix and answers top-k exactly by one matrix-vector product. Past
``ANN_THRESHOLD`` rows, unfiltered searches go to a persisted HNSW graph instead (see
``store.ann``); filtered ones stay exact over the allowed rows. The graph is built in
the background on the first search that wants it; until it is ready, searches stay
exact (slower, never wrong). It refreshes incrementally: rows whose ``vec_seq`` is
above the highest one seen are loaded and replace older copies by row id.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from loci.store.ann import ANN_THRESHOLD, AnnIndex, GraphBuild, graph_lock

Matrix = npt.NDArray[np.float32]
HAVE_ANN = importlib.util.find_spec("usearch") is not None


#: Rows per matrix-vector product. One product over all rows lets OpenBLAS split it
#: across threads, which on busy cores is many times slower than small pieces.
DOT_CHUNK = 1024


def dot_rows(matrix: Matrix, query: Matrix) -> Matrix:
    """``matrix @ query`` in pieces small enough to stay on one thread."""
    out = np.empty(matrix.shape[0], dtype=np.float32)
    for start in range(0, matrix.shape[0], DOT_CHUNK):
        np.matmul(matrix[start : start + DOT_CHUNK], query, out=out[start : start + DOT_CHUNK])
    return out


class VectorIndex:
    """Row ids and unit vectors of one scope, searchable by cosine similarity."""

    def __init__(self, dim: int, ann_path: Path | None = None,
                 ann_threshold: int = ANN_THRESHOLD) -> None:
        self.dim = dim
        self.max_seq = 0
        self.ann_path = ann_path
        self.ann_threshold = ann_threshold
        self._ann: AnnIndex | None = None
        self._build: GraphBuild | None = None
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
        if allowed is None and self._wants_graph():
            graph = self._graph()
            if graph is not None:
                return graph.search(query, k)
        if allowed is not None:
            positions = np.fromiter(
                (p for p in map(self._position.get, allowed) if p is not None), dtype=np.int64
            )
            if positions.size == 0:
                return []
            scores = dot_rows(self._matrix[positions], query)
            ids = self._ids[positions]
        else:
            scores = dot_rows(self._matrix[: self._size], query)
            ids = self._ids[: self._size]
        k = min(k, scores.shape[0])
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(ids[i]), float(scores[i])) for i in top]

    def _wants_graph(self) -> bool:
        return HAVE_ANN and self._size >= self.ann_threshold

    def _graph(self) -> AnnIndex | None:
        """The HNSW graph if it is ready (caught up with newer rows), else None; the
        first call starts building it in the background from a snapshot."""
        if self._ann is not None:
            return self._ann
        if self._build is None:
            size = self._size
            self._build = GraphBuild(self.dim, self.ann_path, self._ids[:size].copy(),
                                     self._seqs[:size].copy(), self._matrix[:size].copy())
        if not self._build.done() or self._build.result is None:
            return None  # still building, or failed (logged): stay exact
        ann = self._build.result
        newer = np.nonzero(self._seqs[: self._size] > ann.max_seq)[0]
        if len(newer):  # written while the graph was being built
            ann.upsert(self._ids[newer].tolist(), self._matrix[newer],
                       int(self._seqs[newer].max()))
        ann.max_seq = max(ann.max_seq, self.max_seq)
        self._ann = ann
        return ann

    def graph_ready(self) -> bool:
        """True if unfiltered searches use the graph now; starts building it if this
        index is big enough (call under the owner's lock, like ``search``)."""
        return self._wants_graph() and self._graph() is not None

    def wait_for_build(self, timeout: float | None = None) -> None:
        """Wait for a started build to finish; touches no state, so the owner need not
        hold its lock (``graph_ready`` then installs the graph)."""
        if self._build is not None:
            self._build.wait(timeout)

    def persist(self) -> None:
        """Save the HNSW graph's new rows, so the next process need not add them."""
        if self._ann is not None:
            with graph_lock(self._ann.path):
                self._ann.save()
