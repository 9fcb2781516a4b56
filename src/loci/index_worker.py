"""The background indexer: writes return without waiting for the embedding model.

A write commits its rows without vectors and pokes the worker (``notify``); the worker
thread embeds every row that waits for a vector, across kinds and scopes, in batches,
until none is left, then sleeps until the next poke. Keyword search serves new rows at
once; their vectors follow. Rows without vectors are rows of the store like any other,
so they survive a crash: the next process that writes, serves or searches embeds
them.

``wait`` returns once a pass over everything that waited at the time of the call is
done (a provider failure ends a pass: the rows wait for the next one). ``close``
finishes the passes this process's writes asked for, then stops the thread after its
current batch (a pass a search asked for, to pick up rows another process left, is not
waited for); at interpreter exit a running worker stops after its current batch, so
that no model thread outlives the interpreter, and what it left waits for the next
process.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable

log = logging.getLogger("loci.indexing")

#: ``drain(stop)`` embeds what waits, checking ``stop()`` between batches; returns how
#: many rows it embedded.
Drain = Callable[[Callable[[], bool]], int]

#: How long a pass waits for more writes before it starts, unless someone waits for it:
#: a burst of single writes is then embedded in one pass instead of one pass each.
GATHER_SECONDS = 0.02
_WORKERS: set[IndexWorker] = set()
_EXITING = threading.Event()


@atexit.register
def _stop_workers(timeout: float = 30.0) -> None:
    _EXITING.set()
    for worker in list(_WORKERS):
        worker.close(timeout=timeout, finish=False)


class IndexWorker:
    """One thread that runs ``drain`` whenever writes ask for it."""

    def __init__(self, drain: Drain) -> None:
        self._drain = drain
        self._changed = threading.Condition()
        self._asked = 0  # passes asked for (one per notify)
        self._written = 0  # the last pass a write asked for
        self._done = 0  # the last pass asked for whose drain has finished
        self._running = False  # a drain is under way
        self._stopping = False
        self._cancelled = False
        self._thread: threading.Thread | None = None
        self._hurry = threading.Event()  # someone waits: start the pass now
        #: Rows embedded since the worker started (for status pages).
        self.embedded = 0

    def notify(self, *, written: bool = True) -> None:
        """Rows wait for vectors (``written`` by this process, or maybe left by another):
        drain again, starting the thread if needed."""
        with self._changed:
            self._asked += 1
            if written:
                self._written = self._asked
            if self._thread is None or not self._thread.is_alive():
                self._stopping = self._cancelled = False
                self._thread = threading.Thread(target=self._run, name="loci-indexer",
                                                daemon=True)
                _WORKERS.add(self)
                self._thread.start()
            self._changed.notify_all()

    def busy(self) -> bool:
        """Whether a pass is under way or asked for."""
        with self._changed:
            return self._running or self._done < self._asked

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every pass asked for so far is done; False on timeout."""
        self._hurry.set()
        with self._changed:
            target = self._asked
            self._changed.wait_for(lambda: self._done >= target or not self._alive(),
                                   timeout)
            return self._done >= target

    def close(self, timeout: float | None = None, *, finish: bool = True) -> None:
        """Stop the thread after its current batch; with ``finish``, first let it end
        the passes this process's writes asked for."""
        self._hurry.set()
        with self._changed:
            if finish:
                self._changed.wait_for(
                    lambda: self._done >= self._written or not self._alive(), timeout)
            self._stopping = self._cancelled = True
            self._changed.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        _WORKERS.discard(self)

    def _alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _stop_now(self) -> bool:
        return self._cancelled or _EXITING.is_set()

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._done < self._asked or self._stopping)
                if self._done >= self._asked or self._stop_now():
                    return
                self._running = True
            self._hurry.wait(GATHER_SECONDS)
            self._hurry.clear()
            with self._changed:
                target = self._asked
            try:
                self.embedded += self._drain(self._stop_now)
            except Exception:
                log.exception("background embedding failed; the rows wait for the next pass")
            finally:
                with self._changed:
                    self._running = False
                    self._done = max(self._done, target)
                    self._changed.notify_all()
