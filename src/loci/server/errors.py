"""One error shape for every route: ``{"error": {"type": ..., "message": ...}}``.

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

from loci.errors import LociError

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


async def _loci_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, LociError)
    return error_response(exc.http_status, type(exc).__name__, str(exc))


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = []
    for error in exc.errors()[:5]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
    return error_response(422, "ValidationError", "; ".join(problems) or "invalid request")


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, "HTTPError", str(exc.detail))


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error", exc_info=exc)
    return error_response(500, "InternalError", "internal error; see the server log")


def install(app: FastAPI) -> None:
    app.add_exception_handler(LociError, _loci_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
