"""Keyword search over a full-text index in many segments against one merged segment.

Usage: python benchmarks/fts_merge.py [--n 10000] [--queries 300]

Writes ``--n`` synthetic memories one per transaction (as a server adding memories one
by one does) with the automatic merge switched off, times keyword searches, then merges
the index ("optimize", what ``sqlite_base`` does whenever a table grew by 20%) and times
the merge and the same searches again.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, query, sentence
from loci import Memory, Scope, SearchFilters
from loci.store.sqlite import SQLiteStore
from loci.store.sqlite import base as sqlite_base


def search_ms(store: SQLiteStore, scope: Scope, queries: list[str]) -> float:
    start = time.perf_counter()
    for q in queries:
        store.search_memories(scope, q, limit=30, filters=SearchFilters())
    return (time.perf_counter() - start) * 1000 / len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    rng, now, scope = random.Random(7), datetime.now(UTC), Scope("bench", "bench")
    queries = [query(rng) for _ in range(args.queries)]
    sqlite_base.FTS_MIN_GROWTH = 10**12  # off while writing: the unmerged case
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(f"sqlite:///{Path(tmp) / 'fts.db'}")
        for i in range(args.n):
            store.put_memory(scope, Memory(f"m{i}", "fact", sentence(rng, 12), (), now, now,
                                           None))
        search_ms(store, scope, queries[:20])  # warm the page cache
        unmerged = search_ms(store, scope, queries)
        start = time.perf_counter()
        with store._write() as db:
            db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
        merge = time.perf_counter() - start
        merged = search_ms(store, scope, queries)
        store.close()
    print(f"{machine()}; {args.n:,} memories written one per transaction")
    print(f"keyword search: {unmerged:.3f} ms unmerged, {merged:.3f} ms merged "
          f"({unmerged / merged:.2f}x); the merge took {merge * 1000:.0f} ms")


if __name__ == "__main__":
    main()
