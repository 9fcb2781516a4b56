"""The ASGI application: REST under ``/api``, MCP at ``/mcp``, the OpenAI-compatible
proxy under ``/v1`` and the dashboard at ``/``, all over one :class:`Hub`."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any

import anyio
from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from loci import LociError, Settings, Store, __version__, load_settings
from loci.server import errors
from loci.server.admission import BodyLimit, KeyGate
from loci.server.api_dashboard import router as dashboard_router
from loci.server.api_erasure import router as erasure_router
from loci.server.api_knowledge import router as knowledge_router
from loci.server.api_memory import router as memory_router
from loci.server.api_sessions import router as sessions_router
from loci.server.api_usage import router as usage_router
from loci.server.consolidation import prepare_when_idle
from loci.server.dashboard import mount_dashboard, mount_docs
from loci.server.deps import document_auth
from loci.server.guard import Guard
from loci.server.hub import Hub
from loci.server.proxy import router as proxy_router
from loci.server.proxy_compact import router as compact_router
from loci.server.proxy_messages import router as messages_router
from loci.server.proxy_responses import router as responses_router
from loci.timeutil import Clock, utc_now

log = logging.getLogger(__name__)
#: What ``/mcp`` and ``loci mcp`` say when the ``mcp`` extra is not installed.
MCP_MISSING = ('MCP needs the mcp extra (the mcp package is not installed): '
               'pip install "loci-context[mcp]"')
#: Seconds between two runs of the ``[retention]`` settings.
RETENTION_INTERVAL = 24 * 3600
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


def _mcp(hub: Hub) -> tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[Any]]]:
    """The ``/mcp`` endpoint and the lifespan its session manager needs (made anew for
    each run of the app's); without the ``mcp`` extra, an endpoint that says how to
    install it."""
    try:
        from loci.server.mcp import build_mcp, http_app
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("mcp"):
            raise
        return McpMissing(), nullcontext
    endpoint, sdk_app = http_app(build_mcp(hub), hub)
    return endpoint, lambda: sdk_app.router.lifespan_context(sdk_app)


class McpMissing:
    """``/mcp`` without the extra: 501 and how to install it, whatever the method (an
    ASGI app; a function would be routed as GET only)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await errors.send_error(send, 501, "not_implemented", MCP_MISSING)


def create_app(settings: Settings | None = None, *, store: Store | None = None,
               clock: Clock = utc_now, serving: bool = False) -> FastAPI:
    """The server application over ``store`` (default: the one in ``settings``).
    ``serving``: this process exists to run it (``loci serve``), see ``settle_gc``."""
    hub = Hub(settings or load_settings(), store=store, clock=clock)
    mcp_endpoint, mcp_lifespan = _mcp(hub)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if serving:
            settle_gc()
            if hub.runtime.indexer is not None:  # rows an earlier process left
                hub.runtime.indexer.recover()
        # The MCP session manager's task group lives as long as the app; the runtime,
        # with the proxy's upstream clients, until the hub closes it.
        async with mcp_lifespan(), anyio.create_task_group() as tasks:
            if hub.settings.retention.days > 0:
                tasks.start_soon(daily_retention, hub)
            if hub.settings.server.consolidate_idle > 0:
                tasks.start_soon(prepare_when_idle, hub.runtime,
                                 hub.settings.server.consolidate_idle)
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
    # Outside the body limit: a request that must carry a key is refused before any
    # of its body is read.
    app.add_middleware(KeyGate)
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
