"""Knowledge-base benchmark: ingestion throughput and search latency over 10k documents.

Usage: python benchmarks/knowledge.py [--docs 10000] [--model-sample 200] [--json]

- ingest: ``import_directory`` of markdown files with YAML front matter (read, parse,
  validate, write in batches of 500, FTS5), without vectors and with the deterministic
  hash embedder, next to a baseline in the same run: raw sqlite3 inserts of the same
  texts into a table and its FTS5 index;
- search: ``KnowledgeBase.search`` (hybrid keyword + vector, fused) with no filter, a
  folder filter and a tag filter, and ``search_knowledge`` (the tool, with summaries),
  p50/p95 over 200 queries, next to a bare FTS5 query on the same index;
- the bundled MiniLM model's ingest rate on a smaller sample, reported separately.

The machine is shared and noisy: the ratios to the baselines are the figures to watch.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, percentiles, query, sentence, time_calls
from loci import Loci, load_settings
from loci.knowledge import import_directory
from loci.search import fts_query

TOPICS = 20
TAGS = 10


def make_corpus(root: Path, total: int, rng: random.Random) -> list[str]:
    """``total`` markdown files (front matter, a heading, 2-14 paragraphs of 3 sentences:
    ~0.7-10k characters, a third over the 1,500-character chunk size); returns bodies."""
    bodies = []
    for i in range(total):
        paragraphs = [" ".join(sentence(rng) + "." for _ in range(3))
                      for _ in range(rng.randint(2, 14))]
        body = f"# Note {i}\n\n" + "\n\n".join(paragraphs) + "\n"
        folder = root / f"topic{i % TOPICS}"
        folder.mkdir(exist_ok=True)
        front = f"---\ntitle: Note {i}\ntags: [t{i % TAGS}, bench]\n---\n"
        (folder / f"note{i}.md").write_text(front + body, encoding="utf-8")
        bodies.append(body)
    return bodies


def bench_ingest(tmp: Path, corpus: Path, bodies: list[str], provider: str,
                 name: str) -> tuple[Loci, dict[str, float]]:
    settings = load_settings(store=f"sqlite:///{tmp / f'{name}.db'}", home=tmp,
                             embedding_provider=provider)
    loci = Loci(settings)
    start = time.perf_counter()
    report = import_directory(loci.knowledge, corpus, "/reference/")
    seconds = time.perf_counter() - start
    assert report.imported == len(bodies) and not report.skipped, report.skipped[:3]
    assert loci.indexer is None or loci.store.count_unembedded("document") == 0
    chars = sum(map(len, bodies))
    return loci, {"documents": len(bodies), "mean_chars": round(chars / len(bodies)),
                  "docs_per_s": round(len(bodies) / seconds, 1),
                  "seconds": round(seconds, 2)}


def bench_raw_insert(tmp: Path, bodies: list[str]) -> float:
    raw = sqlite3.connect(tmp / "raw.db", isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("CREATE TABLE d (id INTEGER PRIMARY KEY, path TEXT, content TEXT)")
    raw.execute("CREATE VIRTUAL TABLE f USING fts5(path, content, content='d', "
                "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')")
    start = time.perf_counter()
    for i in range(0, len(bodies), 500):
        raw.execute("BEGIN")
        raw.executemany("INSERT INTO d (id, path, content) VALUES (?, ?, ?)",
                        [(i + j + 1, f"/reference/n{i + j}.md", b)
                         for j, b in enumerate(bodies[i:i + 500])])
        raw.execute("INSERT INTO f (rowid, path, content) SELECT id, path, content FROM d "
                    "WHERE id > ?", (i,))
        raw.execute("COMMIT")
    rate = len(bodies) / (time.perf_counter() - start)
    raw.close()
    return round(rate, 1)


def bench_search(loci: Loci, db_path: Path, rng: random.Random) -> dict[str, Any]:
    queries = [query(rng) for _ in range(200)]
    kb = loci.knowledge

    def pick() -> str:
        return queries[rng.randrange(len(queries))]

    kb.search(pick())  # warm: loads the vector index
    runs = {
        "hybrid": lambda: kb.search(pick(), limit=5),
        "hybrid_folder": lambda: kb.search(pick(), path_prefix="/reference/topic3/", limit=5),
        "hybrid_tag": lambda: kb.search(pick(), tags=["t7"], limit=5),
        "search_knowledge_tool": lambda: kb.search_knowledge(pick(), top_k=5),
    }
    result: dict[str, Any] = {}
    for name, call in runs.items():
        result[name] = percentiles(time_calls(call, 200))
    db = sqlite3.connect(db_path)

    def bare() -> None:
        match = fts_query(pick())
        db.execute("SELECT rowid FROM documents_fts WHERE documents_fts MATCH ? "
                   "ORDER BY rank LIMIT 5", (match,)).fetchall()

    result["bare_fts5"] = percentiles(time_calls(bare, 200))
    db.close()
    result["hybrid_p50_vs_bare_fts5"] = round(
        result["hybrid"]["p50_ms"] / result["bare_fts5"]["p50_ms"], 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--model-sample", type=int, default=200,
                        help="documents ingested with the bundled model (0: skip)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        corpus = tmp / "corpus"
        corpus.mkdir()
        bodies = make_corpus(corpus, args.docs, rng)
        raw = bench_raw_insert(tmp, bodies)
        bare, no_vectors = bench_ingest(tmp, corpus, bodies, "none", "bare")
        bare.close()
        no_vectors["raw_sqlite_fts5_docs_per_s"] = raw
        no_vectors["vs_raw"] = round(no_vectors["docs_per_s"] / raw, 3)
        loci, ingest = bench_ingest(tmp, corpus, bodies, "hash", "kb")
        ingest["raw_sqlite_fts5_docs_per_s"] = raw
        ingest["vs_raw"] = round(ingest["docs_per_s"] / raw, 3)
        with loci:
            search = bench_search(loci, tmp / "kb.db", rng)
        report: dict[str, Any] = {"machine": machine(), "ingest_no_vectors": no_vectors,
                                  "ingest_hash_embedder": ingest, "search": search}
        if args.model_sample:
            sample = tmp / "sample"
            sample.mkdir()
            sample_bodies = make_corpus(sample, args.model_sample, random.Random(5))
            try:
                model, figures = bench_ingest(tmp, sample, sample_bodies, "local", "model")
                model.close()
                report["ingest_bundled_model"] = figures
            except Exception as exc:  # the model is optional here: report, don't fail
                report["ingest_bundled_model"] = {"error": str(exc)}
    if args.json:
        print(json.dumps(report))
    else:
        for section, figures in report.items():
            print(f"{section}: {figures}")


if __name__ == "__main__":
    main()
