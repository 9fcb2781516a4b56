"""The ASGI application: REST under ``/api``, MCP at ``/mcp``, the OpenAI-compatible
proxy under ``/v1`` and the dashboard at ``/``, all over one :class:`Hub`."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from loci import LociError, Store, __version__
from loci.server import errors
from loci.server.api_dashboard import router as dashboard_router
from loci.server.api_erasure import router as erasure_router
from loci.server.api_knowledge import router as knowledge_router
from loci.server.api_memory import router as memory_router
from loci.server.api_sessions import router as sessions_router
from loci.server.api_usage import router as usage_router
from loci.server.dashboard import mount_dashboard, mount_docs
from loci.server.deps import document_auth
from loci.server.guard import Guard
from loci.server.hub import Hub
from loci.server.mcp import build_mcp, http_app
from loci.server.proxy import router as proxy_router
from loci.server.proxy_compact import router as compact_router
from loci.server.proxy_messages import router as messages_router
from loci.server.proxy_responses import router as responses_router
from loci.settings import Settings, load_settings
from loci.timeutil import Clock, utc_now

log = logging.getLogger(__name__)
#: Seconds between two runs of the ``[retention]`` settings.
RETENTION_INTERVAL = 24 * 3600
#: Seconds a request may take between two parts of its body.
BODY_SECONDS = 30.0


class BodyLimit:
    """Answers 413 to bodies over ``limit`` bytes, declared or streamed, before any
    route reads them."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        declared = headers.get(b"content-length")
        if declared is not None:
            if declared.isdigit() and int(declared) > self.limit:
                await self._reject(send)
                return
            await self._timed(scope, receive, send)
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
                with anyio.fail_after(BODY_SECONDS):
                    message = await receive()
            except TimeoutError:
                await self._too_slow(send)
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

    async def _timed(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The app, with ``BODY_SECONDS`` at most between two parts of the body: a
        client that announces more than it sends gets 408 instead of a wait for ever."""
        pending, started = True, False

        async def timed_receive() -> Message:
            nonlocal pending
            if not pending:  # the body is in: later calls wait for a disconnect
                return await receive()
            with anyio.fail_after(BODY_SECONDS):
                message = await receive()
            pending = message["type"] == "http.request" and message.get("more_body", False)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, timed_receive, watched_send)
        except TimeoutError:
            if started:
                raise
            await self._too_slow(send)

    async def _too_slow(self, send: Send) -> None:
        await errors.send_error(send, 408, "RequestTimeout", "the request body did not "
                                f"arrive within {BODY_SECONDS:g} s")

    async def _reject(self, send: Send) -> None:
        await errors.send_error(send, 413, "PayloadTooLarge", f"request body over "
                                f"{self.limit} bytes (raise [server] max_body in loci.toml)")


#: FastAPI's OpenTelemetry hooks, off: Loci sends nothing anywhere, even where the
#: environment configures exporters (``FASTAPI_OTEL_AUTO_CONFIGURE``).
NO_TELEMETRY: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False,
                                 "operation_spans": False, "auto_configure": False}


async def daily_retention(hub: Hub) -> None:
    """Apply the ``[retention]`` settings now and then once a day."""
    while True:
        try:
            done = await anyio.to_thread.run_sync(hub.runtime.apply_retention)
            log.info("retention: %s %d sessions", done.action, done.sessions)
        except LociError as exc:
            log.warning("retention failed: %s", exc)
        await anyio.sleep(RETENTION_INTERVAL)


def create_app(settings: Settings | None = None, *, store: Store | None = None,
               clock: Clock = utc_now, serving: bool = False) -> FastAPI:
    """The server application over ``store`` (default: the one in ``settings``).
    ``serving``: this process exists to run it (``loci serve``), see ``settle_gc``."""
    hub = Hub(settings or load_settings(), store=store, clock=clock)
    mcp_endpoint, mcp_app = http_app(build_mcp(hub), hub)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if serving:
            settle_gc()
            if hub.runtime.indexer is not None:  # rows an earlier process left
                hub.runtime.indexer.recover()
        # The MCP session manager's task group lives as long as the app.
        async with mcp_app.router.lifespan_context(mcp_app), anyio.create_task_group() as tasks:
            if hub.settings.retention.days > 0:
                tasks.start_soon(daily_retention, hub)
            yield
            tasks.cancel_scope.cancel()
        hub.close()

    app = FastAPI(title="Loci", version=__version__, lifespan=lifespan,
                  description="Context and memory engine for LLM agents.",
                  telemetry=NO_TELEMETRY, docs_url=None, redoc_url=None)
    app.state.hub = hub
    errors.install(app)

    @app.get("/api/health", tags=["server"])
    async def health() -> dict[str, Any]:
        """Up, its version, the background indexer's lag (rows that wait for their
        vector: keyword search finds them meanwhile), and the vectors held in memory for
        search against their limit (``[search] vector_memory_mb``)."""
        index = hub.runtime.index_status()
        return {"status": "ok", "version": __version__,
                "vectors_pending": index.pending if index else 0,
                "indexing": bool(index and index.indexing),
                "vector_memory_mb": index.memory_mb if index else 0.0,
                "vector_memory_limit_mb": index.memory_limit_mb if index else None}

    # Requests try routes in order, and with FastAPI's included routers each miss costs
    # time: the routers with the busiest routes (search, events, context) go first.
    for router in (memory_router, sessions_router, knowledge_router, erasure_router,
                   usage_router, dashboard_router):
        app.include_router(router, prefix="/api")
    app.include_router(proxy_router, prefix="/v1")
    app.include_router(messages_router, prefix="/v1")
    app.include_router(responses_router, prefix="/v1")
    app.include_router(compact_router, prefix="/v1")
    document_auth(app)

    app.router.routes.append(Route("/mcp", mcp_endpoint, include_in_schema=False))

    mount_docs(app)
    # Last: the dashboard's mount at "/" would shadow any route added after it.
    mount_dashboard(app)
    app.add_middleware(BodyLimit, limit=hub.settings.server.max_body)
    app.add_middleware(Guard, keys_required=hub.keys_required,
                       allowed_hosts=hub.settings.server.allowed_hosts,
                       allowed_origins=hub.settings.server.allowed_origins)
    return app


def settle_gc() -> None:
    """Exempt what exists once the server has started (modules, the app, the store)
    from garbage collection. A full collection walks every tracked object, and the
    objects of start-up made each one long enough to set the p99 latency under load;
    what start-up built lives as long as the process anyway."""
    gc.collect()
    gc.freeze()
