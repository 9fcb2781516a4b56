"""JSONRoute writes the same JSON as FastAPI's own encoder, through orjson."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.encoders import jsonable_encoder
from fastapi.testclient import TestClient
from pydantic import BaseModel
from starlette.responses import Response

from loci.server.routing import JSONRoute, json_response
from tests.server.conftest import LOCAL


class Inner(BaseModel):
    when: datetime
    names: list[str]


@dataclass(frozen=True)
class Outer:
    id: str
    at: datetime
    tags: tuple[str, ...]
    score: float
    extra: dict[str, object]


VALUE = [Outer("m1", datetime(2026, 11, 22, 3, 4, 5, 678_901, tzinfo=UTC), ("a", "b"), 0.25,
               {"path": Path("/kb/x.md"), "set": frozenset({"only"}), "none": None,
                "model": Inner(when=datetime(2026, 1, 2, tzinfo=UTC), names=["x"]),
                "counts": {1: "one"}})]


def test_json_response_matches_jsonable_encoder() -> None:
    assert json.loads(json_response(VALUE).body) == json.loads(
        json.dumps(jsonable_encoder(VALUE)))


def test_json_response_refuses_what_it_cannot_write() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        json_response({"x": object()})


def test_routes_keep_their_status_and_their_own_responses() -> None:
    router = APIRouter(route_class=JSONRoute)

    @router.post("/made", status_code=201)
    def made() -> list[Outer]:
        return VALUE

    @router.get("/async")
    async def in_loop() -> dict[str, datetime]:
        return {"at": VALUE[0].at}

    @router.get("/plain")
    def plain() -> Response:
        return json_response({"kept": True}, 202)

    app = FastAPI()
    app.include_router(router)
    with TestClient(app, base_url=LOCAL) as client:
        created = client.post("/made")
        assert created.status_code == 201
        assert created.headers["content-type"] == "application/json"
        assert created.json()[0]["at"] == "2026-11-22T03:04:05.678901+00:00"
        assert created.json()[0]["tags"] == ["a", "b"]
        assert client.get("/async").json() == {"at": "2026-11-22T03:04:05.678901+00:00"}
        kept = client.get("/plain")
        assert kept.status_code == 202 and kept.json() == {"kept": True}


def test_a_serving_app_exempts_its_start_up_objects_from_gc(home: Path) -> None:
    import gc

    from loci import load_settings
    from loci.server import create_app

    db = f"sqlite:///{home / 'loci.db'}"
    try:
        with TestClient(create_app(load_settings(store=db)), base_url=LOCAL) as client:
            assert client.get("/api/health").status_code == 200
            assert gc.get_freeze_count() == 0  # a library or test app leaves gc alone
        with TestClient(create_app(load_settings(store=db), serving=True),
                        base_url=LOCAL) as client:
            assert client.get("/api/health").status_code == 200
            assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()


def test_sqlite_searches_run_on_the_event_loop_unless_the_store_is_busy(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import threading
    import time

    import httpx

    from loci import Loci, load_settings
    from loci.server import create_app

    running, most, threads = 0, 0, set()
    lock = threading.Lock()

    def slow_search(self: Loci, *args: object, **kwargs: object) -> list[object]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            threads.add(threading.current_thread())
        time.sleep(0.05)
        with lock:
            running -= 1
        return []

    monkeypatch.setattr(Loci, "memory_search", slow_search)
    app = create_app(load_settings(store=f"sqlite:///{home / 'loci.db'}"))

    async def searches() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=LOCAL) as client:
            answers = await asyncio.gather(*(
                client.post("/api/search", json={"query": f"q{i}"}) for i in range(6)))
        return [a.status_code for a in answers]

    # The store is free: one search at a time, on the event loop's thread.
    assert asyncio.run(searches()) == [200] * 6
    assert most == 1 and threads == {threading.main_thread()}
    # Another thread holds the store (a long write): searches go to at most two
    # threads rather than stall the event loop.
    store_lock = app.state.hub.runtime.local_lock()
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        with store_lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=writer)
    holder.start()
    held.wait(10)
    most, threads = 0, set()
    try:
        assert asyncio.run(searches()) == [200] * 6
    finally:
        release.set()
        holder.join()
    assert most == 2 and threading.main_thread() not in threads
    app.state.hub.close()


def test_fastapi_telemetry_stays_off(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from loci import load_settings
    from loci.server import create_app

    monkeypatch.setenv("FASTAPI_OTEL_AUTO_CONFIGURE", "true")
    app = create_app(load_settings(store=f"sqlite:///{home / 'loci.db'}"))
    try:
        assert app._telemetry["auto_configure"] is False  # type: ignore[attr-defined]
        assert not app._native_telemetry.enabled()  # type: ignore[attr-defined]
    finally:
        app.state.hub.close()


def test_searches_that_wait_on_a_network_embedder_take_threads(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import threading

    import httpx

    from loci import Loci, load_settings
    from loci.server import create_app

    threads = set()

    def search(self: Loci, *args: object, **kwargs: object) -> list[object]:
        threads.add(threading.current_thread())
        return []

    monkeypatch.setattr(Loci, "memory_search", search)
    settings = load_settings(store=f"sqlite:///{home / 'loci.db'}", embedding_provider="openai",
                             embedding_model="m", embedding_base_url="http://127.0.0.1:9/v1")
    app = create_app(settings)

    async def one() -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=LOCAL) as client:
            return (await client.post("/api/search", json={"query": "q"})).status_code

    assert asyncio.run(one()) == 200  # the event loop runs on the main thread
    assert threads and threading.main_thread() not in threads
    app.state.hub.close()
