"""Search latency of one tenant as a SQLite store fills with other tenants' memories.

Usage: python benchmarks/tenants.py [--per-tenant 10000] [--tenants 1,10] [--queries 300]
                                    [--json]

For each tenant count, a fresh store gets ``--per-tenant`` synthetic memories (Zipf
sentences, common.py) per tenant, with hash vectors, through the store contract
(``put_memories``). Then the first tenant's searches are timed: the keyword candidates
alone (``keyword_candidates``: FTS5 BM25) and the whole hybrid search (``Loci.search``).

Each tenant's vectors have a graph of their own, but the full-text index is one per
table: FTS5 ranks every matching row of every tenant before the join keeps the
caller's, so keyword search slows down with the store, not with the tenant's own data.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, percentiles, query, sentence, time_calls
from loci import Loci, Memory, load_settings
from loci.models import Scope
from loci.store import SearchFilters
from loci.store.sqlite import SQLiteStore

BATCH = 5_000


def fill(loci: Loci, tenants: int, per_tenant: int) -> None:
    assert loci.indexer is not None
    now = datetime.now(UTC)
    for t in range(tenants):
        rng, scope = random.Random(7 + t), Scope(f"tenant{t}", loci.scope.agent)
        for start in range(0, per_tenant, BATCH):
            texts = [sentence(rng, 12) for _ in range(min(BATCH, per_tenant - start))]
            batch = [Memory(f"m{t}_{start + i}", "project_context", text, (), now, now, None)
                     for i, text in enumerate(texts)]
            loci.store.put_memories(scope, batch, loci.indexer.vectors_for(texts))


def measure(tenants: int, per_tenant: int, queries: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(store=f"sqlite:///{Path(tmp) / 't.db'}", home=Path(tmp),
                                 embedding_provider="hash", memory_mirror=False,
                                 user="tenant0")
        with Loci(settings) as loci:
            fill(loci, tenants, per_tenant)
            store = loci.store
            assert isinstance(store, SQLiteStore) and loci.indexer is not None
            loci.search("warm up", 10)
            store.wait_for_vector_index(loci.scope, "memory", loci.indexer.embedder.dim)
            rng = random.Random(1)
            texts = iter([query(rng) for _ in range(2 * queries)])
            filters = replace(SearchFilters(), now=datetime.now(UTC))
            keyword = time_calls(lambda: store.keyword_candidates(
                loci.scope, "memory", next(texts), limit=30, filters=filters), queries)
            search = time_calls(lambda: loci.search(next(texts), 10), queries)
    return {"tenants": tenants, "rows": tenants * per_tenant,
            "keyword": percentiles(keyword), "search": percentiles(search)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-tenant", type=int, default=10_000)
    parser.add_argument("--tenants", default="1,10")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [measure(int(n), args.per_tenant, args.queries)
               for n in args.tenants.split(",")]
    if args.json:
        print(json.dumps({"machine": machine(), "results": results}))
        return
    print(f"{machine()}; {args.per_tenant:,} memories per tenant, hash vectors")
    for r in results:
        print(f"{r['tenants']:4} tenants ({r['rows']:>9,} rows): keyword p50 "
              f"{r['keyword']['p50_ms']:7.3f} ms, search p50 {r['search']['p50_ms']:7.3f} ms")


if __name__ == "__main__":
    main()
