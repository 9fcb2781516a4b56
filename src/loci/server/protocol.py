"""The HTTP protocol every Loci server process runs: uvicorn's httptools protocol with
a deadline for request headers.

uvicorn closes a connection that stays idle between requests (``timeout_keep_alive``)
but waits for ever on one that sends its headers a byte at a time: a few hundred such
clients hold as many descriptors. Here a connection whose request headers are not
complete ``HEADER_SECONDS`` after it opened, or after the request's first byte, is
closed.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

#: Seconds a client gets to send a request's headers.
HEADER_SECONDS = 10.0


class TimedHttpTools(HttpToolsProtocol):
    """``HttpToolsProtocol`` that closes connections whose headers come too slowly."""

    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_header_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._start_header_timer()

    def on_headers_complete(self) -> None:
        self._stop_header_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def _start_header_timer(self) -> None:
        self._stop_header_timer()
        self._header_timer = self.loop.call_later(HEADER_SECONDS, self._headers_late)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.cycle is None or self.cycle.response_complete:  # no request is running
            self.transport.close()
