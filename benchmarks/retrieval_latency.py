"""Hybrid search latency at 10k and 100k memories, against the raw primitives.

Usage: python benchmarks/retrieval_latency.py [--sizes 10000,100000] [--json]

Memories are synthetic Zipf-distributed sentences (see common.py) embedded with the
deterministic hash embedder (384 dimensions, the same as the bundled model) and stored
in bulk; queries are then run through the engine (`Loci.search`: keyword + vector +
fusion + hydration). Measured in the same run: a bare FTS5 query, exact KNN by numpy
over the same vectors (one product, and 1,024-row pieces; the faster is the baseline),
the recall@10 of the store's vector search against it, and the bundled model's
query-embedding time, which is reported separately because it does not depend on the
store's size. Above 20k vectors the first search starts the HNSW graph in the background;
the build time is reported and queries are timed once it is ready.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, percentiles, query, sentence, time_calls
from loci import Loci, Memory, load_settings
from loci.embeddings import make_embedder
from loci.search import fts_query
from loci.store.row_blocks import dot_rows
from loci.store.sqlite import SQLiteStore

REPEAT = 300


def build(tmp: Path, size: int, rng: random.Random) -> Loci:
    settings = load_settings(store=f"sqlite:///{tmp / f'm{size}.db'}", home=tmp,
                             embedding_provider="hash")
    loci = Loci(settings)
    assert loci.indexer is not None
    now = datetime.now(UTC)
    for start in range(0, size, 5000):
        texts = [sentence(rng) for _ in range(min(5000, size - start))]
        memories = [Memory(f"mem_{start + i:08d}", "project_context", t, (), now, now, None)
                    for i, t in enumerate(texts)]
        vectors = loci.indexer.embedder.embed(texts)
        if start == 0:
            loci.indexer.embed_pending("memory")  # records the model in the store
        loci.store.put_memories(loci.scope, memories, vectors)
    return loci


def warm_up(loci: Loci, first_query: str) -> dict[str, float]:
    """Load the vectors, then wait for the HNSW graph (from ``ANN_THRESHOLD`` vectors on
    it is built in the background on first search; searches are exact until then)."""
    start = time.perf_counter()
    loci.search(first_query, 10)  # loads the in-memory vector index once
    loaded = time.perf_counter()
    assert loci.indexer is not None and isinstance(loci.store, SQLiteStore)
    graph = loci.store.wait_for_vector_index(loci.scope, "memory", loci.indexer.embedder.dim)
    return {"first_search_s": round(loaded - start, 2),
            "graph_build_s": round(time.perf_counter() - loaded, 2) if graph else 0.0}


def measure(loci: Loci, tmp: Path, size: int, rng: random.Random) -> dict[str, float]:
    queries = [query(rng) for _ in range(REPEAT)]
    warm = warm_up(loci, queries[0])
    picks = iter(rng.choices(queries, k=10 * REPEAT))
    engine = time_calls(lambda: loci.search(next(picks), 10), REPEAT)

    db = sqlite3.connect(tmp / f"m{size}.db")
    bare_fts = time_calls(lambda: db.execute(
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank LIMIT 30",
        (fts_query(next(picks)),)).fetchall(), REPEAT)
    rows = db.execute("SELECT rowid, embedding FROM memories ORDER BY rowid").fetchall()
    rowids = np.array([r[0] for r in rows])
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(size, -1)
    assert loci.indexer is not None
    vectors = loci.indexer.embedder.embed(queries)
    turn = iter(range(10 * REPEAT))

    def knn() -> None:
        scores = matrix @ vectors[next(turn) % REPEAT]
        top = np.argpartition(-scores, 30)[:30]
        top[np.argsort(-scores[top])]

    numpy_knn = time_calls(knn, REPEAT)

    def knn_pieces() -> None:  # the same in 1,024-row products (see store.vector_index)
        scores = dot_rows(matrix, vectors[next(turn) % REPEAT])
        top = np.argpartition(-scores, 30)[:30]
        top[np.argsort(-scores[top])]

    numpy_pieces = time_calls(knn_pieces, REPEAT)
    recall = vector_recall(loci, rowids, matrix, vectors)
    db.close()
    result: dict[str, float] = {f"engine_{k}": v for k, v in percentiles(engine).items()}
    result.update(warm)
    result["vector_recall_at_10"] = recall
    result.update({f"bare_fts5_{k}": v for k, v in percentiles(bare_fts).items()})
    result.update({f"numpy_knn_{k}": v for k, v in percentiles(numpy_knn).items()})
    result.update({f"numpy_knn_pieces_{k}": v for k, v in percentiles(numpy_pieces).items()})
    knn_p50 = min(result["numpy_knn_p50_ms"], result["numpy_knn_pieces_p50_ms"])
    primitives = result["bare_fts5_p50_ms"] + knn_p50
    result["engine_over_primitives_p50"] = round(result["engine_p50_ms"] / primitives, 2)
    return result


def vector_recall(loci: Loci, rowids: np.ndarray, matrix: np.ndarray,
                  vectors: np.ndarray) -> float:
    """Recall@10 of the store's vector search (the graph above 20k) against numpy's
    exact top 10 over the same vectors, on 100 of the queries."""
    index = loci.store._indexes[("memory", loci.scope.tenant, loci.scope.agent)]  # type: ignore[attr-defined]
    found = 0
    for vector in vectors[:100]:
        truth = set(rowids[np.argsort(-(matrix @ vector))[:10]].tolist())
        found += len(truth & {key for key, _ in index.search(vector, 10)})
    return round(found / 1000, 3)


def query_embedding(rng: random.Random) -> dict[str, float]:
    model = make_embedder("local")
    model.embed(["warm up"])
    queries = [query(rng) for _ in range(100)]
    picks = iter(queries)
    return {f"local_model_{k}": v
            for k, v in percentiles(time_calls(lambda: model.embed([next(picks)]), 100)).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(11)
    report: dict[str, object] = {"machine": machine()}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for size in (int(s) for s in args.sizes.split(",")):
            start = time.perf_counter()
            loci = build(tmp, size, rng)
            built = time.perf_counter() - start
            figures = measure(loci, tmp, size, rng)
            figures["ingest_per_s"] = round(size / built)
            report[f"memories_{size}"] = figures
            loci.close()
    report["query_embedding"] = query_embedding(rng)
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
