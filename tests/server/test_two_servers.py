"""Several servers, one database: two ``loci serve`` processes on one PostgreSQL with
concurrent writers lose and duplicate nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port
from tests.server.test_serve import wait_until_up

WRITERS = 8
EVENTS_PER_WRITER = 25
MEMORIES_PER_WRITER = 10


@pytest.fixture
def servers(pg_url: str, tmp_path: Path) -> Iterator[list[str]]:
    processes, urls = [], []
    try:
        for n in range(2):
            home = tmp_path / f"server{n}"
            home.mkdir()
            port = free_port()
            env = {**os.environ, "LOCI_HOME": str(home), "LOCI_EMBEDDING_PROVIDER": "hash"}
            process = subprocess.Popen(
                [sys.executable, "-m", "loci", "serve", "--port", str(port), "--store",
                 pg_url], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            processes.append(process)
            urls.append(f"http://127.0.0.1:{port}")
            wait_until_up(urls[-1], process)
        yield urls
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=10)
            assert process.stderr is not None
            process.stderr.close()


def write(base: str, writer: int) -> list[str]:
    """One writer: events into a session every writer shares and into its own, and
    distinct memories; returns the ids of the memories it created."""
    created = []
    with httpx.Client(base_url=base, timeout=30) as client:
        for i in range(EVENTS_PER_WRITER):
            for session in ("shared", f"own-{writer}"):
                response = client.post(f"/api/sessions/{session}/events", json={
                    "role": "user", "content": f"writer {writer} event {i}"})
                assert response.status_code == 201, response.text
            if i < MEMORIES_PER_WRITER:
                response = client.post("/api/memories", json={
                    "content": f"Fact number {i} from writer {writer}: code W{writer}X{i}",
                    "type": "project_context"})
                assert response.status_code == 201, response.text
                created.append(response.json()["id"])
    return created


def test_two_servers_one_postgres_lose_and_duplicate_nothing(servers: list[str]) -> None:
    with ThreadPoolExecutor(WRITERS) as pool:
        futures = [pool.submit(write, servers[w % 2], w) for w in range(WRITERS)]
        created = [mid for f in futures for mid in f.result()]
    assert len(set(created)) == WRITERS * MEMORIES_PER_WRITER
    for base in servers:  # both servers see everything, exactly once
        with httpx.Client(base_url=base, timeout=30) as client:
            shared = client.get("/api/sessions/shared/events",
                                params={"limit": 10_000}).json()
            contents = [e["content"] for e in shared]
            assert len(contents) == WRITERS * EVENTS_PER_WRITER
            assert len(set(contents)) == len(contents)
            ids = [e["id"] for e in shared]
            assert ids == sorted(ids) and len(set(ids)) == len(ids)
            for w in range(WRITERS):
                own = client.get(f"/api/sessions/own-{w}/events").json()
                assert [e["content"] for e in own] == [
                    f"writer {w} event {i}" for i in range(EVENTS_PER_WRITER)]
            memories = client.get("/api/memories", params={"limit": 10_000}).json()
            assert sorted(m["id"] for m in memories) == sorted(created)
            hit = client.post("/api/search", json={"query": "code W3X7"}).json()
            assert hit and "W3X7" in hit[0]["summary"]
