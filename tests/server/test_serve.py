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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


@pytest.mark.parametrize("workers", [1, 2])
def test_loci_serve_runs_the_server(home: Path, workers: int) -> None:
    port = free_port()
    env = {**os.environ, "LOCI_HOME": str(home), "LOCI_EMBEDDING_PROVIDER": "hash"}
    process = subprocess.Popen(
        [sys.executable, "-m", "loci", "serve", "--port", str(port), "--workers", str(workers),
         "--store", f"sqlite:///{home / 'loci.db'}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process)
        created = httpx.post(f"{url}/api/memories", json={"content": "User likes tides",
                                                          "type": "user_preference"})
        assert created.status_code == 201
        for _ in range(4):  # with two workers, both see the write
            hits = httpx.post(f"{url}/api/search", json={"query": "tides"}).json()
            assert hits[0]["id"] == created.json()["id"]
        assert "swagger" in httpx.get(f"{url}/docs").text.lower()
    finally:
        process.terminate()
        process.wait(timeout=10)
        assert process.stderr is not None and process.stdout is not None
        process.stderr.close()
        process.stdout.close()
    assert (home / "loci.db").exists()


def test_workers_share_the_cores_for_the_local_model(home: Path) -> None:
    from loci import load_settings
    from loci.cli.commands.server import worker_environment
    from loci.engine import Loci

    local = load_settings(store=f"sqlite:///{home / 'a.db'}", embedding_provider="local")
    env = worker_environment(local, workers=os.cpu_count() or 1)
    assert env["LOCI_STORE"] == local.store_url and env["LOCI_EMBEDDING_THREADS"] == "1"
    # Chosen threads are kept; other providers have no threads to set.
    assert "LOCI_EMBEDDING_THREADS" not in worker_environment(
        load_settings(store=local.store_url, embedding_threads=3), 2)
    assert "LOCI_EMBEDDING_THREADS" not in worker_environment(
        load_settings(store=local.store_url, embedding_provider="hash"), 2)
    # A worker's settings come from that environment, and reach the model.
    os.environ.update(env)
    try:
        with Loci(load_settings(memory_mirror=False, embedding_provider="local")) as worker:
            assert worker.indexer is not None
            assert worker.indexer.embedder.threads == 1  # type: ignore[attr-defined]
    finally:
        for name in env:
            os.environ.pop(name)
