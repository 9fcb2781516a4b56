"""HNSW recall and latency on real-model vectors, by search breadth.

Usage: python benchmarks/ann_recall.py [--n 20000] [--queries 1000] [--k 10,40]
       [--ef 32,48,64,96,128] [--cache DIR] [--vectors NPZ] [--signs] [--json]

The corpus is real English text embedded by the bundled model (all-MiniLM-L6-v2): the
sentences of the docstrings of Python's standard library and installed packages, which
cluster by topic as real memories do (the hash test embedder's vectors have no such
structure, so its recall says little). Queries are held-out sentences of the same kind.
The graph is built with the parameters ``store.ann`` uses; for each
``expansion_search`` the figures are recall@k against exact search and the p50 time of
one search. Vectors are cached in ``--cache`` (default: the system's temporary
directory), as embedding 20k sentences takes a few minutes.

``--vectors`` takes the corpus and queries from a file of vectors instead (an ``.npz``
with a ``vectors`` array, such as ``locomo_distractors.py``'s cache of real turns: its
last ``--queries`` rows are the queries). ``--signs`` measures, instead of the graph,
the exact search that scores only the rows whose sign bits are nearest the query's
(``store.vector_index``, past ``SIGN_SCAN_ROWS`` rows): recall@k against exact search
over every row, and p50 times of both.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine
from loci.embeddings import make_embedder
from loci.store.ann import AnnIndex
from loci.store.row_blocks import dot_rows
from loci.store.vector_index import VectorIndex

Matrix = npt.NDArray[np.float32]
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def docstring_sentences(wanted: int) -> list[str]:
    """``wanted`` distinct docstring sentences (5-60 words) of the standard library,
    then of the installed packages, in a fixed order (fewer if there are not so many)."""
    paths = sysconfig.get_paths()
    files = [p for root in (paths["stdlib"], paths["purelib"]) for p in
             sorted(Path(root).rglob("*.py"))]
    seen: dict[str, None] = {}
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef):
                doc = ast.get_docstring(node) or ""
                for text in _SENTENCE.split(" ".join(doc.split())):
                    if 5 <= len(text.split()) <= 60:
                        seen[text] = None
        if len(seen) >= wanted:
            break
    return list(seen)[:wanted]


def vectors(texts: list[str], cache: Path) -> Matrix:
    if cache.exists():
        cached: Matrix = np.load(cache)
        if cached.shape[0] == len(texts):
            return cached
    embedder = make_embedder("local")
    out = np.vstack([embedder.embed(texts[i : i + 256]) for i in range(0, len(texts), 256)])
    np.save(cache, out)
    return out


def measure(corpus: Matrix, queries: Matrix, ks: list[int], efs: list[int]
            ) -> tuple[float, list[dict[str, float]]]:
    exact = np.argsort(-(queries @ corpus.T), axis=1)[:, : max(ks)]
    ann = AnnIndex(corpus.shape[1])
    start = time.perf_counter()
    ann.upsert(list(range(corpus.shape[0])), corpus, 1)
    build = time.perf_counter() - start
    rows = []
    for ef in efs:
        ann._index.expansion_search = ef
        row: dict[str, float] = {"ef": ef}
        for k in ks:
            times, found = [], 0
            for i, q in enumerate(queries):
                t = time.perf_counter()
                keys = [key for key, _ in ann.search(q, k)]
                times.append((time.perf_counter() - t) * 1000)
                found += len(set(keys) & set(exact[i, :k].tolist()))
            row[f"recall@{k}"] = round(found / (k * len(queries)), 4)
            row[f"p50_ms@{k}"] = round(statistics.median(times), 3)
        rows.append(row)
    return build, rows


def measure_signs(corpus: Matrix, queries: Matrix, ks: list[int]) -> list[dict[str, float]]:
    index = VectorIndex(corpus.shape[1], ann_threshold=10**12)  # no graph: exact paths
    index.update((i, row.tobytes(), i + 1) for i, row in enumerate(corpus))
    rows = []
    for k in ks:
        exact_ms, signs_ms, found = [], [], 0
        for q in queries:
            t = time.perf_counter()
            scores = dot_rows(corpus, q)
            truth = np.argpartition(-scores, k)[:k]
            exact_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            keys = [key for key, _ in index.search(q, k)]
            signs_ms.append((time.perf_counter() - t) * 1000)
            found += len(set(keys) & set(truth.tolist()))
        rows.append({"k": k, "recall": round(found / (k * len(queries)), 4),
                     "exact_p50_ms": round(statistics.median(exact_ms), 2),
                     "signs_p50_ms": round(statistics.median(signs_ms), 2)})
    return rows


def corpus_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Matrix:
    wanted = args.n + args.queries
    if args.vectors is not None:
        stored: Matrix = np.load(args.vectors)["vectors"].astype(np.float32)
        if len(stored) < wanted:
            parser.error(f"only {len(stored):,} vectors; lower --n or --queries")
        stored = stored[-wanted:]
        return stored / np.maximum(np.linalg.norm(stored, axis=1, keepdims=True), 1e-9)
    sentences = docstring_sentences(wanted)
    random.Random(11).shuffle(sentences)
    if len(sentences) < wanted:
        parser.error(f"only {len(sentences):,} sentences; lower --n or --queries")
    return vectors(sentences[:wanted], args.cache / f"loci-ann-recall-{wanted}.npy")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="corpus sentences")
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--k", default="10,40", help="comma-separated k of recall@k")
    parser.add_argument("--ef", default="32,48,64,96,128",
                        help="comma-separated expansion_search values")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--vectors", type=Path, help="an .npz of vectors to use instead")
    parser.add_argument("--signs", action="store_true",
                        help="measure the sign-bit preselection instead of the graph")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    embedded = corpus_from(args, parser)
    ks = [int(k) for k in args.k.split(",")]
    if args.signs:
        signs = measure_signs(embedded[: args.n], embedded[args.n :], ks)
        print(json.dumps({"machine": machine(), "n": args.n, "queries": args.queries,
                          "signs": signs}))
        return
    build, rows = measure(embedded[: args.n], embedded[args.n :],
                          ks, [int(e) for e in args.ef.split(",")])
    report = {"machine": machine(), "n": args.n, "queries": args.queries,
              "build_s": round(build, 1), "rows": rows}
    if args.json:
        print(json.dumps(report))
        return
    print(f"{machine()}; {args.n:,} docstring sentences, bundled model, "
          f"{args.queries:,} held-out queries; graph built in {build:.1f} s")
    for row in rows:
        print(f"ef {int(row['ef']):4d}  " + "  ".join(
            f"recall@{k} {row[f'recall@{k}']:.3f} p50 {row[f'p50_ms@{k}']:.3f} ms"
            for k in ks))


if __name__ == "__main__":
    main()
