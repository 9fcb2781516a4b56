"""Serving from several processes on one port (``loci serve --workers N``).

The parent holds the listening socket, accepts every connection and deals them to the
workers in turn, each over the worker's own Unix socket (``SCM_RIGHTS``, see
``server.dealt``), so that N workers hold their share of the connections, however few
there are. Both alternatives leave clients waiting on one worker while another idles:

- one shared listening socket (uvicorn's ``--workers``): the worker that wakes first
  accepts every pending connection, so a burst of clients lands on one worker
  (``benchmarks/server_load.py``);
- a ``SO_REUSEPORT`` socket per worker: the kernel hashes connections over them, and 8
  keep-alive clients often split unevenly over two workers, with less throughput and a
  higher p99 than an even split.

Where descriptors cannot be passed (Windows), the workers share the parent's socket.
The parent also supervises: it replaces a worker that dies once started, stops
everything if one dies while starting (the same failure would recur), and stops the
workers on SIGINT or SIGTERM.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import selectors
import signal
import socket
import sys
import time
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from multiprocessing.synchronize import Event as EventType
from types import FrameType
from typing import Any

from loci import ConfigError, Settings
from loci.server.protocol import TimedHttpTools

log = logging.getLogger("loci.server")
#: How long stopping workers get before they are killed.
STOP_SECONDS = 10.0
#: How long handing a connection to a worker may block before the next one gets it.
HAND_OVER_SECONDS = 1.0
#: Whether connections can be dealt to workers (Unix sockets pass descriptors).
CAN_DEAL = hasattr(socket, "send_fds")
#: How every Loci server process runs uvicorn. No access log: its lines are info, below
#: the warning level, yet uvicorn gathers each one's fields; no proxy headers: Loci uses
#: no client address, and the middleware would read every request's headers.
#: Past ``limit_concurrency`` open connections and requests, new ones get 503 rather than
#: exhausting file descriptors; an idle keep-alive connection closes after 5 s, and one
#: whose request headers come too slowly too (``server.protocol``).
UVICORN_OPTIONS: dict[str, Any] = {"log_level": "warning", "access_log": False,
                                   "proxy_headers": False, "server_header": False,
                                   "limit_concurrency": 1000, "timeout_keep_alive": 5,
                                   "http": TimedHttpTools}
_spawn = multiprocessing.get_context("spawn")
multiprocessing.allow_connection_pickling()  # sockets reach spawned workers


def listen(host: str, port: int) -> socket.socket:
    """The parent's listening socket on ``host:port`` (port 0 picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    return sock


def worker_settings(settings: Settings, workers: int) -> Settings:
    """What each of ``workers`` processes runs with. N processes each running the local
    model on every core would contend (a query on more threads costs more CPU), so each
    gets its share of the cores."""
    if settings.embedding.provider != "local" or settings.embedding.threads:
        return settings
    return settings.with_overrides(embedding_threads=max(1, (os.cpu_count() or 1) // workers))


def run_worker(settings: Settings, source: socket.socket, dealt: bool, log_level: str,
               started: EventType) -> None:
    """A worker process: the app over ``settings``, serving the connections that
    arrive on ``source`` (the parent's channel if ``dealt``, else the shared listening
    socket); ``started`` is set once the app exists (what fails at start fails there)."""
    import uvicorn

    from loci.server.app import create_app
    from loci.server.dealt import DealtServer

    _die_with_parent()
    config = uvicorn.Config(create_app(settings, serving=True),
                            **{**UVICORN_OPTIONS, "log_level": log_level})
    started.set()
    if dealt:
        DealtServer(config, source).run()
    else:
        uvicorn.Server(config).run(sockets=[source])


def _die_with_parent() -> None:
    """On Linux, have the kernel send SIGTERM to this worker when the supervisor dies,
    even by SIGKILL: an orphan would keep serving the shared socket, or its last dealt
    connections."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    parent = multiprocessing.parent_process()
    if parent is not None and not parent.is_alive():  # died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


@dataclass
class Worker:
    process: SpawnProcess
    started: EventType
    #: The parent's end of the worker's channel (None when the socket is shared).
    channel: socket.socket | None


class Supervisor:
    """Starts ``count`` workers on the listening socket ``sock``, deals them its
    connections (``deal``, where possible) and keeps them running until a stop
    signal."""

    def __init__(self, settings: Settings, sock: socket.socket, count: int,
                 log_level: str = "warning", *, deal: bool = CAN_DEAL) -> None:
        self.settings = worker_settings(settings, count)
        self.sock, self.count, self.log_level, self.deal = sock, count, log_level, deal
        self.workers: list[Worker] = []
        self.stopping = False
        self.failed = False
        self._turn = 0

    def run(self) -> int:
        """Serve until SIGINT or SIGTERM; the exit status (1 if a worker could not
        start)."""
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGINT,
                                                                      signal.SIGTERM)}
        try:
            self.workers = [self._start() for _ in range(self.count)]
            with selectors.DefaultSelector() as ready:
                if self.deal:
                    self.sock.setblocking(False)
                    ready.register(self.sock, selectors.EVENT_READ)
                while not self.stopping:
                    if not self.deal:
                        time.sleep(0.2)
                    elif ready.select(0.2):
                        self._deal()
                    self._replace_dead()
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 1 if self.failed else 0

    def _start(self) -> Worker:
        started = _spawn.Event()
        ours, theirs = socket.socketpair() if self.deal else (None, self.sock)
        process = _spawn.Process(target=run_worker, daemon=True, args=(
            self.settings, theirs, self.deal, self.log_level, started))
        process.start()
        if ours is not None:
            theirs.close()  # the worker has its own copy now
            ours.settimeout(HAND_OVER_SECONDS)
        return Worker(process, started, ours)

    def _deal(self) -> None:
        """Accept what is pending and hand each connection to the next worker."""
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors, say: the client retries
                log.warning("cannot accept a connection: %s", exc)
                return
            with conn:
                if conn.family != socket.AF_UNIX:
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._hand_over(conn)

    def _hand_over(self, conn: socket.socket) -> None:
        for _ in range(len(self.workers)):
            worker = self.workers[self._turn % len(self.workers)]
            self._turn += 1
            if worker.channel is None or not worker.process.is_alive():
                continue
            try:
                socket.send_fds(worker.channel, [b"c"], [conn.fileno()])
                return
            except OSError as exc:  # stuck or gone: the next worker takes it
                log.warning("worker %s did not take a connection: %s",
                            worker.process.pid, exc)
        log.warning("no worker took a connection; it was closed")

    def _replace_dead(self) -> None:
        for i, worker in enumerate(self.workers):
            if worker.process.is_alive() or self.stopping:
                continue
            if not worker.started.is_set():
                log.error("worker %s exited with %s while starting; stopping",
                          worker.process.pid, worker.process.exitcode)
                self.failed = self.stopping = True
                return
            log.warning("worker %s exited with %s; starting another", worker.process.pid,
                        worker.process.exitcode)
            if worker.channel is not None:
                worker.channel.close()
            self.workers[i] = self._start()

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def _stop_all(self) -> None:
        for worker in self.workers:
            if worker.process.is_alive():
                worker.process.terminate()
        deadline = time.monotonic() + STOP_SECONDS
        for worker in self.workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            if worker.channel is not None:
                worker.channel.close()
