"""``loci serve`` as users run it: a real process with uvicorn on a loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port


def wait_until_up(url: str, process: subprocess.Popen[bytes], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited: {process.stderr.read().decode()}")  # type: ignore[union-attr]
        try:
            if httpx.get(f"{url}/api/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("server did not come up")


def serve(home: Path, workers: int) -> tuple[subprocess.Popen[bytes], int]:
    """``loci serve`` on a free loopback port, up and answering."""
    port = free_port()
    env = {**os.environ, "LOCI_HOME": str(home), "LOCI_EMBEDDING_PROVIDER": "hash"}
    process = subprocess.Popen(
        [sys.executable, "-m", "loci", "serve", "--port", str(port), "--workers", str(workers),
         "--store", f"sqlite:///{home / 'loci.db'}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until_up(f"http://127.0.0.1:{port}", process)
    except BaseException:
        stop(process)
        raise
    return process, port


def stop(process: subprocess.Popen[bytes], *, kill: bool = False) -> int:
    """Stop ``loci serve`` (SIGTERM, or SIGKILL) and close its pipes; its exit status."""
    if kill:
        process.kill()
    else:
        process.terminate()
    status = process.wait(timeout=20)
    assert process.stderr is not None and process.stdout is not None
    process.stderr.close()
    process.stdout.close()
    return status


@pytest.mark.parametrize("workers", [1, 2])
def test_loci_serve_runs_the_server(home: Path, workers: int) -> None:
    process, port = serve(home, workers)
    url = f"http://127.0.0.1:{port}"
    try:
        created = httpx.post(f"{url}/api/memories", json={"content": "User likes tides",
                                                          "type": "user_preference"})
        assert created.status_code == 201
        for _ in range(4):  # with two workers, both see the write
            hits = httpx.post(f"{url}/api/search", json={"query": "tides"}).json()
            assert hits[0]["id"] == created.json()["id"]
        assert "swagger" in httpx.get(f"{url}/docs").text.lower()
    finally:
        stop(process)
    assert (home / "loci.db").exists()


def test_workers_share_the_cores_for_the_local_model(home: Path) -> None:
    from loci import Loci, load_settings
    from loci.server.workers import worker_settings

    local = load_settings(store=f"sqlite:///{home / 'a.db'}", embedding_provider="local",
                          memory_mirror=False)
    each = worker_settings(local, workers=os.cpu_count() or 1)
    assert each.embedding.threads == 1 and each.store_url == local.store_url
    # Chosen threads are kept; other providers have no threads to set.
    assert worker_settings(local.with_overrides(embedding_threads=3), 2).embedding.threads == 3
    hashed = local.with_overrides(embedding_provider="hash")
    assert worker_settings(hashed, 2) == hashed
    with Loci(each) as worker:
        assert worker.indexer is not None
        assert worker.indexer.embedder.threads == 1  # type: ignore[attr-defined]


def test_listen_picks_a_port_and_accepts() -> None:
    from loci.server.workers import listen

    with listen("127.0.0.1", 0) as sock:
        port = sock.getsockname()[1]
        assert port != 0
        with socket.create_connection(("127.0.0.1", port)):
            sock.accept()[0].close()


def test_a_port_in_use_is_a_config_error() -> None:
    from loci.errors import ConfigError
    from loci.server.workers import listen

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(ConfigError, match=r"cannot listen on 127\.0\.0\.1"):
            listen("127.0.0.1", taken.getsockname()[1])


def connections_by_process(port: int, pids: list[int]) -> dict[int, int]:
    """How many established connections to ``port`` each of ``pids`` holds (Linux)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == "01":
            inodes.add(fields[9])
    counts = {}
    for pid in pids:
        links = [os.readlink(f) for f in Path(f"/proc/{pid}/fd").iterdir()
                 if f.is_symlink()]
        counts[pid] = sum(link[8:-1] in inodes for link in links if link.startswith("socket:"))
    return counts


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_two_workers_both_take_connections(home: Path) -> None:
    process, port = serve(home, 2)
    try:
        workers = worker_pids(process.pid)
        assert len(workers) == 2
        # Connections opened all at once, as a client's pool does.
        clients = [httpx.Client(base_url=f"http://127.0.0.1:{port}") for _ in range(24)]
        for client in clients:
            assert client.get("/api/health").status_code == 200
        counts = connections_by_process(port, workers)
        for client in clients:
            client.close()
        assert sorted(counts.values()) == [12, 12], counts  # dealt in turn
        # A worker that dies is replaced.
        os.kill(workers[0], 9)
        wait_until_up(f"http://127.0.0.1:{port}", process)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            now = worker_pids(process.pid)
            if len(now) == 2 and workers[0] not in now:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the dead worker was not replaced")
    finally:
        assert stop(process) == 0


def worker_pids(parent: int) -> list[int]:
    """The server processes ``parent`` spawned (not multiprocessing's resource tracker)."""
    found = []
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        stat = _stat(pid)
        if stat is not None and int(stat[1]) == parent and b"spawn_main" in _cmdline(pid):
            found.append(pid)
    return found


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, parent, ...), or
    None once the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.parametrize("deal", [True, False])
def test_a_worker_that_cannot_start_stops_the_server(home: Path, deal: bool) -> None:
    from loci import load_settings
    from loci.server.workers import Supervisor, listen

    (home / "file").write_text("not a directory")
    settings = load_settings(store=f"sqlite:///{home / 'file' / 'loci.db'}", home=home,
                             embedding_provider="hash", memory_mirror=False)
    started = time.monotonic()
    with listen("127.0.0.1", 0) as sock:
        assert Supervisor(settings, sock, 2, deal=deal).run() == 1
    assert time.monotonic() - started < 60


SHARED = """
import sys
from loci import load_settings
from loci.server.workers import Supervisor, listen
settings = load_settings(store=sys.argv[1], embedding_provider="hash", memory_mirror=False)
with listen("127.0.0.1", int(sys.argv[2])) as sock:
    raise SystemExit(Supervisor(settings, sock, 2, deal=False).run())
"""


def test_workers_can_share_the_listening_socket(home: Path) -> None:
    """Where descriptors cannot be dealt (Windows), the workers accept on the parent's
    socket."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", SHARED, f"sqlite:///{home / 'loci.db'}", str(port)],
        env={**os.environ, "LOCI_HOME": str(home)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    try:
        wait_until_up(f"http://127.0.0.1:{port}", process)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            assert client.post("/api/memories", json={"content": "shared"}).status_code == 201
            assert client.post("/api/search", json={"query": "shared"}).json()
    finally:
        assert stop(process) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_stop_when_the_supervisor_is_killed(home: Path) -> None:
    process, port = serve(home, 2)
    try:
        workers = worker_pids(process.pid)
        assert len(workers) == 2
        stop(process, kill=True)
        deadline = time.monotonic() + 30
        while any(Path(f"/proc/{pid}").exists() and _state(pid) != "Z" for pid in workers):
            assert time.monotonic() < deadline, "orphaned workers kept running"
            time.sleep(0.1)
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2)
    finally:
        if process.poll() is None:
            stop(process, kill=True)


def _state(pid: int) -> str:
    stat = _stat(pid)
    return "Z" if stat is None else stat[0]  # gone counts as a zombie
