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
away; a long one (a bulk import) by a ``GraphExtension`` in the background, into a copy
of the graph that replaces it when done, so searches keep using the graph meanwhile.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from loci.store.ann import ANN_THRESHOLD, AnnIndex, GraphBuild, GraphExtension, graph_lock
from loci.store.row_blocks import Positions, RowBlocks, differing_bits, dot_rows, sign_words

Matrix = npt.NDArray[np.float32]
HAVE_ANN = importlib.util.find_spec("usearch") is not None


#: A tail this short is added to the graph by the search that finds it (a few ms).
INLINE_TAIL = 256
#: Rows one extension adds: a copy of the graph (~0.1 s at 100k rows) per this many.
EXTEND_ROWS = 20_000
#: Past this many rows an unfiltered exact search (no graph yet, or its tail) scores
#: exactly only the ``SIGN_CANDIDATES`` (or ``SIGN_OVERSAMPLE`` x k) rows whose sign
#: bits are nearest the query's; chosen on the bundled model's vectors of real turns.
SIGN_SCAN_ROWS = 20_000
SIGN_CANDIDATES = 2_000
SIGN_OVERSAMPLE = 80


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
        self._rows = RowBlocks(dim)
        self._signs = RowBlocks(sign_words(np.zeros((1, dim), np.float32)).shape[1], np.uint64)
        self._position: dict[int, int] = {}

    @property
    def _size(self) -> int:
        return self._rows.size

    def __len__(self) -> int:
        return self._size

    def update(self, rows: Iterable[tuple[int, bytes, int]]) -> None:
        """Add or replace rows given as (row id, float32 bytes, vec_seq)."""
        batch = list(rows)
        if not batch:
            return
        width = self.dim * 4  # a missing or foreign-sized vector reads as zeros
        vectors = np.frombuffer(b"".join(
            blob if blob and len(blob) == width else bytes(width) for _, blob, _ in batch
        ), dtype=np.float32).reshape(len(batch), self.dim)
        ids = np.fromiter((row[0] for row in batch), np.int64, len(batch))
        seqs = np.fromiter((row[2] for row in batch), np.int64, len(batch))
        self.max_seq = max(self.max_seq, int(seqs.max()))
        known = np.fromiter((self._position.get(i, -1) for i in ids.tolist()), np.int64,
                            len(batch))
        for i in np.nonzero(known >= 0)[0].tolist():
            self._rows.set(int(known[i]), vectors[i])
            self._signs.set(int(known[i]), sign_words(vectors[i : i + 1])[0])
            self._seqs[known[i]] = seqs[i]
        new = known < 0
        if new.any():
            self._append(ids[new], seqs[new], vectors[new])

    def _append(
        self, ids: npt.NDArray[np.int64], seqs: npt.NDArray[np.int64], vectors: Matrix
    ) -> None:
        first = self._size
        needed = first + len(ids)
        if needed > len(self._ids):
            capacity = max(needed, 2 * len(self._ids), 1024)
            self._ids = np.resize(self._ids, capacity)
            self._seqs = np.resize(self._seqs, capacity)
        self._ids[first:needed] = ids
        self._seqs[first:needed] = seqs
        for offset, row_id in enumerate(ids.tolist()):
            self._position[row_id] = first + offset
        self._rows.append(vectors)
        self._signs.append(sign_words(vectors))

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
            return self._top(self._scores(query, positions), positions, k)
        return self._nearest(query, k, np.arange(self._size))

    def _scores(self, query: Matrix, positions: Positions) -> Matrix:
        return self._rows.each(lambda piece: dot_rows(piece, query), positions)

    def _nearest(self, query: Matrix, k: int, positions: Positions) -> list[tuple[int, float]]:
        """The ``k`` best of the rows at ``positions``; of many rows, only those whose
        signs are nearest the query's are scored."""
        wanted = max(SIGN_CANDIDATES, SIGN_OVERSAMPLE * k)
        if len(positions) > max(SIGN_SCAN_ROWS, wanted):
            signs = sign_words(query[None])[0]
            apart = self._signs.each(lambda piece: differing_bits(piece, signs), positions)
            positions = np.sort(positions[np.argpartition(apart, wanted)[:wanted]])
        return self._top(self._scores(query, positions), positions, k)

    def _top(self, scores: Matrix, positions: Positions, k: int) -> list[tuple[int, float]]:
        """The ``k`` best of ``scores`` (of the rows at ``positions``)."""
        k = min(k, scores.shape[0])
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        ids = self._ids[positions[top]]
        return [(int(row), float(scores[i])) for row, i in zip(ids, top, strict=True)]

    def _graph_search(self, graph: AnnIndex, query: Matrix, k: int
                      ) -> list[tuple[int, float]]:
        """The graph's hits and the tail's exact ones, merged (under the graph's lock)."""
        tail = np.nonzero(self._seqs[: self._size] > graph.max_seq)[0]
        if self._extension is None:  # (a running one copied the graph: leave it be)
            if 0 < len(tail) <= INLINE_TAIL:
                graph.upsert(self._ids[tail].tolist(), self._rows.take(tail),
                             int(self._seqs[tail].max()))
                tail = tail[:0]
            elif len(tail):
                self._extend(graph, tail)
        hits = graph.search(query, k + min(len(tail), k))
        if not len(tail):
            return hits[:k]
        fresh = [(row, score) for row, score in hits if not self._newer(row, graph.max_seq)]
        merged = fresh + self._nearest(query, k, tail)
        return sorted(merged, key=lambda hit: hit[1], reverse=True)[:k]

    def _extend(self, graph: AnnIndex, tail: Positions) -> None:
        """Start adding the oldest ``EXTEND_ROWS`` of the tail to a copy of the graph."""
        if len(tail) > EXTEND_ROWS:
            tail = tail[np.argsort(self._seqs[tail], kind="stable")[:EXTEND_ROWS]]
        self._extension = GraphExtension(graph, self._ids[tail], self._seqs[tail],
                                         self._rows.take(tail))

    def _wants_graph(self) -> bool:
        return HAVE_ANN and self._size >= self.ann_threshold

    def _newer(self, row: int, seq: int) -> bool:
        """Whether ``row`` changed after ``seq`` (a row the graph keeps from an earlier
        process, since deleted, is not: the hits are re-read from the database)."""
        at = self._position.get(row)
        return at is not None and bool(self._seqs[at] > seq)

    def _graph(self) -> AnnIndex | None:
        """The HNSW graph if it is ready, else None; the first call starts building it
        in the background from a snapshot. A finished extension's graph replaces the
        one it copied."""
        if self._extension is not None and self._extension.done():
            if self._extension.result is not None:
                self._ann = self._extension.result
            self._extension = None
        if self._ann is not None:
            return self._ann
        if self._build is None:
            size = self._size
            self._build = GraphBuild(self.dim, self.ann_path, self._ids[:size].copy(),
                                     self._seqs[:size].copy(), self._rows.take(np.arange(size)))
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
        extension under way stops and is dropped; the next process adds the rest)."""
        if self._extension is not None:
            self._extension.stop()
            self._graph()  # a finished one replaces the graph first
        if self._ann is not None:
            with graph_lock(self._ann.path), self._ann.lock:
                self._ann.save()
