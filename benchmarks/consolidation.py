"""Consolidation on the LongMemEval dev histories: what it proposes, and what memories
alone hold of the answers before and after applying it.

Each question's history is lived through the public API as ``benchmarks/longmemeval.py``
lives it (its loaders, read-only: one Loci session per history session, the clock at its
date, ``end_session`` after each, so the memories are what extraction made of it). Then:

- **proposals**: ``Loci.consolidate()`` (offline rules), counted by kind, then applied
  with ``apply_consolidation`` (as a person accepting it would);
- **memory coverage**: the share of the answer's content words in the top 10 of memory
  search for the question (memories alone, no conversation), before and after applying;
  baseline in the same run: the 10 user turns of the history BM25 ranks highest;
- **knowledge-update** questions: whether the newest value is in an active memory of the
  top 10 (the answer's words, half of them at least, in one such memory), and of the
  memories extracted from an earlier evidence turn that the top 10 shows, how many are
  marked superseded or expired;
- the active memories per question, and how long proposing and applying took.

    python benchmarks/consolidation.py
        [--data ../shared/data/longmemeval/longmemeval_s_dev.jsonl.gz] [--per-type 5]
        [--limit 0] [--types knowledge-update,...] [--embedder local] [--store-dir DIR]
        [--json]

With ``--store-dir`` the ingested histories are kept and reused (consolidation is then
applied to the kept stores: use a fresh copy for each run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from common import machine
from conversation_memory import content_words, coverage
from loci import Loci
from longmemeval import BM25, TOP_K, TYPES, Turn, history, ingest, load

#: A memory holds a value when at least this share of the answer's words is in it.
VALUE_SHARE = 0.5


def memory_lines(loci: Loci, question: str) -> list[tuple[str, str, str]]:
    """The top 10 of memory search: (id, text, status), as an agent's tool sees them."""
    return [(s.id, loci.memory(s.id).content, s.status)
            for s in loci.memory_search(question, limit=TOP_K)]


def covered(answer: str, lines: list[tuple[str, str, str]]) -> float | None:
    return coverage(answer, content_words("\n".join(text for _, text, _ in lines)))


def knowledge_update(loci: Loci, row: dict[str, Any], turns: list[Turn],
                     lines: list[tuple[str, str, str]]) -> dict[str, int]:
    """Newest value in an active memory; older evidence shown, and marked as such."""
    wanted = content_words(str(row["answer"]))
    newest = any(status == "active" and wanted and len(wanted & content_words(text))
                 >= VALUE_SHARE * len(wanted) for _, text, status in lines)
    evidence = [t for t in turns if t.evidence and t.role == "user"]
    latest = max((t.when for t in evidence), default=None)
    older = {" ".join(t.text.split()) for t in evidence if t.when != latest}
    events = {e.id: " ".join(e.content.split()) for s in loci.sessions()
              for e in loci.events(s.id)}
    shown_old = marked = 0
    for memory_id, _, status in lines:
        source = loci.memory(memory_id).source or ""
        if source.startswith("event:") and events.get(int(source[6:])) in older:
            shown_old += 1
            marked += status != "active"
    return {"newest_active": int(newest), "older_shown": shown_old, "older_marked": marked}


def record(table: dict[str, list[float]], row: dict[str, Any],
           lines: list[tuple[str, str, str]]) -> None:
    """The answer's coverage by ``lines``, under the question's type and "all"
    (abstention questions are not scored)."""
    value = (None if row["question_id"].endswith("_abs")
             else covered(str(row["answer"]), lines))
    if value is not None:
        for key in (row["question_type"], "all"):
            table[key].append(value)


def bm25_lines(turns: list[Turn], question: str) -> list[tuple[str, str, str]]:
    users = [t for t in turns if t.role == "user"]
    ranked = BM25([t.text for t in users]).ranked(question)[:TOP_K]
    return [("", users[i].text, "active") for i in ranked]


