"""One error shape for every route: ``{"error": {"type": ..., "message": ...}}``, and
Anthropic's for its face (``/v1/messages``: ``{"type": "error", "error": {"type":
"invalid_request_error", "message": ...}}``), which its clients read.

Loci's own errors carry their HTTP status (``LociError.http_status``); FastAPI's
validation errors become 422 with the first problem spelled out; unknown routes 404.
An unexpected exception is a 500 whose body says nothing internal.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import Send

from loci import LociError

log = logging.getLogger("loci.server")


def error_response(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)


async def send_error(send: Send, status: int, kind: str, message: str,
                     headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer with the error shape from ASGI middleware, before any route runs
    (``headers`` added: ``connection: close`` for a request whose body is unread)."""
    response = error_response(status, kind, message)
    await send({"type": "http.response.start", "status": status,
                "headers": response.raw_headers + (headers or [])})
    await send({"type": "http.response.body", "body": response.body})


#: Anthropic's error types by status.
_ANTHROPIC_TYPES = {401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 413: "request_too_large",
                    429: "rate_limit_error", 503: "overloaded_error"}


def face_error(request: Request, status: int, kind: str, message: str) -> JSONResponse:
    """The error in the shape of the API the route speaks."""
    if request.url.path.startswith("/v1/messages"):
        anthropic = _ANTHROPIC_TYPES.get(status) or (
            "api_error" if status >= 500 else "invalid_request_error")
        return JSONResponse({"type": "error", "error": {"type": anthropic,
                                                        "message": message}},
                            status_code=status)
    return error_response(status, kind, message)


async def _loci_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, LociError)
    return face_error(request, exc.http_status, type(exc).__name__, str(exc))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not kind.endswith("json") and any(
            tuple(e.get("loc", ()))[:1] == ("body",) for e in exc.errors()):
        # A body sent as a form (curl -d's default) or without a type is no JSON object.
        return face_error(request, 415, "ValidationError",
                          f"send the body as JSON with Content-Type: application/json "
                          f"(got {kind or 'no Content-Type'})")
    problems = []
    for error in exc.errors()[:5]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
    return face_error(request, 422, "ValidationError",
                      "; ".join(problems) or "invalid request")


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    return face_error(request, exc.status_code, "HTTPError", str(exc.detail))


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error", exc_info=exc)
    return face_error(request, 500, "InternalError", "internal error; see the server log")


def install(app: FastAPI) -> None:
    app.add_exception_handler(LociError, _loci_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
