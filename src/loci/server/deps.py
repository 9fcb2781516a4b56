"""FastAPI dependencies: the hub, the caller's principal, and their engine.

Each reads the request's headers itself rather than declaring them as ``Header()``
parameters: FastAPI validates every declared parameter and solves every nested
dependency per request, which cost the search route more CPU than its HTTP stack. The
headers appear in the OpenAPI schema through ``document_auth``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request

from loci import Loci
from loci.server.hub import Hub, Principal


def hub_of(request: Request) -> Hub:
    """The app's hub (a plain function: FastAPI would run a sync dependency in a
    thread, so routes call it rather than depend on it)."""
    hub: Hub = request.app.state.hub
    return hub


#: Where ``admission.KeyGate`` keeps the principal it authenticated in the ASGI scope.
PRINCIPAL = "loci.principal"


def principal_of(request: Request, *, bearer_optional: bool = False) -> Principal:
    """Who sent ``request``: its key as a bearer token or, as Anthropic's clients send
    it, ``x-api-key``. With ``bearer_optional``, a key is ignored while the server is in
    open mode (SDK clients always send one, whatever it holds). A request the key gate
    authenticated before reading its body is not authenticated again."""
    known: Principal | None = request.scope.get(PRINCIPAL)
    if known is not None:
        return known
    hub, headers = hub_of(request), request.headers
    key = headers.get("x-api-key")  # how Anthropic's clients send a key
    authorization = headers.get("authorization") or (f"Bearer {key}" if key else None)
    if authorization and bearer_optional and not hub.keys_required():
        authorization = None
    return hub.authenticate(authorization, headers.get("x-loci-user"),
                            headers.get("x-loci-agent"))


async def get_engine(request: Request) -> AsyncIterator[Loci]:
    """The caller's engine, held for the whole request (``Hub.serving``)."""
    with hub_of(request).serving(principal_of(request)) as engine:
        yield engine


#: The caller's engine, scoped to their tenant and agent: what every route works on.
Engine = Annotated[Loci, Depends(get_engine)]


#: The headers ``principal_of`` reads besides ``Authorization``, as OpenAPI parameters.
_SCOPE_HEADERS = [
    {"name": "X-Loci-User", "in": "header", "required": False, "schema": {"type": "string"},
     "description": "the user (tenant) to act as; open mode only (no API keys exist)"},
    {"name": "X-Loci-Agent", "in": "header", "required": False,
     "schema": {"type": "string"}, "description": "one of the user's agents"},
]


def document_auth(app: FastAPI, prefixes: tuple[str, ...] = ("/api/", "/v1/")) -> None:
    """Declare the bearer key and the scope headers on every operation under
    ``prefixes`` of ``app``'s OpenAPI schema (built once, on first request)."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {})["securitySchemes"] = {
                "apiKey": {"type": "http", "scheme": "bearer",
                           "description": "an API key from `loci keys create`"}}
            for path, operations in schema["paths"].items():
                if path.startswith(prefixes) and path != "/api/health":
                    for operation in operations.values():
                        operation.setdefault("parameters", []).extend(_SCOPE_HEADERS)
                        operation["security"] = [{"apiKey": []}, {}]
        return app.openapi_schema or {}

    app.openapi = openapi  # type: ignore[method-assign]
