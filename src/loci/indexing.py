"""Keeping the store's vectors in step with its items and its embedding model.

Items are written first, without vectors; the background worker (``index_worker``)
embeds them in batches right after, so writes never wait on the model. If the provider
fails the items stay stored and are embedded on the next pass or by ``loci reindex``. The
store records the model name and dimension it was indexed with: searching with another
model is an :class:`EmbeddingMismatchError` that says to run ``loci reindex``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from loci.embeddings.base import Embedder, Vectors
from loci.embeddings.queries import QueryVectors
from loci.errors import EmbeddingMismatchError, ProviderError, StoreError
from loci.index_worker import IndexWorker
from loci.models import Scope
from loci.store.base import KINDS, Store

log = logging.getLogger("loci.indexing")
META_MODEL = "embedding_model"
META_DIM = "embedding_dim"
BATCH = 256
#: How long a search trusts what it last read of the store's model, and how often it
#: asks the worker to look for items another process left without vectors.
RECHECK_SECONDS = 1.0

#: Called with (items done so far, items in all).
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class IndexStatus:
    """The vector index: the model it was made with, the rows of each kind that wait
    for their vector (the indexer's lag), whether the worker is at it, and the vectors
    this process holds in memory for search and the most it may hold, in MB (None: no
    limit; ``[search] vector_memory_mb``)."""

    model: str | None
    dim: int | None
    unembedded: dict[str, int]
    indexing: bool = False
    memory_mb: float = 0.0
    memory_limit_mb: int | None = None

    @property
    def pending(self) -> int:
        return sum(self.unembedded.values())


class Indexer:
    """Embeds what a store has not embedded yet, with one embedder."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self.queries = QueryVectors(embedder)
        self._recorded: tuple[float, str | None, int | None] | None = None
        self._caught_up = -RECHECK_SECONDS  # when a search last asked the worker to look
        self._lock = threading.Lock()
        #: Held by a reindex for its whole run: the worker's pass waits for it, so the
        #: two never embed the same rows and a reindex counts every row it re-embeds.
        self._reindexing = threading.Lock()
        self.worker = IndexWorker(self._drain_all)

    def recorded_model(self, *, fresh: bool = False) -> tuple[str | None, int | None]:
        """The (model, dimension) the store was indexed with; re-read from the store at
        most every ``RECHECK_SECONDS`` unless ``fresh``."""
        cached = self._recorded
        if not fresh and cached is not None and time.monotonic() - cached[0] < RECHECK_SECONDS:
            return cached[1], cached[2]
        model, dim = self.store.get_meta(META_MODEL), self.store.get_meta(META_DIM)
        self._recorded = (time.monotonic(), model, int(dim) if dim else None)
        return self._recorded[1], self._recorded[2]

    def matches(self, *, fresh: bool = True) -> bool:
        """True when the store is unindexed or indexed with this embedder's model
        (searches pass ``fresh=False``; writes always read the store)."""
        model, dim = self.recorded_model(fresh=fresh)
        return model is None or (model == self.embedder.name and dim == self.embedder.dim)

    def check(self) -> None:
        """Raise unless the store's vectors were made by this embedder's model."""
        if not self.matches(fresh=False) and not self.matches():
            model, dim = self.recorded_model()
            raise EmbeddingMismatchError(
                f"the store was indexed with {model} ({dim} dimensions) but the configured "
                f"model is {self.embedder.name} ({self.embedder.dim}); run `loci reindex` "
                "to re-embed everything, or configure the original model"
            )

    def embed_query(self, text: str) -> Vectors:
        """The query's vector (read-only; remembered per text, see ``QueryVectors``)."""
        self.check()
        return self.queries.get(text)

    def catch_up(self) -> None:
        """For searches: at most once per ``RECHECK_SECONDS``, have the worker look for
        rows waiting for vectors (another process's, say; it takes every kind and
        scope). A search never embeds them itself: it must not stall on a backlog."""
        now = time.monotonic()
        with self._lock:
            if now - self._caught_up < RECHECK_SECONDS:
                return
            self._caught_up = now
        self.recover()

    def recover(self) -> None:
        """Have the worker embed rows left without vectors (by a process that died,
        say); unlike a write's, ``close`` does not wait for this pass."""
        self.worker.notify(written=False)

    def embed_later(self) -> None:
        """Have the background worker embed what writes left without vectors."""
        self.worker.notify()

    def wait_indexed(self, timeout: float | None = None) -> bool:
        """Block until the worker has embedded what waited when called, whoever wrote
        it: this process's writes, and rows another process left without vectors (a
        fresh process has asked for no pass yet; one is asked for here). False on
        timeout."""
        self.recover()
        return self.worker.wait(timeout)

    def close(self) -> None:
        """Finish the passes asked for, then stop the worker."""
        self.worker.close()

    def embed_pending(self, kind: str, scope: Scope | None = None) -> int:
        """Embed the not-yet-embedded items of ``kind`` now, in this thread; a provider
        failure is logged and leaves the rest for later. Returns how many were
        embedded."""
        if not self.matches():
            return 0
        try:
            return self._drain(kind, scope, None)
        except ProviderError as exc:
            log.warning("embedding deferred: %s", exc)
            return 0

    def reindex(self, progress: Progress | None = None) -> int:
        """Forget all vectors, record this embedder's model, and embed everything."""
        with self._reindexing:
            self.store.clear_embeddings()
            self._record_model()
            total = sum(self.store.count_unembedded(kind) for kind in KINDS)
            done = 0

            def advance(count: int) -> None:
                nonlocal done
                done += count
                if progress is not None:
                    progress(done, total)

            advance(0)
            return sum(self._drain(kind, None, advance) for kind in KINDS)

    def _drain_all(self, stop: Callable[[], bool]) -> int:
        """The worker's pass: every kind, every scope, until nothing waits or ``stop``."""
        with self._reindexing:
            if not self.matches():
                return 0
            done = 0
            for kind in KINDS:
                try:
                    done += self._drain(kind, None, None, stop=stop)
                except ProviderError as exc:
                    log.warning("embedding deferred: %s", exc)
            return done

    def status(self) -> IndexStatus:
        model, dim = self.recorded_model()
        held, limit = self.store.vector_memory()
        return IndexStatus(model, dim, {k: self.store.count_unembedded(k) for k in KINDS},
                           self.worker.busy(), round(held / 2**20, 3),
                           None if limit is None else limit >> 20)

    def _drain(
        self, kind: str, scope: Scope | None, progress: Callable[[int], None] | None,
        stop: Callable[[], bool] = lambda: False,
    ) -> int:
        done, previous = 0, None
        while not stop() and (
                items := self.store.unembedded(kind, BATCH, scope)):
            if items == previous:
                raise StoreError(f"the store did not record vectors for {kind} items")
            previous = items
            if self.store.get_meta(META_MODEL) is None:
                self._record_model()
            vectors = self._embed([text for _, _, text in items])
            by_scope: dict[Scope, list[int]] = {}
            for row, (item_scope, _, _) in enumerate(items):
                by_scope.setdefault(item_scope, []).append(row)
            for item_scope, rows in by_scope.items():
                ids = [items[r][1] for r in rows]
                self.store.set_embeddings(item_scope, kind, ids, vectors[rows])
            done += len(items)
            if progress is not None:
                progress(len(items))
        return done

    def _embed(self, texts: list[str]) -> Vectors:
        """Vectors for texts; blank texts get a zero row (nothing to match)."""
        vectors = np.zeros((len(texts), self.embedder.dim), dtype=np.float32)
        present = [i for i, t in enumerate(texts) if t.strip()]
        if present:
            vectors[present] = self.embedder.embed([texts[i] for i in present])
        return vectors

    def _record_model(self) -> None:
        # The dimension first: readers take a missing model for an unindexed store, so
        # one that sees the model must also see its dimension.
        self.store.set_meta(META_DIM, str(self.embedder.dim))
        self.store.set_meta(META_MODEL, self.embedder.name)
        self._recorded = None

    def vectors_for(self, texts: list[str]) -> Vectors | None:
        """Vectors for items about to be written, or None when the store was indexed
        with another model (the items then wait for ``loci reindex``)."""
        if not self.matches():
            return None
        if self.recorded_model()[0] is None:
            self._record_model()
        return self._embed(texts)
