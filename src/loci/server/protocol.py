"""The HTTP protocol every Loci server process runs: uvicorn's httptools protocol with
a deadline for request headers, and room made for complete requests.

uvicorn closes a connection that stays idle between requests (``timeout_keep_alive``)
but waits for ever on one that sends its headers a byte at a time: a few hundred such
clients hold as many descriptors. Here a connection whose request headers are not
complete ``HEADER_SECONDS`` after it opened, or after the request's first byte, is
closed.

A deadline alone does not keep slots free: clients that reopen as soon as they are
closed hold as many connections as there are of them, and uvicorn answers 503 to any
request that arrives while ``limit_concurrency`` connections are open. So when a
request's headers are complete and the connections are at that limit, the ones that
have waited longest for their own headers are closed to make room: a request that
came whole is served before connections that have not sent one, which nothing is lost
by closing.
"""

from __future__ import annotations

import asyncio
import time

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

#: Seconds a client gets to send a request's headers.
HEADER_SECONDS = 10.0


class TimedHttpTools(HttpToolsProtocol):
    """``HttpToolsProtocol`` that closes connections whose headers come too slowly."""

    _header_timer: asyncio.TimerHandle | None = None
    #: Since when this connection waits for a request's headers (None: not waiting).
    waiting_since: float | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_header_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._start_header_timer()

    def on_headers_complete(self) -> None:
        self._stop_header_timer()
        self._make_room()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def _start_header_timer(self) -> None:
        self._stop_header_timer()
        self._header_timer = self.loop.call_later(HEADER_SECONDS, self._headers_late)
        self.waiting_since = time.monotonic()

    def _stop_header_timer(self) -> None:
        self.waiting_since = None
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _make_room(self) -> None:
        """Close the connections waiting longest for their headers until this request
        fits under ``limit_concurrency`` (those it finds, at most)."""
        limit = self.limit_concurrency
        if limit is None or len(self.connections) < limit:
            return
        waiting = sorted((c for c in self.connections
                          if isinstance(c, TimedHttpTools) and c.waiting_since is not None),
                         key=lambda c: c.waiting_since or 0.0)
        for connection in waiting[:len(self.connections) - limit + 1]:
            connection.evict()

    def evict(self) -> None:
        """Close this connection, still without a request's headers, at once; it stops
        counting against the limit now, not when the loop learns it is closed."""
        self._stop_header_timer()
        self.connections.discard(self)
        self.transport.close()

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.cycle is None or self.cycle.response_complete:  # no request is running
            self.transport.close()
