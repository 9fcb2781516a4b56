"""Shared server fixtures: real uvicorn servers on free loopback ports, in threads.

``live_server(app)`` starts ``app`` (lifespan included) and returns its base URL,
``http://127.0.0.1:<port>``; every server a test started is stopped, and its thread
joined, when the test ends. Outside a test's own fixtures (a module-scoped fixture, a
server for one block) ``with LiveServer(app) as server:`` serves ``app`` at
``server.url``. ``client`` calls the app in process, over the store ``db``; ``page`` is
a fresh page of Debian's headless Chromium (``browser``, one per module) for the
dashboard's tests.
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import TracebackType

import pytest
import uvicorn
from fastapi.testclient import TestClient
from playwright.sync_api import Browser, Page, expect, sync_playwright
from starlette.types import ASGIApp

from loci.server import create_app
from loci.server.hub import Hub
from loci.server.workers import UVICORN_OPTIONS
from tests.conftest import FakeClock, clock_for, settings_for

#: In-process clients call the app as a local program would (open mode answers
#: loopback host names only).
LOCAL = "http://127.0.0.1"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
# Generous: these machines are shared, and with half the CPU stolen by the host a click
# in Chromium took over 5 s (fresh-clone run, session 4).
TIMEOUT_MS = 30_000
expect.set_options(timeout=TIMEOUT_MS)


@contextmanager
def serving(app: ASGIApp) -> Iterator[str]:
    """``app`` served by uvicorn (as ``loci serve`` runs it) on a free loopback port in a
    thread, for as long as the block lasts; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # As `loci serve` runs it (its HTTP protocol and limits included).
    config = uvicorn.Config(app, lifespan="on", ws="none", **UVICORN_OPTIONS)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                              name=f"live-server-{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        assert not thread.is_alive(), "a test server did not stop"


class LiveServer:
    """Apps served by ``serving`` until the ``with`` block (or the test) ends:
    ``LiveServer(app)`` serves ``app`` at ``.url`` from the block's start; calling the
    instance serves one more app and returns its base URL."""

    def __init__(self, app: ASGIApp | None = None) -> None:
        self._first = app
        self._running = ExitStack()
        self.url = ""

    def __call__(self, app: ASGIApp) -> str:
        return self._running.enter_context(serving(app))

    def __enter__(self) -> LiveServer:
        if self._first is not None:
            self.url = self(self._first)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._running.close()


@pytest.fixture
def live_server() -> Iterator[LiveServer]:
    with LiveServer() as servers:
        yield servers


@pytest.fixture
def client(request: pytest.FixtureRequest, db: str, clock: FakeClock) -> Iterator[TestClient]:
    """The app over ``db`` (its lifespan running), called in process from loopback; the
    ``loci_settings`` and ``real_clock`` markers apply."""
    app = create_app(settings_for(request, store=db), clock=clock_for(request, clock))
    with TestClient(app, base_url=LOCAL) as running:
        yield running


def chromium_path(default: str = "/usr/bin/chromium") -> str:
    """Debian's Chromium; a missing browser fails the tests (it never skips them)."""
    path = shutil.which("chromium") or default
    if not Path(path).exists():
        pytest.fail("Chromium is missing: `make browser` installs Debian's chromium")
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_path()
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    yield page
    context.close()


def make_key(hub: Hub, tenant: str) -> str:
    """A fresh API key for ``tenant`` (the hub re-checks for keys at once)."""
    _, key = hub.runtime.create_key(tenant)
    hub._keys_checked = 0.0  # keys_required() caches its answer for a few seconds
    return key
