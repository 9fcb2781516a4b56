"""Vector search served from in-process indexes, written once for both backends.

The database keeps every vector, the truth; each process mirrors a (kind, tenant, agent)
slice in a :class:`VectorIndex` built on its first search and refreshed before a search
(``FRESH_FOR``) from ``vec_seq``: a scope's writes number their vectors in commit order
(the backend makes sure of it), so the rows above the highest number an index has seen
are exactly those it lacks, other processes' included. A write of this process hands the
vectors it committed to the loaded index instead (``_hand_over``).

The index may hold rows deleted since, or vectors older than the row's: every candidate
is checked against the database with the search's filters (``_passing``), which also
keeps another tenant's rows out. A backend supplies the SQL of those steps.

The indexes' vectors stay within a memory budget (``_evict``: the scopes searched least
recently go first), and reads a retrieval repeats are shared for a moment
(``_recently``: the backends' keyword searches use it too).
"""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from loci.models import Scope
from loci.store.ann import graph_lock, remove_graphs
from loci.store.base import Scored, SearchFilters, Store, Vectors
from loci.store.vector_index import VectorIndex

#: Candidates fetched beyond the limit before filters, on the first try.
SPARE_CANDIDATES = 10
#: At most this many candidates are asked of the graph when filters reject many.
MAX_CANDIDATES = 2_000
#: Filters that leave at most this many rows (as found in indexes) are served by exact
#: search over them.
EXACT_ALLOWED = 2_000
#: A search looks for rows its index lacks unless one looked less than this many seconds
#: ago (it asks twice: for candidates and for scores). This process's writes are handed
#: over at once; other processes' vectors may be seen this much later.
FRESH_FOR = 0.1
#: Filters found to leave more rows are not looked at again for this many seconds
#: (rows may have gone since), and at most this many such filters are remembered.
MANY_FOR = 60.0
MANY_REMEMBERED = 1_024
#: Reads kept by ``_recently`` (each for FRESH_FOR at most).
RECENT_READS = 256

T = TypeVar("T")


