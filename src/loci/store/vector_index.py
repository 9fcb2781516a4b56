"""In-memory vector search over one scope's rows of one table.

Vectors stay in the database; this index mirrors one (table, tenant, agent) slice as a
contiguous float32 matrix and answers top-k exactly by one matrix-vector product. Past
``ANN_THRESHOLD`` rows, unfiltered searches go to a persisted HNSW graph instead (see
``store.ann``); filtered ones stay exact over the allowed rows. The graph is built in
the background on the first search that wants it; until it is ready, searches stay
exact (slower, never wrong). It refreshes incrementally: rows whose ``vec_seq`` is
above the highest one seen are loaded and replace older copies by row id.

Rows written after the newest graph was made (its ``max_seq``) are the **tail**: a
search asks the graphs and scores the tail exactly, and merges what they found (a
graph's hit whose row changed since is left to a newer graph or the tail). A short
tail is added to the newest graph right away; a long one (a bulk import) becomes a
segment, a graph of its own built in the background (``SegmentBuild``), so searches
keep using the graphs meanwhile. ``MERGE_SEGMENTS`` segments of one size class are
merged into one the same way, which keeps their number logarithmic in the rows.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path

import numpy as np
import numpy.typing as npt

from loci.store.ann import (
    ANN_THRESHOLD,
    AnnIndex,
    GraphBuild,
    SegmentBuild,
    graph_lock,
    save_graphs,
)
from loci.store.row_blocks import Positions, RowBlocks, differing_bits, dot_rows, sign_words

Matrix = npt.NDArray[np.float32]
HAVE_ANN = importlib.util.find_spec("usearch") is not None


#: A tail this short is added to the newest graph by the search that finds it (a few ms).
INLINE_TAIL = 256
#: Rows of the tail one segment takes at most. A shorter tail becomes a segment once
#: no rows came for ``SETTLED`` seconds: while an import goes on it is left to grow,
#: since many small segments would each be searched.
SEGMENT_ROWS = 20_000
SETTLED = 1.0
#: This many segments of one size class (a factor of this many apart: ``_size_class``)
#: are merged into one.
MERGE_SEGMENTS = 4
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
        #: The base graph, then its segments, oldest first (empty until built).
        self._graphs: list[AnnIndex] = []
        self._build: GraphBuild | None = None
        #: A segment being built, and the segments it merges (none: it takes the tail).
        self._segment: tuple[SegmentBuild, list[AnnIndex]] | None = None
        self._seqs = np.zeros(0, dtype=np.int64)
        self._ids = np.zeros(0, dtype=np.int64)
        self._rows = RowBlocks(dim)
        self._signs = RowBlocks(sign_words(np.zeros((1, dim), np.float32)).shape[1], np.uint64)
        self._position: dict[int, int] = {}
        self._grown_at = 0.0  # when rows last came (``time.monotonic``)
        #: When the owner last read the rows written since ``max_seq`` (its business).
        self.checked_at = -float("inf")

    @property
    def _size(self) -> int:
        return self._rows.size

    def __len__(self) -> int:
        return self._size

    @property
    def nbytes(self) -> int:
        """Bytes held for search: the vectors, their sign bits, ids and numbers, and
        the graphs built from them (a graph costs about twice its vectors). A graph
        being built is not counted until it is done."""
        return (self._rows.nbytes + self._signs.nbytes + self._ids.nbytes
                + self._seqs.nbytes + sum(graph.nbytes for graph in self._graphs))

    def update(self, rows: Iterable[tuple[int, bytes, int]]) -> None:
        """Add or replace rows given as (row id, float32 bytes, vec_seq)."""
        batch = list(rows)
        if not batch:
            return
        width = self.dim * 4  # a missing or foreign-sized vector reads as zeros
        vectors = np.frombuffer(b"".join(
            blob if blob and len(blob) == width else bytes(width) for _, blob, _ in batch
        ), dtype=np.float32).reshape(len(batch), self.dim)
        self.update_vectors(np.fromiter((row[0] for row in batch), np.int64, len(batch)),
                            vectors, np.fromiter((row[2] for row in batch), np.int64, len(batch)))

    def update_vectors(self, ids: npt.NDArray[np.int64], vectors: Matrix,
                       seqs: npt.NDArray[np.int64]) -> None:
        """Add or replace the rows ``ids`` with their vectors and ``vec_seq``."""
        if not len(ids):
            return
        self.max_seq = max(self.max_seq, int(seqs.max()))
        self._grown_at = time.monotonic()
        known = np.fromiter((self._position.get(i, -1) for i in ids.tolist()), np.int64,
                            len(ids))
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
            graphs = self._ready_graphs()
            if graphs and graphs[0].lock.acquire(blocking=False):
                try:
                    return self._graph_search(graphs, query, k)
                finally:
                    graphs[0].lock.release()
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

    def _graph_search(self, graphs: list[AnnIndex], query: Matrix, k: int
                      ) -> list[tuple[int, float]]:
        """The graphs' hits and the tail's exact ones, merged (under the base's lock)."""
        newest = graphs[-1]
        tail = np.nonzero(self._seqs[: self._size] > newest.max_seq)[0]
        if self._segment is None:  # (a segment under way was cut from these graphs)
            if 0 < len(tail) <= INLINE_TAIL:
                newest.upsert(self._ids[tail].tolist(), self._rows.take(tail),
                              int(self._seqs[tail].max()))
                tail = tail[:0]
            elif len(tail) >= SEGMENT_ROWS or (
                    len(tail) and time.monotonic() - self._grown_at >= SETTLED):
                self._build_segment(tail)
            else:
                self._merge_segments(graphs)
        best: dict[int, float] = {}
        for i, graph in enumerate(graphs):
            # A graph with newer rows after it may hold some of those rows' old vectors.
            later = len(tail) + sum(len(g) for g in graphs[i + 1:])
            for row, score in graph.search(query, k + min(later, k)):
                if not self._newer(row, graph.max_seq) and score > best.get(row, -2.0):
                    best[row] = score  # (a row may sit in two graphs saved by two processes)
        merged = list(best.items())
        if len(tail):
            merged += self._nearest(query, k, tail)
        return sorted(merged, key=lambda hit: hit[1], reverse=True)[:k]

    def _build_segment(self, tail: Positions) -> None:
        """Start building a segment of the oldest ``SEGMENT_ROWS`` rows of the tail."""
        if len(tail) > SEGMENT_ROWS:
            tail = tail[np.argsort(self._seqs[tail], kind="stable")[:SEGMENT_ROWS]]
        self._segment = (SegmentBuild(self.dim, self._ids[tail], self._seqs[tail],
                                      partial(self._rows.take, tail)), [])

    def _merge_segments(self, graphs: list[AnnIndex]) -> None:
        """Start merging the newest ``MERGE_SEGMENTS`` segments if they are of one size
        class: a new graph of the rows they cover (by ``vec_seq``), as they are now."""
        merged = graphs[1:][-MERGE_SEGMENTS:]
        if len(merged) < MERGE_SEGMENTS or len({_size_class(len(s)) for s in merged}) > 1:
            return
        after, last = graphs[-MERGE_SEGMENTS - 1].max_seq, merged[-1].max_seq
        seqs = self._seqs[: self._size]
        rows = np.nonzero((seqs > after) & (seqs <= last))[0]
        self._segment = (SegmentBuild(self.dim, self._ids[rows], seqs[rows],
                                      partial(self._rows.take, rows)), merged)

    def _wants_graph(self) -> bool:
        return HAVE_ANN and self._size >= self.ann_threshold

    def _newer(self, row: int, seq: int) -> bool:
        """Whether ``row`` changed after ``seq`` (a row the graph keeps from an earlier
        process, since deleted, is not: the hits are re-read from the database)."""
        at = self._position.get(row)
        return at is not None and bool(self._seqs[at] > seq)

    def _ready_graphs(self) -> list[AnnIndex]:
        """The graphs if they are ready, else none; the first call starts building them
        in the background from a snapshot. A finished segment joins them (a merged one
        replaces the segments it merges)."""
        if self._segment is not None and self._segment[0].done():
            (build, merged), self._segment = self._segment, None
            if build.result is not None:
                kept = self._graphs[: len(self._graphs) - len(merged)]
                if merged:  # it holds every row up to theirs (some may have moved on)
                    build.result.max_seq = max(build.result.max_seq, merged[-1].max_seq)
                self._graphs = [*kept, build.result]
        if self._graphs:
            return self._graphs
        if self._build is None:
            size = self._size
            self._build = GraphBuild(self.dim, self.ann_path, self._ids[:size].copy(),
                                     self._seqs[:size].copy(), self._rows.take(np.arange(size)))
        if not self._build.done() or self._build.result is None:
            return []  # still building, or failed (logged): stay exact
        # Rows written while they were built are the tail (``_graph_search``).
        self._graphs = self._build.result
        return self._graphs

    def graph_ready(self) -> bool:
        """True if unfiltered searches use the graph now; starts building it if this
        index is big enough (call under the owner's lock, like ``search``)."""
        return self._wants_graph() and bool(self._ready_graphs())

    def building(self) -> bool:
        """True while a graph or a segment is being built in the background."""
        return any(job is not None and not job.done()
                   for job in (self._build, self._segment[0] if self._segment else None))

    def wait_for_build(self, timeout: float | None = None) -> None:
        """Wait for a started build (and segment) to finish; touches no state, so the
        owner need not hold its lock (``graph_ready`` then installs the graphs)."""
        for job in (self._build, self._segment[0] if self._segment else None):
            if job is not None:
                job.wait(timeout)

    def persist(self) -> None:
        """Save the graphs' new rows, so the next process need not add them (a segment
        under way stops and is dropped; the next process adds its rows)."""
        if self._segment is not None:
            self._segment[0].stop()
            self._ready_graphs()  # a finished one joins the graphs first
        if self._graphs:
            with graph_lock(self.ann_path), self._graphs[0].lock:
                save_graphs(self.ann_path, self._graphs)


def _size_class(rows: int) -> int:
    """0 below ``MERGE_SEGMENTS`` x ``SEGMENT_ROWS`` rows, 1 below that times
    ``MERGE_SEGMENTS``, and so on."""
    size, rows_class = MERGE_SEGMENTS * SEGMENT_ROWS, 0
    while rows >= size:
        size, rows_class = size * MERGE_SEGMENTS, rows_class + 1
    return rows_class
