"""Routes whose results become JSON through orjson.

FastAPI turns a route's result into JSON through ``jsonable_encoder``, which walks
every dataclass field in Python (``dataclasses.asdict`` deep-copies each one first):
for a search answer of ten hits that cost more than the HTTP stack itself. orjson
writes dataclasses, datetimes, enums and tuples natively, in C. Routes built by
:class:`JSONRoute` return the same JSON, faster; a route that returns a ``Response``
of its own is left alone.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

import orjson
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.responses import Response

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def _default(value: Any) -> Any:
    """What orjson does not write natively, as ``jsonable_encoder`` would write it."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset):
        return list(value)
    if isinstance(value, PurePath):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def json_response(content: Any, status_code: int = 200) -> Response:
    """``content`` as an ``application/json`` response."""
    return Response(orjson.dumps(content, default=_default, option=_OPTIONS),
                    status_code=status_code, media_type="application/json")


def _as_response(result: Any, status_code: int) -> Any:
    return result if isinstance(result, Response) else json_response(result, status_code)


def _serializing(endpoint: Callable[..., Any], status_code: int) -> Callable[..., Any]:
    """``endpoint`` returning a JSON ``Response``; sync stays sync (FastAPI runs it
    in its thread pool) and async stays async."""
    if inspect.iscoroutinefunction(endpoint):
        @functools.wraps(endpoint)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            return _as_response(await endpoint(*args, **kwargs), status_code)
        return run_async

    @functools.wraps(endpoint)
    def run(*args: Any, **kwargs: Any) -> Any:
        return _as_response(endpoint(*args, **kwargs), status_code)
    return run


class JSONRoute(APIRoute):
    """An ``APIRoute`` whose result is written by orjson (see the module docstring)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        status_code = kwargs.get("status_code") or 200
        super().__init__(path, _serializing(endpoint, status_code), **kwargs)
