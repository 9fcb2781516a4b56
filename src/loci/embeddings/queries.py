"""Query vectors: remembered per text, and optionally computed ahead in a thread.

Recall embeds the incoming message on every compile, and the same text is often
embedded again (a retried compile, the message searched explicitly). ``QueryVectors``
keeps the vectors of the last ``size`` texts. ``prefetch`` starts embedding a text in
a worker thread, so that a model that runs outside the GIL (onnxruntime, an HTTP
provider) works while the compiler builds the other layers; embedders say so with a
true ``overlaps`` attribute. For the others (the pure-Python hash embedder) a thread
would only add a hand-off, so ``prefetch`` does nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor

from loci.embeddings.base import Embedder, Vectors

#: Texts whose vectors are kept.
QUERY_CACHE = 256


class QueryVectors:
    def __init__(self, embedder: Embedder, size: int = QUERY_CACHE) -> None:
        self.embedder = embedder
        self.size = size
        self.overlaps = bool(getattr(embedder, "overlaps", False))
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, Future[Vectors]] = OrderedDict()
        self._pool: ThreadPoolExecutor | None = None

    def prefetch(self, text: str) -> None:
        """Start embedding ``text`` in the background (if the embedder overlaps)."""
        if not self.overlaps:
            return
        with self._lock:
            if text in self._entries:
                self._entries.move_to_end(text)
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="loci-embed")
            self._remember(text, self._pool.submit(self._embed, text))

    def get(self, text: str) -> Vectors:
        """The vector of ``text``: remembered, prefetched, or computed now."""
        with self._lock:
            future = self._entries.get(text)
            if future is not None:
                self._entries.move_to_end(text)
        if future is None:
            future = Future()
            try:
                future.set_result(self._embed(text))
            except BaseException as exc:
                future.set_exception(exc)
            with self._lock:
                self._remember(text, future)
        try:
            return future.result()
        except BaseException:
            with self._lock:  # a failure is not remembered: the next call retries
                if self._entries.get(text) is future:
                    del self._entries[text]
            raise

    def _embed(self, text: str) -> Vectors:
        vector: Vectors = self.embedder.embed([text])[0]
        vector.flags.writeable = False  # shared by every caller of this text
        return vector

    def _remember(self, text: str, future: Future[Vectors]) -> None:
        self._entries[text] = future
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
