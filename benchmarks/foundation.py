"""Foundation benchmark: append throughput, token counting speed, keyword search latency.

Usage: python benchmarks/foundation.py [--events 100000] [--json]

Each figure is measured next to a baseline in the same run (raw sqlite3 inserts into a
table and its FTS5 index; a bare FTS5 query), because this machine is shared and noisy:
the ratio is the figure to watch.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, percentiles, query, sentence, time_calls
from loci import Loci, load_settings
from loci.models import NewEvent
from loci.search import fts_query
from loci.tokens import heuristic_count, token_counter


def bench_append(tmp: Path, total: int, rng: random.Random) -> dict[str, float]:
    texts = [sentence(rng) for _ in range(total)]
    settings = load_settings(store=f"sqlite:///{tmp / 'append.db'}", home=tmp,
                             embedding_provider="none")  # the log and FTS5 alone
    with Loci(settings) as loci:
        start = time.perf_counter()
        for i in range(0, 2000):
            loci.add(f"single-{i % 10}", "user", texts[i])
        single = 2000 / (time.perf_counter() - start)
        start = time.perf_counter()
        for i in range(0, total, 500):
            batch = [{"type": "message", "role": "user", "content": t} for t in texts[i:i + 500]]
            loci.add_events(f"batch-{i // 5000}", batch)
        batched = total / (time.perf_counter() - start)
    raw = sqlite3.connect(tmp / "raw.db", isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("CREATE TABLE e (id INTEGER PRIMARY KEY, s TEXT, c TEXT)")
    raw.execute("CREATE VIRTUAL TABLE f USING fts5(c, content='e', content_rowid='id', "
                "tokenize='porter unicode61 remove_diacritics 2')")
    start = time.perf_counter()
    for i in range(0, total, 500):
        raw.execute("BEGIN")
        raw.executemany("INSERT INTO e (id, s, c) VALUES (?, ?, ?)",
                        [(i + j + 1, "s", t) for j, t in enumerate(texts[i:i + 500])])
        raw.execute("INSERT INTO f (rowid, c) SELECT id, c FROM e WHERE id > ?", (i,))
        raw.execute("COMMIT")
    baseline = total / (time.perf_counter() - start)
    return {
        "single_events_per_s": round(single),
        "batched_events_per_s": round(batched),
        "raw_sqlite_fts5_rows_per_s": round(baseline),
        "batched_vs_raw": round(batched / baseline, 3),
    }


def bench_tokens(rng: random.Random) -> dict[str, float]:
    text = "\n".join(sentence(rng, 40) for _ in range(25_000))  # ~6 MB
    megabytes = len(text.encode()) / 1e6
    results: dict[str, float] = {"megabytes": round(megabytes, 2)}
    for name, count in (
        ("exact_o200k", token_counter("gpt-4o").count),
        ("exact_cl100k", token_counter("gpt-4").count),
        ("heuristic", heuristic_count),
    ):
        start = time.perf_counter()
        count(text)
        results[f"{name}_mb_per_s"] = round(megabytes / (time.perf_counter() - start), 1)
    return results


def bench_search(tmp: Path, total: int, rng: random.Random) -> dict[str, float]:
    settings = load_settings(store=f"sqlite:///{tmp / 'search.db'}", home=tmp,
                             embedding_provider="none")  # keyword search alone
    with Loci(settings) as loci:
        now = datetime.now(UTC)
        for i in range(0, total, 1000):
            events = [NewEvent("message", "user", sentence(rng), now, 20) for _ in range(1000)]
            loci.store.append_events(loci.scope, f"s{i // 10_000}", events)
        queries = [query(rng) for _ in range(200)]
        engine = time_calls(lambda: loci.search(queries[rng.randrange(200)], 10,
                                                kinds=("event",)), 200)
        db = sqlite3.connect(tmp / "search.db")

        def bare() -> None:
            match = fts_query(queries[rng.randrange(200)])
            db.execute(
                "SELECT rowid FROM events_fts WHERE events_fts MATCH ? ORDER BY rank LIMIT 10",
                (match,)).fetchall()

        baseline = time_calls(bare, 200)
    result = {f"engine_{k}": v for k, v in percentiles(engine).items()}
    result.update({f"bare_fts5_{k}": v for k, v in percentiles(baseline).items()})
    result["events"] = total
    result["p50_overhead_ratio"] = round(result["engine_p50_ms"] / result["bare_fts5_p50_ms"], 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        report = {
            "machine": machine(),
            "append": bench_append(tmp, min(args.events, 100_000), rng),
            "tokens": bench_tokens(rng),
            "search": bench_search(tmp, args.events, rng),
        }
    if args.json:
        print(json.dumps(report))
    else:
        for section, figures in report.items():
            print(f"{section}: {figures}")


if __name__ == "__main__":
    main()
