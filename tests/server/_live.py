"""A real uvicorn server on a free loopback port, in a background thread, for tests that
need a live HTTP server (the dashboard's browser tests)."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

import uvicorn
from starlette.types import ASGIApp


class LiveServer:
    """``with LiveServer(app) as server: server.url``: started on enter, stopped (and
    its thread joined) on exit."""

    def __init__(self, app: ASGIApp) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        # No websockets and no access log: neither is needed, and both add noise.
        config = uvicorn.Config(app, lifespan="on", ws="none", log_level="warning",
                                access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run,
                                        kwargs={"sockets": [self._socket]}, daemon=True)

    def __enter__(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._socket.close()
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._socket.close()
        if self._thread.is_alive():
            raise RuntimeError("the test server did not stop")
