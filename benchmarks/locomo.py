"""LoCoMo retrieval benchmark: turn-level recall of Loci's conversation search.

Usage: python benchmarks/locomo.py --data ../shared/data/locomo/locomo_dev.json [--json]
       [--samples conv-26,conv-30]

Each LoCoMo conversation is ingested through the public API: one Loci user per
conversation, one Loci session per LoCoMo session, the session's date as the timestamp
of its turns, each turn a message event whose metadata carries its ``dia_id``, the
speaker's ``name`` and an image's ``caption`` (the conventions of
``loci.search.conversation``). Every question with evidence is then asked of
``search_conversation`` over its own conversation, and the top ten turns are scored:

- R@k: the share of the question's evidence turns in the top k (LoCoMo's definition);
- NDCG@10 with binary relevance;

per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial) and
overall (1-5, and 1-4). A BM25 baseline is computed in the same run with ``bm25s``
(lowercase, English stop words, Snowball stemming, turns as ``Speaker said, "text" and
shared <caption>``). Malformed evidence ids are repaired as the data's README says
(split on ``;``, stray colon, leading zeros); ids that still name no turn are dropped
and counted. ``--json`` prints one JSON object; notes (dropped evidence, latency) go to
standard error.

The data is CC BY-NC 4.0 and is never shipped with Loci: pass its path.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loci import Loci

CATEGORIES = ("1", "2", "3", "4", "5")
BM25_HINT = "pip install bm25s==0.3.16 PyStemmer==3.1.0"
_ID = re.compile(r"D:?(\d+):0*(\d+)")


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str
    when: datetime


@dataclass
class Sample:
    sample_id: str
    sessions: list[tuple[int, list[Turn]]]
    questions: list[tuple[str, list[str], str]] = field(default_factory=list)

    @property
    def turns(self) -> list[Turn]:
        return [t for _, turns in self.sessions for t in turns]


@dataclass
class Evidence:
    repaired: int = 0
    dropped: int = 0
    no_evidence: int = 0


def load(path: Path, wanted: set[str] | None) -> tuple[list[Sample], Evidence]:
    """The samples of a LoCoMo file, with repaired evidence ids."""
    evidence = Evidence()
    samples = []
    for raw in json.loads(path.read_text(encoding="utf-8")):
        if wanted and raw["sample_id"] not in wanted:
            continue
        conv = raw["conversation"]
        numbers = sorted(int(k.split("_")[1]) for k, v in conv.items()
                         if re.fullmatch(r"session_\d+", k) and v)
        sessions = []
        for n in numbers:
            when = datetime.strptime(conv[f"session_{n}_date_time"].strip(),
                                     "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
            sessions.append((n, [
                Turn(t["dia_id"], t["speaker"], t["text"], t.get("blip_caption") or "", when)
                for t in conv[f"session_{n}"]
            ]))
        sample = Sample(raw["sample_id"], sessions)
        known = {t.dia_id for t in sample.turns}
        for qa in raw["qa"]:
            ids = _repair(qa["evidence"], known, evidence)
            if ids:
                sample.questions.append((qa["question"], ids, str(qa["category"])))
            else:
                evidence.no_evidence += 1
        samples.append(sample)
    return samples, evidence


def _repair(ids: list[str], known: set[str], evidence: Evidence) -> list[str]:
    out: list[str] = []
    for raw in ids:
        for part in raw.split(";"):
            part = part.strip()
            match = _ID.fullmatch(part)
            fixed = f"D{int(match[1])}:{int(match[2])}" if match else part
            if fixed in known:
                evidence.repaired += fixed != raw
                out.append(fixed)
            else:
                evidence.dropped += 1
    return list(dict.fromkeys(out))


def ingest(base: Loci, sample: Sample) -> tuple[Loci, dict[int, str]]:
    """One Loci user for the conversation; returns it and event id → dia_id."""
    loci = base.for_scope(user=sample.sample_id)
    first_speaker = sample.sessions[0][1][0].speaker
    dia_of: dict[int, str] = {}
    for number, turns in sample.sessions:
        events = []
        for turn in turns:
            metadata: dict[str, Any] = {"dia_id": turn.dia_id, "name": turn.speaker}
            if turn.caption:
                metadata["caption"] = turn.caption
            events.append({
                "type": "message", "content": turn.text, "timestamp": turn.when,
                "role": "user" if turn.speaker == first_speaker else "assistant",
                "metadata": metadata,
            })
        for event in loci.add_events(f"session_{number}", events):
            dia_of[event.id] = event.metadata["dia_id"]
    return loci, dia_of


def scores(ranked: list[str], evidence: list[str]) -> tuple[float, float, float]:
    """R@5, R@10 and NDCG@10 of one ranking."""
    relevant = set(evidence)
    top = ranked[:10]
    dcg = sum(1 / math.log2(r + 2) for r, d in enumerate(top) if d in relevant)
    ideal = sum(1 / math.log2(r + 2) for r in range(min(len(relevant), 10)))
    return (len(relevant & set(top[:5])) / len(relevant),
            len(relevant & set(top)) / len(relevant), dcg / ideal)


class Table:
    """Metric sums per category."""

    def __init__(self) -> None:
        self.sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])

    def add(self, category: str, values: tuple[float, float, float]) -> None:
        for key in (category, "all", *(("1-4",) if category != "5" else ())):
            row = self.sums[key]
            for i, v in enumerate(values):
                row[i] += v
            row[3] += 1

    def metrics(self, key: str) -> dict[str, float]:
        r5, r10, ndcg, n = self.sums[key]
        n = n or 1
        return {"R@5": round(r5 / n, 4), "R@10": round(r10 / n, 4),
                "NDCG@10": round(ndcg / n, 4)}

    def count(self, key: str) -> int:
        return int(self.sums[key][3])

    def report(self) -> dict[str, Any]:
        return {
            "overall": self.metrics("all"),
            "overall_1_4": self.metrics("1-4"),
            "by_category": {c: self.metrics(c) for c in CATEGORIES if self.count(c)},
        }


class BM25Baseline:
    """bm25s over one conversation's turns, by the README's recipe."""

    def __init__(self, turns: list[Turn]) -> None:
        try:
            import bm25s
            import Stemmer
        except ImportError:
            sys.exit(f"the BM25 baseline needs bm25s and PyStemmer: {BM25_HINT}")
        self._bm25s = bm25s
        self._stemmer = Stemmer.Stemmer("english")
        self.ids = [t.dia_id for t in turns]
        texts = [f'{t.speaker} said, "{t.text}"' + (f" and shared {t.caption}"
                                                     if t.caption else "") for t in turns]
        self.retriever = bm25s.BM25()
        self.retriever.index(self._tokens(texts), show_progress=False)

    def _tokens(self, texts: list[str]) -> Any:
        return self._bm25s.tokenize(texts, stopwords="en", stemmer=self._stemmer,
                                    show_progress=False)

    def rank(self, question: str) -> list[str]:
        k = min(10, len(self.ids))
        docs, _ = self.retriever.retrieve(self._tokens([question]), k=k, show_progress=False)
        return [self.ids[int(i)] for i in docs[0]]


def run(samples: list[Sample], store_dir: Path) -> tuple[Table, Table, dict[str, Any]]:
    loci_table, bm25_table = Table(), Table()
    latencies: list[float] = []
    ingest_seconds = 0.0
    base = Loci.open(store=f"sqlite:///{store_dir / 'locomo.db'}", home=store_dir)
    with base:
        for sample in samples:
            start = time.perf_counter()
            loci, dia_of = ingest(base, sample)
            loci.wait_indexed()  # writes return before their vectors
            ingest_seconds += time.perf_counter() - start
            baseline = BM25Baseline(sample.turns)
            for question, evidence, category in sample.questions:
                start = time.perf_counter()
                hits = loci.search_conversation(question, limit=10)
                latencies.append((time.perf_counter() - start) * 1000)
                ranked = [dia_of[int(h.id)] for h in hits]
                loci_table.add(category, scores(ranked, evidence))
                bm25_table.add(category, scores(baseline.rank(question), evidence))
        provider = base.settings.embedding.provider
    ordered = sorted(latencies)
    notes = {
        "embedding_provider": provider,
        "turns": sum(len(s.turns) for s in samples),
        "ingest_seconds": round(ingest_seconds, 2),
        "search_ms_p50": round(statistics.median(ordered), 2) if ordered else 0.0,
        "search_ms_p95": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 2)
        if ordered else 0.0,
    }
    return loci_table, bm25_table, notes


def print_table(loci: Table, bm25: Table) -> None:
    head = f"{'category':<16}{'n':>6}  {'R@5':>6} {'R@10':>6} {'NDCG@10':>8}"
    print(f"{head}   | BM25 {'R@5':>6} {'R@10':>6} {'NDCG@10':>8}")
    names = {"1": "1 multi-hop", "2": "2 temporal", "3": "3 open-domain",
             "4": "4 single-hop", "5": "5 adversarial", "all": "overall 1-5",
             "1-4": "overall 1-4"}
    for key in (*CATEGORIES, "all", "1-4"):
        if not loci.count(key):
            continue
        a, b = loci.metrics(key), bm25.metrics(key)
        print(f"{names[key]:<16}{loci.count(key):>6}  {a['R@5']:>6.3f} {a['R@10']:>6.3f} "
              f"{a['NDCG@10']:>8.3f}   |      {b['R@5']:>6.3f} {b['R@10']:>6.3f} "
              f"{b['NDCG@10']:>8.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo JSON file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--samples", default="",
                        help="comma-separated sample ids to keep (default: all)")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"no such file: {args.data}", file=sys.stderr)
        return 2
    wanted = {s.strip() for s in args.samples.split(",") if s.strip()} or None
    started = time.perf_counter()
    samples, evidence = load(args.data, wanted)
    with tempfile.TemporaryDirectory(prefix="loci-locomo-") as tmp:
        loci_table, bm25_table, notes = run(samples, Path(tmp))
    seconds = round(time.perf_counter() - started, 1)
    questions = loci_table.count("all")
    notes.update(evidence_repaired=evidence.repaired, evidence_dropped=evidence.dropped,
                 questions_without_evidence=evidence.no_evidence)
    if args.json:
        print(json.dumps({**loci_table.report(), "bm25": bm25_table.report(),
                          "questions": questions, "seconds": seconds}))
        print(json.dumps(notes), file=sys.stderr)
    else:
        print(f"LoCoMo turn retrieval: {len(samples)} conversations, {notes['turns']} turns, "
              f"{questions} questions, {seconds} s")
        print_table(loci_table, bm25_table)
        print("; ".join(f"{k}: {v}" for k, v in notes.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
