"""What a request must show before the server reads its body, and how long it may take.

Every open connection holds one of the server's ``limit_concurrency`` slots (uvicorn
answers 503 to everyone else once they are taken), so a client that sends its body a
byte at a time must not hold one for long:

- ``KeyGate``: once API keys are required, a request that carries a body is
  authenticated from its headers first (key, ``X-Loci-User``, ``X-Loci-Agent``); a
  refused one is answered at once and its connection closed, none of its body read. A
  client without a key holds a slot for the time of its headers, no longer.
- ``BodyLimit``: 413 for a body over the limit (declared or streamed), and 408 for one
  that does not arrive within ``BODY_SECONDS`` between two parts or
  ``BODY_DEADLINE`` in all (a per-part timeout alone let a byte every 20 s hold a
  slot for ever).
"""

from __future__ import annotations

import time

import anyio
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from loci import LociError
from loci.server import errors
from loci.server.deps import PRINCIPAL, hub_of, principal_of

#: Seconds a request may take between two parts of its body.
BODY_SECONDS = 30.0
#: Seconds a request may take to send its whole body, from its headers on.
BODY_DEADLINE = 60.0
_CLOSE = [(b"connection", b"close")]


def has_body(headers: dict[bytes, bytes]) -> bool:
    """Whether a request announces a body (a length above 0, or chunks)."""
    length = headers.get(b"content-length")
    if length is not None:
        return length.strip() not in (b"0", b"")
    return b"transfer-encoding" in headers


class KeyGate:
    """Authenticates a request with a body from its headers before the body is read,
    whenever keys are required; the principal is kept for the route (``PRINCIPAL``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and has_body(dict(scope.get("headers", ()))):
            request = Request(scope)
            if hub_of(request).keys_required():
                try:
                    scope[PRINCIPAL] = principal_of(request)
                except LociError as exc:
                    await errors.send_error(send, exc.http_status, type(exc).__name__,
                                            str(exc), headers=_CLOSE)
                    return
        await self.app(scope, receive, send)


class BodyLimit:
    """Answers 413 to bodies over ``limit`` bytes, declared or streamed, before any
    route reads them, and 408 to bodies that come too slowly."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        declared = headers.get(b"content-length")
        deadline = time.monotonic() + BODY_DEADLINE
        if declared is not None:
            if declared.isdigit() and int(declared) > self.limit:
                await self._reject(send)
                return
            await self._timed(scope, receive, send, deadline)
            return
        if b"transfer-encoding" not in headers:  # no length, not chunked: no body
            await self.app(scope, receive, send)
            return
        # Chunked: read the body here, up to the limit, and replay it, so that a route
        # never sees half a body.
        messages: list[Message] = []
        size, more = 0, True
        while more:
            try:
                message = await _part(receive, deadline)
            except TimeoutError:
                await _too_slow(send)
                return
            messages.append(message)
            size += len(message.get("body", b""))
            if size > self.limit:
                await self._reject(send)
                return
            more = message["type"] == "http.request" and message.get("more_body", False)

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _timed(self, scope: Scope, receive: Receive, send: Send,
                     deadline: float) -> None:
        """The app, with the body's deadlines on its reads: a client that announces
        more than it sends gets 408 instead of a wait for ever. The 408 is sent where
        the read fails (a route that parses the body turns any failure into a 400),
        and the route's own answer is dropped."""
        pending, started, late = True, False, False

        async def timed_receive() -> Message:
            nonlocal pending, late
            if not pending:  # the body is in: later calls wait for a disconnect
                return await receive()
            try:
                message = await _part(receive, deadline)
            except TimeoutError:
                if not started and not late:
                    late = True
                    await _too_slow(send)
                raise
            pending = message["type"] == "http.request" and message.get("more_body", False)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            if late:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, timed_receive, watched_send)
        except TimeoutError:
            if not late:
                raise

    async def _reject(self, send: Send) -> None:
        await errors.send_error(send, 413, "PayloadTooLarge", f"request body over "
                                f"{self.limit} bytes (raise [server] max_body in loci.toml)",
                                headers=_CLOSE)


async def _part(receive: Receive, deadline: float) -> Message:
    """The next part of a body, within ``BODY_SECONDS`` and before ``deadline``."""
    with anyio.fail_after(max(0.0, min(BODY_SECONDS, deadline - time.monotonic()))):
        return await receive()


async def _too_slow(send: Send) -> None:
    await errors.send_error(send, 408, "RequestTimeout", "the request body did not "
                            f"arrive within {BODY_SECONDS:g} s a part and "
                            f"{BODY_DEADLINE:g} s in all", headers=_CLOSE)