def run(rows: list[dict[str, Any]], home: Path, embedder: str,
        stores: Path | None) -> dict[str, Any]:
    db = (stores or home) / f"lme-{embedder}.db"
    base = Loci.open(home=str(home), store=f"sqlite:///{db}", model="chat-128k",
                     models={"chat-128k": 128_000}, memory_mirror=False,
                     workspace=str(home), embedding_provider=embedder)
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    proposed: Counter[str] = Counter()
    ku: dict[str, Counter[str]] = {"before": Counter(), "after": Counter()}
    counts: dict[str, list[int]] = {"before": [], "after": []}
    timing: dict[str, list[float]] = {"propose": [], "apply": []}
    for row in rows:
        sessions = history(row)
        turns = [t for s in sessions for t in s]
        loci = ingest(base, row, sessions)
        loci.wait_indexed()
        record(scores["bm25"], row, bm25_lines(turns, row["question"]))
        for stage in ("before", "after"):
            if stage == "after":
                started = time.perf_counter()
                proposal = loci.consolidate()
                timing["propose"].append(time.perf_counter() - started)
                proposed.update({k: n for k, n in proposal.counts().items() if n})
                started = time.perf_counter()
                loci.apply_consolidation(proposal.id)
                timing["apply"].append(time.perf_counter() - started)
                loci.wait_indexed()
            counts[stage].append(len(loci.memories()))
            lines = memory_lines(loci, row["question"])
            record(scores[stage], row, lines)
            if row["question_type"] == "knowledge-update":
                ku[stage].update(knowledge_update(loci, row, turns, lines))
    base.close()
    report: dict[str, Any] = {"questions": len(rows), "proposed": dict(proposed)}
    for stage, table in scores.items():
        for key in (*TYPES, "all"):
            values = table.get(key) or []
            report[f"{stage}|{key}"] = round(statistics.mean(values), 3) if values else None
    for stage in ("before", "after"):
        report[f"memories_{stage}"] = round(statistics.mean(counts[stage]), 1)
        report[f"ku_{stage}"] = dict(ku[stage])
    report["ku_questions"] = sum(r["question_type"] == "knowledge-update" for r in rows)
    report["propose_p50_s"] = round(statistics.median(timing["propose"]), 3)
    report["apply_p50_s"] = round(statistics.median(timing["apply"]), 3)
    return report


def print_report(report: dict[str, Any]) -> None:
    print(f"{report['questions']} questions; proposed: {report['proposed']}; "
          f"active memories per question {report['memories_before']} -> "
          f"{report['memories_after']}; propose p50 {report['propose_p50_s']} s, "
          f"apply p50 {report['apply_p50_s']} s")
    print(f"{'answer coverage, top 10':>26} {'before':>8} {'after':>8} {'bm25':>8}")
    for key in (*TYPES, "all"):
        cells = [report.get(f"{stage}|{key}") for stage in ("before", "after", "bm25")]
        print(f"{key:>26} " + " ".join(f"{'-' if c is None else c:>8}" for c in cells))
    n = report["ku_questions"]
    for stage in ("before", "after"):
        k = report[f"ku_{stage}"]
        print(f"knowledge-update {stage}: newest value active in {k.get('newest_active', 0)}"
              f"/{n}; older evidence shown {k.get('older_shown', 0)}, marked "
              f"{k.get('older_marked', 0)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(
        "../shared/data/longmemeval/longmemeval_s_dev.jsonl.gz"))
    parser.add_argument("--limit", type=int, default=0, help="the first N questions only")
    parser.add_argument("--types", default="", help="comma-separated question types")
    parser.add_argument("--per-type", type=int, default=5,
                        help="the first N questions of each type (0: all)")
    parser.add_argument("--embedder", default="local", help="local (default), hash or none")
    parser.add_argument("--store-dir", type=Path, default=None,
                        help="keep the ingested histories here (consolidation changes them)")
    parser.add_argument("--json", action="store_true", help="the report as one JSON line")
    args = parser.parse_args(argv)
    data = args.data.resolve()
    if not data.is_file():
        print(f"no such file: {data}", file=sys.stderr)
        return 2
    if args.store_dir is not None:
        args.store_dir = args.store_dir.resolve()
        args.store_dir.mkdir(parents=True, exist_ok=True)
    rows = load(data, args.limit, {t for t in args.types.split(",") if t}, args.per_type)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="loci-consolidation-") as tmp:
        os.chdir(tmp)  # no workspace files of the caller's directory
        report = run(rows, Path(tmp), args.embedder, args.store_dir)
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
    print(f"{len(rows)} questions, {round(time.perf_counter() - started)} s, {machine()}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
