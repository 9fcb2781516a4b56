"""In-memory vector search over one scope's rows of one table.

Vectors stay in the database; this index mirrors one (table, tenant, agent) slice as a
contiguous float32 matrix and answers top-k exactly by one matrix-vector product. Past
``ANN_THRESHOLD`` rows, unfiltered searches go to a persisted HNSW graph instead (see
``store.ann``); filtered ones stay exact over the allowed rows. The graph is built in
the background on the first search that wants it; until it is ready, searches stay
exact (slower, never wrong). It refreshes incrementally: rows whose ``vec_seq`` is
above the highest one seen are loaded and replace older copies by row id.

Rows written after the graph was made (its ``max_seq``) are its **tail**: a search
asks the graph and scores the tail exactly, and merges the two (a graph hit whose row
changed since is left to the tail's score). A short tail is added to the graph right
away; a long one (a bulk import) by a ``GraphExtension`` in the background, a chunk at
a time, so no search waits for it: one that finds the graph busy answers exactly.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from loci.store.ann import ANN_THRESHOLD, AnnIndex, GraphBuild, GraphExtension, graph_lock

Matrix = npt.NDArray[np.float32]
HAVE_ANN = importlib.util.find_spec("usearch") is not None


#: A tail this short is added to the graph by the search that finds it (a few ms).
INLINE_TAIL = 256

#: Rows per matrix-vector product. One product over all rows lets OpenBLAS split it
#: across threads, which on busy cores is many times slower than small pieces.
DOT_CHUNK = 1024


def dot_rows(matrix: Matrix, query: Matrix,
             positions: npt.NDArray[np.int64] | None = None) -> Matrix:
    """``matrix @ query`` (over the rows at ``positions`` only, if given) in pieces
    small enough to stay on one thread and in the cache."""
    count = matrix.shape[0] if positions is None else len(positions)
    out = np.empty(count, dtype=np.float32)
    for start in range(0, count, DOT_CHUNK):
        rows = (matrix[start : start + DOT_CHUNK] if positions is None
                else matrix[positions[start : start + DOT_CHUNK]])
        np.matmul(rows, query, out=out[start : start + DOT_CHUNK])
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
        self._extension: GraphExtension | None = None
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
        for row_id, blob, seq in rows:
            self.max_seq = max(self.max_seq, seq)
            vector = np.frombuffer(blob, dtype=np.float32) if blob else None
            if vector is None or vector.shape[0] != self.dim:
                vector = np.zeros(self.dim, dtype=np.float32)
            at = self._position.get(row_id)
            if at is not None:
                self._matrix[at] = vector
                self._seqs[at] = seq
            else:
                fresh_ids.append(row_id)
                fresh_seqs.append(seq)
                fresh.append(vector)
        if fresh:
            self._append(np.asarray(fresh_ids, dtype=np.int64),
                         np.asarray(fresh_seqs, dtype=np.int64), np.vstack(fresh))

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
            if graph is not None and graph.lock.acquire(blocking=False):
                try:
                    return self._graph_search(graph, query, k)
                finally:
                    graph.lock.release()
        if allowed is not None:
            positions = np.fromiter(
                (p for p in map(self._position.get, allowed) if p is not None), dtype=np.int64
            )
            if positions.size == 0:
                return []
            return self._top(dot_rows(self._matrix, query, positions), positions, k)
        return self._top(dot_rows(self._matrix[: self._size], query), None, k)

    def _top(self, scores: Matrix, positions: npt.NDArray[np.int64] | None, k: int
             ) -> list[tuple[int, float]]:
        """The ``k`` best of ``scores`` (of the rows at ``positions``, or of all)."""
        k = min(k, scores.shape[0])
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        ids = self._ids[top] if positions is None else self._ids[positions[top]]
        return [(int(row), float(scores[i])) for row, i in zip(ids, top, strict=True)]

    def _graph_search(self, graph: AnnIndex, query: Matrix, k: int
                      ) -> list[tuple[int, float]]:
        """The graph's hits and the tail's exact ones, merged (under the graph's lock)."""
        tail = np.nonzero(self._seqs[: self._size] > graph.max_seq)[0]
        if 0 < len(tail) <= INLINE_TAIL:
            graph.upsert(self._ids[tail].tolist(), self._matrix[tail],
                         int(self._seqs[tail].max()))
            tail = tail[:0]
        elif len(tail) and (self._extension is None or self._extension.done()):
            self._extension = GraphExtension(graph, self._ids[tail], self._seqs[tail],
                                             self._matrix[tail])
        hits = graph.search(query, k + min(len(tail), k))
        if not len(tail):
            return hits[:k]
        fresh = [(row, score) for row, score in hits if not self._newer(row, graph.max_seq)]
        merged = fresh + self._top(self._tail_scores(tail, query), tail, k)
        return sorted(merged, key=lambda hit: hit[1], reverse=True)[:k]

    def _wants_graph(self) -> bool:
        return HAVE_ANN and self._size >= self.ann_threshold

    def _tail_scores(self, tail: npt.NDArray[np.int64], query: Matrix) -> Matrix:
        """Exact scores of the tail; rows appended since the graph are one slice of
        the matrix, read in place rather than gathered."""
        if int(tail[-1]) - int(tail[0]) + 1 == len(tail):
            return dot_rows(self._matrix[int(tail[0]) : int(tail[-1]) + 1], query)
        return dot_rows(self._matrix, query, tail)

    def _newer(self, row: int, seq: int) -> bool:
        """Whether ``row`` changed after ``seq`` (a row the graph keeps from an earlier
        process, since deleted, is not: the hits are re-read from the database)."""
        at = self._position.get(row)
        return at is not None and bool(self._seqs[at] > seq)

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
        # Rows written while it was built are its tail (``_graph_search``).
        self._ann = self._build.result
        return self._ann

    def graph_ready(self) -> bool:
        """True if unfiltered searches use the graph now; starts building it if this
        index is big enough (call under the owner's lock, like ``search``)."""
        return self._wants_graph() and self._graph() is not None

    def wait_for_build(self, timeout: float | None = None) -> None:
        """Wait for a started build (and extension) to finish; touches no state, so the
        owner need not hold its lock (``graph_ready`` then installs the graph)."""
        for job in (self._build, self._extension):
            if job is not None:
                job.wait(timeout)

    def persist(self) -> None:
        """Save the HNSW graph's new rows, so the next process need not add them (an
        extension under way stops after its chunk; the next process adds the rest)."""
        if self._ann is not None:
            if self._extension is not None:
                self._extension.stop()
            with graph_lock(self._ann.path), self._ann.lock:
                self._ann.save()
