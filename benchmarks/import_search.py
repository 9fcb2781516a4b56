"""Searches while a scope grows: a bulk import into the scope a user searches.

A scope of ``--base`` memories (its HNSW graph built) takes ``--n`` more in calls of
``--chunk`` rows (precomputed unit vectors, through the store contract) from a second
thread, while the first thread searches it in a loop (``Loci.search``: the hash
embedder's query vector, keyword and vector halves, fusion). Reported: search latency
during the import (p50, p99, max), the first search after it, and the next ones, per
backend (``--backends sqlite,postgres``: a throwaway embedded PostgreSQL server).

Usage: python benchmarks/import_search.py [--base 20000] [--n 100000]
                                          [--backends sqlite] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, query
from loci import Loci, load_settings
from scale import batches, postgres_url


def timed(loci: Loci, text: str) -> float:
    start = time.perf_counter()
    loci.search(text, 10)
    return (time.perf_counter() - start) * 1000


def stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"searches": len(ordered), "p50_ms": round(ordered[len(ordered) // 2], 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
            "max_ms": round(ordered[-1], 2)}


def run(store: str, home: Path, base: int, n: int, chunk: int) -> dict[str, Any]:
    rng = random.Random(3)
    settings = load_settings(store=store, home=home, embedding_provider="hash",
                             memory_mirror=False)
    with Loci(settings) as loci:
        loci.remember("the store records the hash model")
        all_batches = list(batches(base + n, rng))
        first, rest = all_batches[: base // 5_000 or 1], all_batches[base // 5_000 or 1:]
        for memories, vectors in first:
            loci.store.put_memories(loci.scope, memories, vectors)
        loci.search("build the graph", 10)
        wait = getattr(loci.store, "wait_for_vector_index", None)  # (a store with its
        if wait is not None:                                        # own index has none)
            wait(loci.scope, "memory", vectors.shape[1], 600)
        questions = [query(rng) for _ in range(5_000)]
        during: list[float] = []
        done = threading.Event()

        def importer() -> None:
            for memories, vectors in rest:
                for i in range(0, len(memories), chunk):
                    loci.store.put_memories(loci.scope, memories[i:i + chunk],
                                            vectors[i:i + chunk])
            done.set()

        thread = threading.Thread(target=importer)
        started = time.perf_counter()
        thread.start()
        while not done.is_set():
            during.append(timed(loci, questions[len(during) % len(questions)]))
        thread.join()
        import_s = time.perf_counter() - started
        after = [timed(loci, q) for q in questions[:50]]
    return {"base": base, "imported": n, "rows_per_import_call": chunk,
            "import_s": round(import_s, 1),
            "during_import": stats(during), "first_after_ms": round(after[0], 2),
            "after": stats(after[1:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=20_000)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=1_000, help="rows per import call")
    parser.add_argument("--backends", default="sqlite")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {"machine": machine()}
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory(prefix="loci-import-search-") as name:
            home = Path(name)
            if backend == "sqlite":
                report[backend] = run(f"sqlite:///{home / 'loci.db'}", home, args.base,
                                      args.n, args.chunk)
            else:
                with postgres_url(None, home, "4GB") as url:
                    report[backend] = run(url, home, args.base, args.n, args.chunk)
    print(json.dumps(report, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
