"""Save throughput with dedup on, at 100k stored facts.

Usage: python benchmarks/memory_save.py [--stored 100000] [--saves 500] [--json]

The store is bulk-loaded with synthetic facts (hash-embedded). Then facts are saved
through `Loci.remember` with dedup (keyword candidates + vector neighbours + word
overlap), half of them new and half near-duplicates of stored facts; the baseline in the
same run is the same saves with `dedupe=False`. The markdown mirror is off so the figure
is the engine's, not the file system's.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, sentence
from loci import Loci, Memory, load_settings


def load(tmp: Path, stored: int, rng: random.Random) -> tuple[Loci, list[str]]:
    settings = load_settings(store=f"sqlite:///{tmp / 'save.db'}", home=tmp,
                             embedding_provider="hash", memory_mirror=False)
    loci = Loci(settings)
    assert loci.indexer is not None
    now = datetime.now(UTC)
    texts = [sentence(rng, 12) for _ in range(stored)]
    for start in range(0, stored, 5000):
        chunk = texts[start : start + 5000]
        memories = [Memory(f"mem_{start + i:08d}", "project_context", t, (), now, now, None)
                    for i, t in enumerate(chunk)]
        vectors = loci.indexer.vectors_for(chunk)
        loci.store.put_memories(loci.scope, memories, vectors)
    return loci, texts


def workload(texts: list[str], saves: int, rng: random.Random) -> list[str]:
    new = [sentence(rng, 12) for _ in range(saves // 2)]
    near = []
    for text in rng.sample(texts, saves - saves // 2):
        words = text.split()
        words[rng.randrange(len(words))] = "changed"
        near.append(" ".join(words))
    items = new + near
    rng.shuffle(items)
    return items


def timed_saves(loci: Loci, items: list[str], dedupe: bool) -> tuple[float, dict[str, int]]:
    actions: dict[str, int] = {}
    start = time.perf_counter()
    for text in items:
        result = loci._memories.save(text, "project_context", dedupe=dedupe)
        actions[result.action] = actions.get(result.action, 0) + 1
    return len(items) / (time.perf_counter() - start), actions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stored", type=int, default=100_000)
    parser.add_argument("--saves", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as name:
        loci, texts = load(Path(name), args.stored, rng)
        loci.memory_search("warm up the vector index")
        with_dedup, actions = timed_saves(loci, workload(texts, args.saves, rng), True)
        without, _ = timed_saves(loci, workload(texts, args.saves, rng), False)
        loci.close()
    report = {
        "machine": machine(),
        "stored": args.stored,
        "saves_per_s_dedup": round(with_dedup, 1),
        "saves_per_s_no_dedup": round(without, 1),
        "dedup_cost_ratio": round(without / with_dedup, 2),
        "actions": actions,
    }
    print(json.dumps(report) if args.json else "\n".join(f"{k}: {v}" for k, v in report.items()))


if __name__ == "__main__":
    main()
