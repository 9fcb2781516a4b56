"""Checkpointing the write-ahead log off the writers' path.

SQLite's automatic checkpoint runs inside the commit that crosses its threshold (1,000
pages: about every 70 single-event writes here), so one write in seventy waited ~10 ms
for it. The store turns it off and this thread checkpoints instead, on its own
connection: a ``PASSIVE`` checkpoint copies what it can from the log into the database
without blocking the writers or the readers, at most every ``INTERVAL`` seconds while
writes come in. The log restarts from its beginning once a checkpoint has caught up.
Once no write came for ``IDLE_SECONDS``, it calls the store's ``on_idle`` (which gives
back the page caches' memory), once per quiet spell.
"""

from __future__ import annotations

import atexit
import logging
import sqlite3
import threading
from collections.abc import Callable

log = logging.getLogger("loci.store")

#: Seconds between checkpoints while writes come in.
INTERVAL = 0.5
#: Seconds without writes after which the store gives back memory it can (``on_idle``).
IDLE_SECONDS = 10.0
_RUNNING: set[Checkpointer] = set()


@atexit.register
def _stop_all() -> None:
    for checkpointer in list(_RUNNING):
        checkpointer.close()


class Checkpointer:
    """A thread that checkpoints ``path``'s log after writes (``poke``)."""

    def __init__(self, path: str, on_idle: Callable[[], None] = lambda: None) -> None:
        self._path = path
        self._on_idle = on_idle
        self._written = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def poke(self) -> None:
        """A write committed: checkpoint soon (starting the thread on first use)."""
        self._written.set()
        if self._thread is None:
            with self._lock:
                if self._thread is None and not self._stop.is_set():
                    self._thread = threading.Thread(target=self._run, daemon=True,
                                                    name="loci-checkpoint")
                    _RUNNING.add(self)
                    self._thread.start()

    def close(self) -> None:
        """Stop the thread (the store's own close checkpoints what is left)."""
        self._stop.set()
        self._written.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(30)
        _RUNNING.discard(self)

    def _run(self) -> None:
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False,
                             timeout=30.0)
        db.execute("PRAGMA secure_delete=ON")  # as the store's own connection
        try:
            while not self._stop.is_set():
                if not self._written.wait(IDLE_SECONDS):
                    self._idle()
                    self._written.wait()
                self._written.clear()
                if self._stop.wait(INTERVAL):
                    return
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:  # busy or gone: the next write tries again
                    log.debug("checkpoint skipped: %s", exc)
        finally:
            db.close()

    def _idle(self) -> None:
        if self._stop.is_set():
            return
        try:
            self._on_idle()
        except Exception:  # memory not given back is no reason to stop checkpointing
            log.exception("giving back memory failed")