class IndexedVectors(Store):
    """Mixed into both stores; the backend implements the hooks below."""

    #: Guards ``_indexes``, the indexes' work and ``_many`` (of database reads, only
    #: the look for rows an index lacks).
    _index_lock: threading.RLock
    #: Vector indexes by (kind, tenant, agent), the least recently searched first.
    _indexes: OrderedDict[tuple[str, str, str], VectorIndex]
    #: Bytes of vectors the indexes may hold together (None: no limit; ``_evict``).
    _vector_budget: int | None
    #: When narrowing filters (without ``now``) were found to leave many rows, by kind
    #: and scope (``_few_allowed``; guarded by ``_index_lock``).
    _many: dict[tuple[str, Scope, SearchFilters], float]
    #: Changes with every write transaction this process commits (the backend's
    #: ``_write``; racing threads may lose an increment, never the change).
    _write_generation: int
    #: Reads kept by ``_recently``: (generation, time, result to come) by key, and
    #: their lock.
    _recent_reads: dict[Hashable, tuple[int, float, Future[Any]]]
    _recent_lock: threading.Lock

    def _open_indexes(self, lock: threading.RLock, memory_mb: int | None) -> None:
        """Start with no index loaded; ``lock`` guards them (see ``_index_lock``), and
        their vectors may take ``memory_mb`` together (None: no limit)."""
        self._index_lock = lock
        self._indexes = OrderedDict()
        self._vector_budget = None if memory_mb is None else memory_mb << 20
        self._many = {}
        self._write_generation, self._recent_reads = 0, {}
        self._recent_lock = threading.Lock()

    # -- what a backend supplies ------------------------------------------------
    @abstractmethod
    def _ann_path(self, kind: str, scope: Scope) -> Path | None:
        """Where the scope's graphs are saved (None: built by each process)."""

    @abstractmethod
    def _latest_vec_seq(self, kind: str, scope: Scope) -> int | None:
        """The highest ``vec_seq`` of the scope's rows (None: no vectors)."""

    @abstractmethod
    def _vector_rows(self, kind: str, scope: Scope, after: int
                     ) -> Iterable[tuple[int, bytes, int]]:
        """(key, float32 bytes, vec_seq) of the scope's rows numbered above ``after``."""

    @abstractmethod
    def _passing(self, kind: str, scope: Scope, candidates: list[tuple[int, float]],
                 filters: SearchFilters) -> list[Scored]:
        """The candidates with a positive score whose rows exist in the scope and pass
        the filters, best first."""

    @abstractmethod
    def _allowed_keys(self, kind: str, scope: Scope, filters: SearchFilters) -> list[int]:
        """The keys of the scope's rows that pass the filters."""

    @abstractmethod
    def _roughly_allowed(self, kind: str, scope: Scope, filters: SearchFilters
                         ) -> list[int] | None:
        """The keys of at most ``EXACT_ALLOWED`` rows among which are all those that
        pass the filters, found in indexes alone; None if there are more."""

    # -- searches ---------------------------------------------------------------
    def vector_candidates(
        self, scope: Scope, kind: str, query: Vectors, *, limit: int, filters: SearchFilters
    ) -> list[Scored]:
        index = self._fresh_index(scope, kind, int(query.shape[0]))
        few = self._few_allowed(kind, scope, filters)
        if few is not None:  # few rows may pass: score just those, exactly
            for wanted in (limit + SPARE_CANDIDATES, len(few)):
                passing = self._passing(kind, scope, self._search(index, query, wanted, few),
                                        filters)
                if len(passing) >= limit or wanted >= len(few):
                    return passing[:limit]
        # A few spare candidates usually survive the filters (expiry, type); checking 5x
        # the limit every time cost more than the graph search.
        wanted = limit + SPARE_CANDIDATES
        for _ in range(2):
            candidates = self._search(index, query, wanted)
            passing = self._passing(kind, scope, candidates, filters)
            relevant = sum(1 for _, score in candidates if score > 0)
            if len(passing) >= min(limit, relevant) or len(index) <= len(candidates):
                return passing[:limit]
            # Ask again for as many as the share that passed says are needed.
            wanted = min(MAX_CANDIDATES, max(limit * 5, 2 * limit * len(candidates)
                                             // max(1, len(passing))))
        # Filters removed too many: score only the rows that pass them.
        allowed = self._allowed_keys(kind, scope, filters)
        return self._passing(kind, scope, self._search(index, query, limit, allowed),
                             filters)[:limit]

    def vector_scores(
        self, scope: Scope, kind: str, query: Vectors, keys: Sequence[int]
    ) -> list[Scored]:
        if not keys:
            return []
        index = self._fresh_index(scope, kind, int(query.shape[0]))
        # (The scope's index holds only the scope's rows.)
        return [(key, min(1.0, max(0.0, score)))
                for key, score in self._search(index, query, len(keys), keys)]

    def wait_for_vector_index(
        self, scope: Scope, kind: str, dim: int, timeout: float | None = None
    ) -> bool:
        """Load the scope's vectors and wait for its HNSW graph (built in the
        background on first search); True if searches use the graph. For benchmarks
        and warm-up: searches never need to call it."""
        index = self._fresh_index(scope, kind, dim)
        with self._index_lock:
            if index.graph_ready():
                return True
        index.wait_for_build(timeout)  # without the lock: searches go on meanwhile
        with self._index_lock:
            return index.graph_ready()

    def _search(self, index: VectorIndex, query: Vectors, k: int,
                allowed: Iterable[int] | None = None) -> list[tuple[int, float]]:
        """``index.search`` under the indexes' lock, which only the index's own work
        holds: the database's parts of a search run beside other threads' searches."""
        with self._index_lock:
            return index.search(query, k, allowed)

    def persist_indexes(self) -> None:
        with self._index_lock:
            for index in self._indexes.values():
                index.persist()

    def _recently(self, key: Hashable, read: Callable[[], T]) -> T:
        """``read()``, or what it gave (or is about to give, on another thread) for
        ``key`` less than ``FRESH_FOR`` ago if this process wrote nothing since: a
        retrieval asks the same of the store for its keyword and vector halves, which
        run side by side, and under several filters. (Other processes' writes may be
        seen ``FRESH_FOR`` later, as their vectors are.)"""
        generation, now = self._write_generation, time.monotonic()
        mine: Future[T] = Future()
        with self._recent_lock:
            recent = self._recent_reads.get(key)
            if recent is not None and recent[0] == generation and now - recent[1] < FRESH_FOR:
                shared: Future[Any] | None = recent[2]
            else:
                shared = None
                if len(self._recent_reads) >= RECENT_READS:
                    self._recent_reads.clear()
                self._recent_reads[key] = (generation, now, mine)
        if shared is not None:
            return shared.result()  # type: ignore[no-any-return]
        try:
            value = read()
        except BaseException as exc:
            mine.set_exception(exc)  # (those waiting on it fail alike; the next reads)
            with self._recent_lock:
                if self._recent_reads.get(key, (0, 0.0, None))[2] is mine:
                    del self._recent_reads[key]
            raise
        mine.set_result(value)
        return value

    def _few_allowed(self, kind: str, scope: Scope, filters: SearchFilters
                     ) -> list[int] | None:
        """``_roughly_allowed`` for narrowing filters, unless the same filters left more
        than ``EXACT_ALLOWED`` rows of the scope less than ``MANY_FOR`` seconds ago:
        finding that out again cost PostgreSQL more than the rest of the search."""
        if not filters.narrowing():
            return None
        key, now = (kind, scope, replace(filters, now=None)), time.monotonic()
        with self._index_lock:
            if now - self._many.get(key, -MANY_FOR) < MANY_FOR:
                return None
        few = self._recently(("allowed", *key),
                             lambda: self._roughly_allowed(kind, scope, filters))
        if few is None:
            with self._index_lock:
                if len(self._many) >= MANY_REMEMBERED:
                    self._many.clear()
                self._many[key] = now
        return few

    # -- keeping the indexes current ----------------------------------------------
    def _fresh_index(self, scope: Scope, kind: str, dim: int) -> VectorIndex:
        """The scope's index with every row committed before this call, or before a
        look less than ``FRESH_FOR`` ago (a search asks twice; a row handed over
        meanwhile may be newer than ``latest``: nothing is read twice)."""
        slot, started = (kind, scope.tenant, scope.agent), time.monotonic()
        # (The look is under the lock: a write's ``_hand_over`` cannot come between it
        # and ``checked_at``, so its rows are never left unseen for ``FRESH_FOR``.)
        with self._index_lock:
            index = self._indexes.get(slot)
            if index is not None:
                self._indexes.move_to_end(slot)
                if index.dim == dim and started - index.checked_at < FRESH_FOR:
                    return index
            if index is None or index.dim != dim:
                index = self._indexes[slot] = VectorIndex(dim, self._ann_path(kind, scope))
            latest = self._latest_vec_seq(kind, scope)
            if latest is not None and latest > index.max_seq:
                index.update(self._vector_rows(kind, scope, index.max_seq))
                self._evict()
            index.checked_at = started
        return index

    def vector_memory(self) -> tuple[int, int | None]:
        with self._index_lock:
            return self._held(), self._vector_budget

    def _held(self) -> int:
        """Bytes of vectors the loaded indexes hold (under the indexes' lock)."""
        return sum(index.nbytes for index in self._indexes.values())

    def _evict(self) -> None:
        """Drop the indexes searched least recently while the vectors of all take more
        than the budget; never the last one searched, nor one whose graph is being
        built (``close`` joins those). SQLite's graphs are saved first: reloading the
        scope then costs reading its vectors, not building them again."""
        if self._vector_budget is None:
            return
        held = self._held()
        for slot, index in list(self._indexes.items())[:-1]:
            if held <= self._vector_budget:
                return
            if not index.building():
                index.persist()
                del self._indexes[slot]
                held -= index.nbytes

    def _loaded_index(self, kind: str, scope: Scope) -> VectorIndex | None:
        return self._indexes.get((kind, scope.tenant, scope.agent))

    def _hand_over(self, scope: Scope, kind: str, before: int,
                   written: Sequence[tuple[int, int]], vectors: Vectors) -> None:
        """Give the scope's loaded vector index the rows (key, vec_seq) a write of this
        process just committed, numbered from ``before`` + 1 in the order of
        ``vectors``, so that no search reads them back from the database; unless the
        index lacks rows committed before them (another process's, say): their
        ``vec_seq`` are lower, so the next search reads them all."""
        with self._index_lock:
            index = self._loaded_index(kind, scope)
            if index is None:
                return
            if not written or index.max_seq != before or index.dim != vectors.shape[1]:
                index.checked_at = -FRESH_FOR  # (loaded since the write began?) read them
                return
            keys, seqs = np.array(written, dtype=np.int64).T
            index.update_vectors(keys, np.ascontiguousarray(vectors[seqs - before - 1],
                                                            dtype=np.float32), seqs)

    def _forget_vectors(self, scope: Scope, kinds: Iterable[str]) -> None:
        """Drop the scope's vector indexes of ``kinds`` and their saved graphs: a graph
        keeps every vector it was given, deleted rows' too. The next search rebuilds
        them from the database."""
        with self._index_lock:
            for kind in kinds:
                index = self._indexes.pop((kind, scope.tenant, scope.agent), None)
                if index is not None:
                    index.wait_for_build()  # a build in progress would save its graph
                path = self._ann_path(kind, scope)
                if path is not None and path.parent.exists():
                    with graph_lock(path):
                        remove_graphs(path)
                    path.with_suffix(".lock").unlink(missing_ok=True)
