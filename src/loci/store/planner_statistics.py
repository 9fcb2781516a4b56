"""Planner statistics that keep up with a table that grows (PostgreSQL).

PostgreSQL plans a search from each table's statistics, which only ``ANALYZE``
refreshes. Autovacuum runs it at most once a minute and only past 10% of changed rows,
so right after a conversation or a batch of memories was written the planner still
sees the table as it was (empty, or without vectors) and chose plans that read every
row: a conversation search of 5,000 fresh events took 36 ms instead of 5
(``benchmarks/RESULTS.md``). ``Growth`` counts the rows this process writes to each
table and, once a table has grown by half since its statistics were taken, analyzes
it on a thread of its own: a write never waits for it. (The PostgreSQL store also
vacuums it then: see ``PostgresStore._refresh_statistics``.)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("loci.store.planner_statistics")

#: A table is analyzed once this many rows, or half its analyzed rows, were written.
MIN_ROWS = 500
GROWTH = 0.5


class Growth:
    """Rows written per table since it was last analyzed, and the analyses they call for.

    ``analyzed_rows(table)`` tells how many rows the table's statistics counted (read
    once per table); ``analyze(table)`` runs ``ANALYZE`` on it."""

    def __init__(self, analyzed_rows: Callable[[str], int],
                 analyze: Callable[[str], None]) -> None:
        self._analyzed_rows, self._analyze = analyzed_rows, analyze
        self._lock = threading.Lock()
        self._base: dict[str, int] = {}
        self._written: dict[str, int] = {}
        self._running: threading.Thread | None = None
        self._closed = False

    def wrote(self, table: str, rows: int) -> None:
        """Count ``rows`` written to ``table``; start analyzing it if it has grown enough
        (unless an analysis is under way: a later write starts it then)."""
        if rows <= 0:
            return
        if table not in self._base:  # (two threads may both read it: harmless)
            try:
                self._base[table] = max(0, self._analyzed_rows(table))
            except Exception as exc:  # the write is done: it must not fail for this
                log.warning("cannot read the statistics of %s: %s", table, exc)
                return
        with self._lock:
            written = self._written[table] = self._written.get(table, 0) + rows
            if (self._closed or written < max(MIN_ROWS, GROWTH * self._base[table])
                    or (self._running is not None and self._running.is_alive())):
                return
            self._written[table] = 0
            self._base[table] += written
            self._running = threading.Thread(target=self._run, args=(table,),
                                             name="loci-pg-analyze", daemon=True)
            self._running.start()

    def wait(self, timeout: float = 30.0) -> None:
        """Wait for the analysis under way, if one is."""
        running = self._running
        if running is not None:
            running.join(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Start no more analyses and wait for the one under way (before the pool it
        uses closes)."""
        with self._lock:
            self._closed = True
        self.wait(timeout)

    def _run(self, table: str) -> None:
        try:
            self._analyze(table)
        except Exception as exc:  # statistics are an optimization: searches still work
            log.warning("ANALYZE %s failed: %s", table, exc)
