"""Server throughput and latency under concurrent clients on loopback.

Usage: python benchmarks/server_load.py [--memories 10000] [--clients 16] [--seconds 10]
       [--warmup 2] [--embedding local|hash] [--workers 1] [--endpoints health,search,context]
       [--json]

A store of synthetic memories is bulk-loaded, then ``loci serve`` runs in its own
process and an asyncio load generator (in this process, a minimal keep-alive HTTP/1.1
client) keeps ``--clients`` requests in flight for ``--seconds`` per endpoint, each
search with a fresh query (no two alike, so no cache helps). The baseline in the same
run is ``GET /api/health``: the cost of the HTTP stack alone. Figures: requests/s,
p50 and p99 per endpoint, and the server's CPU time per request (its processes'
utime + stime over the run, divided by the requests: steadier than throughput on a
shared machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, query, sentence, serve
from loci import Loci, Memory, load_settings
from loci.store.sqlite import SQLiteStore


def build_store(path: Path, memories: int, embedding: str) -> None:
    settings = load_settings(store=f"sqlite:///{path}", home=path.parent,
                             embedding_provider=embedding, memory_mirror=False)
    rng = random.Random(7)
    now = datetime.now(UTC)
    with Loci(settings) as loci:
        assert loci.indexer is not None
        for start in range(0, memories, 2000):
            texts = [sentence(rng, 12) for _ in range(min(2000, memories - start))]
            batch = [Memory(f"mem_{start + i:08d}", "project_context", t, (), now, now, None)
                     for i, t in enumerate(texts)]
            loci.store.put_memories(loci.scope, batch, loci.indexer.vectors_for(texts))
        loci.add_events("load", [{"role": "user" if i % 2 == 0 else "assistant",
                                  "content": sentence(rng, 30)} for i in range(200)])
        # Build the HNSW graph now (it is saved next to the database, and the server's
        # processes load it) rather than in the background of the first measured
        # searches.
        loci.search(query(rng), 10)
        assert isinstance(loci.store, SQLiteStore)
        loci.store.wait_for_vector_index(loci.scope, "memory", loci.indexer.embedder.dim)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(db: Path, port: int, embedding: str, workers: int = 1
                 ) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LOCI_HOME": str(db.parent), "LOCI_EMBEDDING_PROVIDER": embedding,
           "LOCI_MEMORY_MIRROR": "false"}
    return serve(port, ["--store", f"sqlite:///{db}", "--workers", str(workers)], env)


def process_tree_cpu(pid: int) -> float:
    """CPU seconds used so far by ``pid`` and its children (the worker processes), read
    from /proc: the server's cost per request, whatever else loads the machine."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = [pid] + [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(p) == pid]
    total = 0
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / tick


def _parent(pid: str) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1


#: Requests built ahead per second of load (more than any endpoint serves here).
PREPARED_PER_SECOND = 2_000


def get(path: str) -> Callable[[random.Random], bytes]:
    return lambda _: f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


def post(path: str, body: Callable[[random.Random], dict[str, Any]]
         ) -> Callable[[random.Random], bytes]:
    def build(rng: random.Random) -> bytes:
        data = json.dumps(body(rng)).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                f"\r\nContent-Length: {len(data)}\r\n\r\n")
        return head.encode() + data
    return build


ENDPOINTS: dict[str, Callable[[random.Random], bytes]] = {
    "health": get("/api/health"),
    "search": post("/api/search", lambda rng: {"query": query(rng), "limit": 10}),
    "context": post("/api/sessions/load/context", lambda rng: {"message": query(rng)}),
}


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   request: bytes) -> int:
    """One request on a kept-alive connection; returns the status code. A minimal
    HTTP/1.1 client: an off-the-shelf one costs more CPU than the server under test."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return int(head[9:12])


async def load(port: int, build: Callable[[random.Random], bytes], clients: int,
               seconds: float, server_pid: int, run: str) -> dict[str, float]:
    """``clients`` connections, each sending requests one after the other for
    ``seconds``. Requests are built before the clock starts (building a search costs
    the generator ~0.2 ms, CPU the server would otherwise get), from seeds of their own
    per ``run``: a measured run never repeats its warm-up's queries."""
    samples: list[float] = []
    errors = 0
    prepared = max(1, int(seconds * PREPARED_PER_SECOND / clients))

    async def worker(index: int, requests: list[bytes], rng: random.Random,
                     deadline: float) -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            await exchange(reader, writer, requests.pop())  # the connection's warm-up
            while time.perf_counter() < deadline:
                request = requests.pop() if requests else build(rng)
                start = time.perf_counter()
                status = await exchange(reader, writer, request)
                samples.append((time.perf_counter() - start) * 1000)
                errors += status != 200
        finally:
            writer.close()

    rngs = [random.Random(f"{run}-{i}") for i in range(clients)]
    requests = [[build(rng) for _ in range(prepared + 1)] for rng in rngs]
    begin, cpu = time.perf_counter(), process_tree_cpu(server_pid)
    own = time.process_time()
    await asyncio.gather(*(worker(i, requests[i], rngs[i], begin + seconds)
                           for i in range(clients)))
    elapsed = time.perf_counter() - begin
    cpu = process_tree_cpu(server_pid) - cpu
    own = time.process_time() - own
    ordered = sorted(samples)
    return {"requests": len(ordered), "errors": errors,
            "rps": round(len(ordered) / elapsed, 1),
            "p50_ms": round(ordered[len(ordered) // 2], 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
            "server_cpu_ms": round(cpu * 1000 / max(1, len(ordered)), 2),
            "client_cpu_ms": round(own * 1000 / max(1, len(ordered)), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0,
                        help="unmeasured seconds of load per endpoint first")
    parser.add_argument("--embedding", choices=["local", "hash"], default="local")
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    parser.add_argument("--endpoints", default=",".join(ENDPOINTS),
                        help="comma-separated, of: " + ", ".join(ENDPOINTS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    endpoints = args.endpoints.split(",")
    if unknown := set(endpoints) - set(ENDPOINTS):
        parser.error(f"unknown endpoints: {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "load.db"
        build_store(db, args.memories, args.embedding)
        port = free_port()
        server = start_server(db, port, args.embedding, args.workers)
        try:
            results = {}
            for name in endpoints:
                build = ENDPOINTS[name]
                # Unmeasured first: each server process loads its indexes and caches.
                # uvloop, as the server uses: the generator shares the cores it measures.
                uvloop.run(load(port, build, args.clients, args.warmup, server.pid,
                                "warm-up"))
                results[name] = uvloop.run(load(port, build, args.clients, args.seconds,
                                                server.pid, "measured"))
        finally:
            server.terminate()
            server.wait(timeout=10)
    report = {"machine": machine(), "memories": args.memories, "clients": args.clients,
              "embedding": args.embedding, "workers": args.workers, **results}
    if args.json:
        print(json.dumps(report))
        return
    print(f"{machine()}; {args.memories:,} memories, {args.clients} clients, "
          f"{args.embedding} embeddings, {args.workers} server process(es)")
    for name, r in results.items():
        print(f"{name:8} {r['rps']:8.1f} req/s  p50 {r['p50_ms']:7.2f} ms  "
              f"p99 {r['p99_ms']:7.2f} ms  CPU/request server {r['server_cpu_ms']:5.2f} ms, "
              f"load generator {r['client_cpu_ms']:4.2f} ms  "
              f"({r['requests']} requests, {r['errors']} errors)")


if __name__ == "__main__":
    main()
