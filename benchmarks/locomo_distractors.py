"""LoCoMo recall when each conversation shares its scope with many other turns.

Usage: python benchmarks/locomo_distractors.py --data ../shared/data/locomo/locomo_dev.json
       [--distractors 100000] [--samples conv-26] [--embedding local|hash]
       [--dump answers.json] [--json]

Each conversation is ingested as ``locomo.py`` does, its questions asked, and the top
ten turns scored (R@5, R@10, NDCG@10); then ``--distractors`` turns are added to the
same scope and the questions asked again. A BM25 baseline (``bm25s``, as in
``locomo.py``) ranks the same turns, distractors included, in the same run.

The distractors are chat turns of other people: each is one to three sentences drawn
at random from the *other* conversations of the file (speakers' names included), in
sessions of twenty turns dated at random within the conversation's own span, so a
question that names a period finds distractors in it too. They are written through
the store contract, and their vectors, the same texts the indexer would embed, are
computed in batches and cached under ``--cache`` (the pool is the same on every run).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine
from loci import Loci, Scope
from loci.embeddings import Embedder
from loci.models import NewEvent
from locomo import BM25Baseline, Sample, Table, Turn, ingest, load, scores

SESSION_TURNS = 20
EMBED_BATCH = 512
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def pool_of(samples: list[Sample], sample: Sample) -> list[tuple[str, str]]:
    """(speaker, sentence) of every conversation but ``sample``."""
    return [(turn.speaker, part) for other in samples if other is not sample
            for turn in other.turns for part in _SENTENCE.split(turn.text) if part]


def distractors(sample: Sample, pool: list[tuple[str, str]], n: int, seed: int
                ) -> list[tuple[str, list[NewEvent]]]:
    """``n`` turns in sessions of ``SESSION_TURNS``, dated within the sample's span."""
    rng = random.Random(seed)
    first, last = sample.sessions[0][1][0].when, sample.sessions[-1][1][0].when
    span = max((last - first).total_seconds(), 1.0)
    sessions = []
    for start in range(0, n, SESSION_TURNS):
        when = first + timedelta(seconds=rng.uniform(0, span))
        events = []
        for i in range(start, min(n, start + SESSION_TURNS)):
            speaker, text = rng.choice(pool)
            text = " ".join([text, *(rng.choice(pool)[1] for _ in range(rng.randint(0, 2)))])
            events.append(NewEvent("message", "user" if i % 2 else "assistant", text,
                                   when + timedelta(seconds=30 * (i - start)),
                                   tokens=len(text) // 4, metadata={"name": speaker}))
        sessions.append((f"other_{start // SESSION_TURNS}", events))
    return sessions


class VectorCache:
    """An embedder that remembers: vectors by text (sha1), kept in one ``.npz`` per model.

    It stands in for the indexer's embedder, so the conversation's own turns get the
    same vectors on every run too (a model run in batches of other sizes differs in the
    last bits, and near-ties flip)."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner, self.path = inner, path
        self.name, self.dim = inner.name, inner.dim
        self.vectors: dict[str, np.ndarray] = {}
        if path.exists():
            data = np.load(path)
            self.vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True)
                          if k not in self.vectors}.items())
        for start in range(0, len(missing), EMBED_BATCH):
            chunk = missing[start : start + EMBED_BATCH]
            for (key, _), vector in zip(chunk, self.inner.embed([t for _, t in chunk]),
                                        strict=True):
                self.vectors[key] = vector
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.vectors[k] for k in keys]).astype(np.float32)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self.vectors)
        np.savez(self.path, keys=np.array(keys),
                 vectors=np.stack([self.vectors[k] for k in keys]))


def add_distractors(loci: Loci, sessions: list[tuple[str, list[NewEvent]]],
                    cache: VectorCache) -> None:
    """Write the distractors and give them the vectors the indexer would."""
    scope: Scope = loci.scope
    loci.wait_indexed()  # the conversation's own rows first: only distractors are left
    for session, events in sessions:
        loci.store.append_events(scope, session, events)
    while rows := loci.store.unembedded("event", 5_000, scope):
        vectors = cache.embed([text for _, _, text in rows])
        loci.store.set_embeddings(scope, "event", [key for _, key, _ in rows], vectors)


def ask(loci: Loci, sample: Sample, dia_of: dict[int, str], extra: list[Turn],
        tables: tuple[Table, Table], answers: list[dict[str, Any]]) -> list[float]:
    """Ask the sample's questions; each one's top ten (a distractor as "") is appended
    to ``answers``."""
    loci_table, bm25_table = tables
    baseline = BM25Baseline(sample.turns + extra)
    latencies = []
    for question, evidence, category in sample.questions:
        start = time.perf_counter()
        hits = loci.search_conversation(question, limit=10)
        latencies.append((time.perf_counter() - start) * 1000)
        ranked = [dia_of.get(int(h.id), "") for h in hits]
        loci_table.add(category, scores(ranked, evidence))
        bm25_table.add(category, scores(baseline.rank(question), evidence))
        answers.append({"sample": sample.sample_id, "question": question,
                        "category": category, "evidence": evidence, "top10": ranked})
    return latencies


def run(samples: list[Sample], wanted: list[Sample], n: int, embedding: str,
        cache_dir: Path, tmp: Path, answers: dict[str, list[dict[str, Any]]]
        ) -> dict[str, Any]:
    tables = {"without": (Table(), Table()), "with": (Table(), Table())}
    latency: dict[str, list[float]] = {"without": [], "with": []}
    answers.update(without=[], with_distractors=[])
    base = Loci.open(store=f"sqlite:///{tmp / 'locomo.db'}", home=tmp,
                     embedding_provider=embedding)
    with base:
        indexer = base.runtime.indexer
        name = re.sub(r"[^\w.-]", "_", indexer.embedder.name)
        cache = VectorCache(indexer.embedder, cache_dir / f"{name}.npz")
        indexer.embedder = embedder = cache
        for sample in wanted:
            loci, dia_of = ingest(base, sample)
            loci.wait_indexed()
            latency["without"] += ask(loci, sample, dia_of, [], tables["without"],
                                      answers["without"])
            sessions = distractors(sample, pool_of(samples, sample), n,
                                   seed=int(hashlib.sha1(sample.sample_id.encode())
                                            .hexdigest()[:8], 16))
            add_distractors(loci, sessions, cache)
            loci.store.wait_for_vector_index(loci.scope, "event", embedder.dim, 3600)
            extra = [Turn("", e.metadata["name"], e.content, "", e.timestamp)
                     for _, events in sessions for e in events]
            latency["with"] += ask(loci, sample, dia_of, extra, tables["with"],
                                   answers["with_distractors"])
        cache.save()
    return {name: {"loci": loci_t.report()["overall"], "bm25": bm25_t.report()["overall"],
                   "loci_by_category": loci_t.report()["by_category"],
                   "loci_r10_by_sample": by_sample(answers[key]),
                   "search_ms_p50": round(float(np.median(latency[name])), 2)}
            for (name, (loci_t, bm25_t)), key in zip(tables.items(),
                                                      ("without", "with_distractors"),
                                                      strict=True)}


def by_sample(answers: list[dict[str, Any]]) -> dict[str, float]:
    """R@10 of each conversation's questions."""
    recalls: dict[str, list[float]] = {}
    for answer in answers:
        recalls.setdefault(answer["sample"], []).append(
            scores(answer["top10"], answer["evidence"])[1])
    return {sample: round(float(np.mean(r)), 4) for sample, r in recalls.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo JSON file")
    parser.add_argument("--distractors", type=int, default=100_000)
    parser.add_argument("--samples", default="", help="comma-separated sample ids")
    parser.add_argument("--embedding", default="local", help="local (bundled) or hash")
    parser.add_argument("--cache", type=Path,
                        default=Path.home() / ".cache" / "loci-bench" / "distractors")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write each question's top ten, without and with, here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"no such file: {args.data}", file=sys.stderr)
        return 2
    samples, _ = load(args.data, None)
    names = {s.strip() for s in args.samples.split(",") if s.strip()}
    wanted = [s for s in samples if not names or s.sample_id in names]
    started = time.perf_counter()
    answers: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="loci-distractors-") as tmp:
        report = run(samples, wanted, args.distractors, args.embedding, args.cache, Path(tmp),
                     answers)
    if args.dump:
        args.dump.write_text(json.dumps(answers, indent=1))
    report = {"machine": machine(), "samples": [s.sample_id for s in wanted],
              "distractors": args.distractors, "embedding": args.embedding,
              "seconds": round(time.perf_counter() - started, 1), **report}
    print(json.dumps(report, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
