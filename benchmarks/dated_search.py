"""Searches that name a date, in a scope of many events.

``--n`` events (synthetic sentences, two a day over the years before 2026) go into one
scope through ``add_events`` with the hash embedder; once they are embedded and the
vector index is built, conversation searches whose question names a day ("what did we
say on 8 May 2023 about ...", which the retriever narrows to that day) are timed
against the same searches without the date. Each backend of ``--backends`` gets the
same rows and questions (PostgreSQL: a throwaway embedded server, as in ``scale.py``).

Usage: python benchmarks/dated_search.py [--n 100000] [--queries 200] [--keep DIR]
                                         [--backends sqlite,postgres] [--json]

With ``--keep`` the SQLite store lives in ``DIR`` and is filled only if it is empty, so
two versions of Loci (``PYTHONPATH=<worktree>/src``) can be timed on the same rows.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, sentence
from loci import Loci, load_settings
from scale import postgres_url

START = datetime(2026, 1, 1, tzinfo=UTC)


def fill(loci: Loci, n: int, rng: random.Random) -> None:
    for first in range(0, n, 1_000):
        loci.add_events(f"s{first // 1_000}", [
            {"type": "message", "role": "user", "content": sentence(rng),
             "timestamp": START - timedelta(hours=12 * (n - i))}
            for i in range(first, min(n, first + 1_000))])
    getattr(loci, "wait_indexed", lambda: True)()


def timed(loci: Loci, questions: list[str]) -> dict[str, float]:
    samples = []
    for question in questions:
        start = time.perf_counter()
        loci.search_conversation(question, limit=10)
        samples.append((time.perf_counter() - start) * 1000)
    ordered = sorted(samples)
    return {"p50_ms": round(ordered[len(ordered) // 2], 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2)}


def run(store: str, home: Path, n: int, queries: int) -> dict[str, object]:
    rng = random.Random(9)
    settings = load_settings(store=store, home=home, embedding_provider="hash",
                             memory_mirror=False)
    with Loci(settings) as loci:
        started = time.perf_counter()
        if not loci.store.list_sessions(loci.scope):
            fill(loci, n, rng)
        else:  # the same questions as the run that filled it
            for _ in range(n):
                sentence(rng)
        loci.search_conversation("warm up", limit=10)
        wait = getattr(loci.store, "wait_for_vector_index", None)
        if wait:
            wait(loci.scope, "event", 384, 3600)
        ready_s = time.perf_counter() - started
        topics = [" ".join(sentence(rng, 8).split()[:4]) for _ in range(queries)]
        days = [START - timedelta(days=rng.randint(1, n // 2 - 1)) for _ in range(queries)]
        dated = [f"what did we say on {d.day} {d:%B %Y} about {t}?"
                 for d, t in zip(days, topics, strict=True)]
        plain = [f"what did we say about {t}?" for t in topics]
        timed(loci, plain[:20])  # warm
        return {"ready_s": round(ready_s, 1), "undated": timed(loci, plain),
                "dated": timed(loci, dated)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the SQLite store in this directory (filled if empty)")
    parser.add_argument("--backends", default="sqlite")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, object] = {"machine": machine(), "events": args.n}
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory(prefix="loci-dated-") as name:
            home = args.keep if args.keep and backend == "sqlite" else Path(name)
            home.mkdir(parents=True, exist_ok=True)
            if backend == "sqlite":
                report[backend] = run(f"sqlite:///{home / 'loci.db'}", home, args.n,
                                      args.queries)
            else:
                with postgres_url(None, Path(name), "4GB") as url:
                    report[backend] = run(url, home, args.n, args.queries)
    print(json.dumps(report, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
