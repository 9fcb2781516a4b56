"""Serving from several processes on one port (``loci serve --workers N``).

On Linux each worker listens on its own socket bound with ``SO_REUSEPORT``, and the
kernel spreads new connections over the workers. With one shared listening socket (how
uvicorn's ``--workers`` does it) the worker that wakes first accepts every pending
connection: 16 clients connecting at once all landed on one of two workers, which left
the other core idle (search: 154 against 312 req/s, benchmarks/server_load.py). Other
systems share the parent's socket.

The parent only supervises: it replaces a worker that dies once started, stops
everything if one dies while starting (the same failure would recur), and stops the
workers on SIGINT or SIGTERM.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass, replace
from multiprocessing.context import SpawnProcess
from multiprocessing.synchronize import Event as EventType
from types import FrameType

from loci.errors import ConfigError
from loci.settings import Settings

log = logging.getLogger("loci.server")
#: How long stopping workers get before they are killed.
STOP_SECONDS = 10.0
_spawn = multiprocessing.get_context("spawn")
multiprocessing.allow_connection_pickling()  # sockets reach spawned workers


@dataclass(frozen=True)
class Listener:
    """Where workers accept connections: their own ``SO_REUSEPORT`` sockets on
    ``host:port`` (``shared`` None), or the parent's one ``shared`` socket."""

    host: str
    port: int
    shared: socket.socket | None

    def socket(self) -> socket.socket:
        """The listening socket for one worker."""
        if self.shared is not None:
            return self.shared
        return bind(self.host, self.port, reuse_port=True, listen=True)


def bind(host: str, port: int, *, reuse_port: bool, listen: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        if listen:
            sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.set_inheritable(True)
    return sock


def listener(host: str, port: int, *, balanced: bool | None = None) -> tuple[Listener,
                                                                             socket.socket]:
    """The workers' :class:`Listener` and the socket that holds the port for the
    parent (bound, so that port 0 picks one port for every worker; listening only when
    shared). ``balanced`` defaults to "on Linux", where ``SO_REUSEPORT`` balances."""
    if balanced is None:
        balanced = sys.platform.startswith("linux")
    held = bind(host, port, reuse_port=balanced, listen=not balanced)
    chosen = int(held.getsockname()[1])
    return Listener(host, chosen, None if balanced else held), held


def worker_settings(settings: Settings, workers: int) -> Settings:
    """What each of ``workers`` processes runs with. N processes each running the local
    model on every core would contend (a query on 2 threads costs ~25% more CPU than on
    1, measured on 2 cores), so each gets its share of the cores."""
    if settings.embedding_provider != "local" or settings.embedding_threads:
        return settings
    return replace(settings, embedding_threads=max(1, (os.cpu_count() or 1) // workers))


def run_worker(settings: Settings, where: Listener, log_level: str,
               started: EventType) -> None:
    """A worker process: the app over ``settings``, served on ``where``; ``started``
    is set once the app and its socket exist (what fails at start fails there)."""
    import uvicorn

    from loci.server.app import create_app

    _die_with_parent()
    config = uvicorn.Config(create_app(settings, serving=True), host=where.host,
                            port=where.port, log_level=log_level, server_header=False)
    sockets = [where.socket()]
    started.set()
    uvicorn.Server(config).run(sockets=sockets)


def _die_with_parent() -> None:
    """On Linux, have the kernel send SIGTERM to this worker when the supervisor dies,
    even by SIGKILL: an orphaned worker would keep serving the port."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    parent = multiprocessing.parent_process()
    if parent is not None and not parent.is_alive():  # died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


class Supervisor:
    """Starts ``count`` workers and keeps them running until a stop signal."""

    def __init__(self, settings: Settings, where: Listener, count: int,
                 log_level: str = "warning") -> None:
        self.args = (worker_settings(settings, count), where, log_level)
        self.count = count
        self.workers: list[tuple[SpawnProcess, EventType]] = []
        self.stopping = False
        self.failed = False

    def run(self) -> int:
        """Serve until SIGINT or SIGTERM; the exit status (1 if a worker could not
        start)."""
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGINT,
                                                                      signal.SIGTERM)}
        try:
            self.workers = [self._start() for _ in range(self.count)]
            while not self.stopping:
                time.sleep(0.2)
                self._replace_dead()
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 1 if self.failed else 0

    def _start(self) -> tuple[SpawnProcess, EventType]:
        started = _spawn.Event()
        process = _spawn.Process(target=run_worker, args=(*self.args, started), daemon=True)
        process.start()
        return process, started

    def _replace_dead(self) -> None:
        for i, (process, started) in enumerate(self.workers):
            if process.is_alive() or self.stopping:
                continue
            if not started.is_set():
                log.error("worker %s exited with %s while starting; stopping",
                          process.pid, process.exitcode)
                self.failed = self.stopping = True
                return
            log.warning("worker %s exited with %s; starting another", process.pid,
                        process.exitcode)
            self.workers[i] = self._start()

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def _stop_all(self) -> None:
        for process, _ in self.workers:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + STOP_SECONDS
        for process, _ in self.workers:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()
