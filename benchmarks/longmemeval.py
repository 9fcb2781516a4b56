"""A new session over a long history: what the compiled context holds of the answers.

Each LongMemEval_S question's history (~48 sessions, ~500 turns, ~100k tokens) is lived
through the public API in its own scope: one Loci session per history session, in date
order, the engine's clock at that session's date, ``add`` for the user's turns and
``add_reply`` for the assistant's, ``end_session`` after each (the librarian). Then the
question is compiled in a NEW session at each window, and measured:

- **answer**: the share of the answer's content words (lowercased, stop words out, light
  stemming) in the compiled messages, the question itself and Loci's "Today is …" line
  left out (abstention questions, ``_abs``, are not scored);
- **unasked**: the same, of the answer's words that the question does not hold (the
  question is the model's already: "did I switch to more water per tablespoon, or
  less?" credits any context that repeats "switch", "per" and "less");
- **evidence**: the share of the evidence turns (``has_answer``) of which at least half
  the content words are in the context;
- its tokens, and turn and session recall@10 of ``search_conversation``.

For memories alone (``memories``): the share of the answer's content words in the top
10 of memory search for the question, against the 10 sentences of the user's turns
that BM25 ranks highest (``sentences``: a memory must be worth more than the sentence it
came from); what the memory holds (``memory_quality.quality``: offenders, near-
duplicates, memories per 100 turns); and, with ``--calibrate``, the score floor that
keeps 95% of the search hits (memories and turns, as recall searches) that hold words
of the answer (``loci.search.relevance.calibrated_floor``).

Baselines in the same run, same questions, same token count as Loci's context:
**recency** (the last N tokens of the dated ``role: text`` transcript), **bm25** (the
history's turns ranked by BM25 for the question, the best first until N tokens) and
**full** (the whole history). A reference, not a baseline: **sessions**, the sessions
that hold the evidence, in full (what a perfect choice of sessions shows, at any size;
"full" also counts answer words that other sessions happen to use).

    python benchmarks/longmemeval.py [--data ../shared/data/longmemeval/longmemeval_s_dev.jsonl.gz]
        [--windows 8000,16000] [--limit 0] [--per-type 0] [--types multi-session,...]
        [--embedder local] [--store-dir DIR] [--calibrate] [--json]

With ``--store-dir``, histories ingested once are reused by later runs (to compare
compile-time changes; ingest-time changes need a fresh directory).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import machine
from conversation_memory import _WORD, compiled_text, content_words, coverage, stem, tail
from loci import Loci
from loci.search.query import STOPWORDS
from loci.tokens import token_counter
from memory_quality import finish, merged, quality

TYPES = ("single-session-user", "single-session-assistant", "single-session-preference",
         "multi-session", "temporal-reasoning", "knowledge-update")
TOP_K = 10
#: An evidence turn counts as shown when this share of its content words is in context.
EVIDENCE_SHARE = 0.5
#: Hits searched per question for the calibration: as many as recall weighs.
CALIBRATION_HITS = 40
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class Turn:
    session: str
    when: datetime
    role: str
    text: str
    evidence: bool


def when(text: str) -> datetime:
    """``2023/05/20 (Sat) 02:21`` as a UTC time."""
    day, _, clock = text.split(" ")
    return datetime.strptime(f"{day} {clock}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def history(row: dict[str, Any]) -> list[list[Turn]]:
    """The question's sessions in date order (the file's order is not always)."""
    sessions = []
    for n, (sid, date, turns) in enumerate(zip(row["haystack_session_ids"], row["haystack_dates"],
                                               row["haystack_sessions"], strict=True)):
        name = f"{n:02d}-{sid}"[:120]
        sessions.append([Turn(name, when(date), t["role"], t["content"],
                              bool(t.get("has_answer"))) for t in turns if t["content"].strip()])
    return sorted((s for s in sessions if s), key=lambda s: s[0].when)


def ingest(base: Loci, row: dict[str, Any], sessions: list[list[Turn]]) -> Loci:
    """The question's history lived in its own scope (kept from an earlier run of the same
    store: ``--store-dir``)."""
    clock: dict[str, datetime] = {}
    user = "q" + hashlib.sha1(row["question_id"].encode()).hexdigest()[:12]
    loci = base.for_scope(user=user)
    loci.clock = lambda: clock["now"]
    if loci.sessions():
        clock["now"] = when(row["question_date"])
        return loci
    for turns in sessions:
        clock["now"] = turns[0].when
        for turn in turns:
            if turn.role == "user":
                loci.add(turn.session, "user", turn.text)
            else:
                loci.add_reply(turn.session, turn.text)
        finish(loci, turns[0].session)
    clock["now"] = when(row["question_date"])
    return loci


def transcript(sessions: list[list[Turn]]) -> list[str]:
    lines = []
    for turns in sessions:
        lines.append(f"[{turns[0].when:%d %B %Y}]")
        lines.extend(f"{t.role}: {t.text}" for t in turns)
    return lines


class BM25:
    """Plain Okapi BM25 (k1 1.2, b 0.75) over turns, with the benchmark's own words."""

    def __init__(self, texts: list[str]) -> None:
        self.docs = [Counter(_tokens(t)) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.average = statistics.mean(self.lengths) if self.lengths else 1.0
        df: Counter[str] = Counter()
        for doc in self.docs:
            df.update(doc.keys())
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def ranked(self, query: str) -> list[int]:
        words = set(_tokens(query))
        scores = []
        for i, doc in enumerate(self.docs):
            norm = 1.2 * (0.25 + 0.75 * self.lengths[i] / self.average)
            score = sum(self.idf[w] * doc[w] * 2.2 / (doc[w] + norm) for w in words if w in doc)
            if score > 0:
                scores.append((score, i))
        return [i for _, i in sorted(scores, reverse=True)]


def _tokens(text: str) -> list[str]:
    return [stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def bm25_cut(turns: list[Turn], ranker: BM25, question: str, tokens: int, count: Any) -> str:
    kept: list[str] = []
    used = 0
    for i in ranker.ranked(question):
        line = f"[{turns[i].when:%d %B %Y}] {turns[i].role}: {turns[i].text}"
        cost = count(line) + 1
        if used + cost > tokens:
            continue  # a shorter turn further down may still fit
        kept.append(line)
        used += cost
    return "\n".join(kept)


def evidence_shown(turns: list[Turn], words: set[str]) -> float | None:
    wanted = [content_words(t.text) for t in turns if t.evidence]
    wanted = [w for w in wanted if w]
    if not wanted:
        return None
    return sum(len(w & words) >= EVIDENCE_SHARE * len(w) for w in wanted) / len(wanted)


def unasked(row: dict[str, Any], words: set[str]) -> float | None:
    """The share of the answer's words that the question does not hold, in ``words``
    (the question is the model's already: a context that repeats its words is not
    credited for them; None if the answer has no other words)."""
    wanted = content_words(str(row["answer"])) - content_words(row["question"])
    return len(wanted & words) / len(wanted) if wanted else None


def recall_at_k(loci: Loci, row: dict[str, Any], turns: list[Turn]) -> tuple[float, float]:
    hits = loci.search_conversation(row["question"], limit=TOP_K)
    evidence = {" ".join(t.text.split()) for t in turns if t.evidence}
    found = {" ".join(h.text.split()) for h in hits} & evidence
    answer_sessions = {str(s) for s in row["answer_session_ids"]}
    hit_sessions = {h.session.split("-", 1)[1] for h in hits if h.session and "-" in h.session}
    turn_recall = len(found) / len(evidence) if evidence else 1.0
    session_recall = (len(hit_sessions & answer_sessions) / len(answer_sessions)
                      if answer_sessions else 1.0)
    return turn_recall, session_recall


def user_sentences(turns: list[Turn]) -> list[str]:
    return [piece.strip() for t in turns if t.role == "user"
            for piece in _SENTENCE_END.split(t.text) if piece.strip()]


def memories_alone(loci: Loci, row: dict[str, Any], sentences: list[str],
                   ranker: BM25) -> tuple[float, float] | None:
    """Answer coverage of the top 10 of memory search, and of the 10 user sentences
    BM25 ranks highest (None for abstention questions)."""
    if row["question_id"].endswith("_abs"):
        return None
    answer = str(row["answer"])
    found = " ".join(h.text for h in loci.search(row["question"], TOP_K))
    best = " ".join(sentences[i] for i in ranker.ranked(row["question"])[:TOP_K])
    memory, baseline = coverage(answer, content_words(found)), coverage(
        answer, content_words(best))
    return None if memory is None or baseline is None else (memory, baseline)


def answer_scores(loci: Loci, row: dict[str, Any]) -> list[float]:
    """The scores of the hits, searched as recall searches, that hold answer words."""
    wanted = content_words(str(row["answer"]))
    hits = loci.search(row["question"], CALIBRATION_HITS, kinds=("memory", "event"))
    return [h.score for h in hits if wanted & content_words(h.text)]


def run(rows: list[dict[str, Any]], windows: list[int], home: Path, embedder: str,
        stores: Path | None = None, calibrate: bool = False) -> list[dict[str, Any]]:
    model = "chat-128k"
    db = (stores or home) / f"lme-{embedder}.db"
    base = Loci.open(home=str(home), store=f"sqlite:///{db}", model=model,
                     models={model: 128_000}, memory_mirror=False, workspace=str(home),
                     embedding_provider=embedder)
    counter = token_counter(model)
    scores: dict[int, dict[str, dict[str, list[float]]]] = {
        w: defaultdict(lambda: defaultdict(list)) for w in windows}
    tokens: dict[int, list[int]] = {w: [] for w in windows}
    compile_ms: dict[int, list[float]] = {w: [] for w in windows}
    recalls: list[tuple[float, float]] = []
    full_tokens: list[int] = []
    alone: dict[str, list[tuple[float, float]]] = defaultdict(list)
    held: list[dict[str, Any]] = []
    calibration: list[float] = []
    for row in rows:
        sessions = history(row)
        turns = [t for s in sessions for t in s]
        loci = ingest(base, row, sessions)
        loci.wait_indexed()
        lines = transcript(sessions)
        full_tokens.append(counter.count("\n".join(lines)))
        ranker = BM25([t.text for t in turns])
        recalls.append(recall_at_k(loci, row, turns))
        sentences = user_sentences(turns)
        pair = memories_alone(loci, row, sentences, BM25(sentences))
        if pair is not None:
            for key in (row["question_type"], "all"):
                alone[key].append(pair)
        held.append(quality(loci, len(turns)))
        if calibrate:
            calibration += answer_scores(loci, row)
        scored = not row["question_id"].endswith("_abs")
        for window in windows:
            started = time.perf_counter()
            compiled = loci.compile(f"question-{window}", row["question"], model=model,
                                    window=window)
            compile_ms[window].append((time.perf_counter() - started) * 1000)
            used = compiled.total_tokens
            tokens[window].append(used)
            contexts = {
                "loci": compiled_text(compiled),
                "recency": tail(lines, used, counter.count),
                "bm25": bm25_cut(turns, ranker, row["question"], used, counter.count),
                "full": "\n".join(lines),
                "sessions": "\n".join(transcript([s for s in sessions
                                                  if any(t.evidence for t in s)])),
            }
            for name, text in contexts.items():
                words = content_words(text)
                for metric, value in (("answer", coverage(str(row["answer"]), words)
                                       if scored else None),
                                      ("unasked", unasked(row, words) if scored else None),
                                      ("evidence", evidence_shown(turns, words))):
                    if value is not None:
                        for key in (row["question_type"], "all"):
                            scores[window][f"{name}|{metric}"][key].append(value)
    base.close()
    reports = []
    for window in windows:
        report: dict[str, Any] = {"window": window, "questions": len(rows)}
        for name, table in scores[window].items():
            for key in (*TYPES, "all"):
                values = table.get(key) or []
                report[f"{name}|{key}"] = round(statistics.mean(values), 3) if values else None
        report.update(
            tokens_mean=round(statistics.mean(tokens[window])),
            reduction=round(1 - sum(tokens[window]) / sum(full_tokens), 3),
            turn_recall_at_10=round(statistics.mean(r[0] for r in recalls), 3),
            session_recall_at_10=round(statistics.mean(r[1] for r in recalls), 3),
            compile_p50_ms=round(statistics.median(compile_ms[window]), 1),
        )
        for key in (*TYPES, "all"):
            pairs = alone.get(key) or []
            report[f"memories|{key}"] = (round(statistics.mean(p[0] for p in pairs), 3)
                                         if pairs else None)
            report[f"sentences|{key}"] = (round(statistics.mean(p[1] for p in pairs), 3)
                                          if pairs else None)
        report["memory_quality"] = merged(held)
        if calibrate:
            from loci.search.relevance import calibrated_floor
            report["calibrated_floor"] = round(calibrated_floor(calibration), 3)
            report["calibration_hits"] = len(calibration)
        reports.append(report)
    return reports


def print_report(report: dict[str, Any]) -> None:
    print(f"\n== window {report['window']:,}: {report['questions']} questions, context "
          f"{report['tokens_mean']:,} tokens on average ({report['reduction']:.0%} smaller "
          f"than the history), search recall@10: turns {report['turn_recall_at_10']}, "
          f"sessions {report['session_recall_at_10']}; compile p50 "
          f"{report['compile_p50_ms']} ms")
    names = ("loci", "recency", "bm25", "full", "sessions")
    for metric in ("answer", "unasked", "evidence"):
        print(f"{metric:>26} " + " ".join(f"{n:>8}" for n in names))
        for key in (*TYPES, "all"):
            cells = [report.get(f"{n}|{metric}|{key}") for n in names]
            print(f"{key:>26} " + " ".join(f"{'-' if c is None else c:>8}" for c in cells))
    print(f"{'memories alone: answer':>26} {'memories':>8} {'bm25 top10 sentences':>21}")
    for key in (*TYPES, "all"):
        cells = [report.get(f"{n}|{key}") for n in ("memories", "sentences")]
        print(f"{key:>26} " + " ".join(f"{'-' if c is None else c:>8}" for c in cells))
    held = report["memory_quality"]
    print(f"memories: {held['memories']} from {held['turns']} turns ({held['per_100_turns']} "
          f"per 100 turns), {held['near_duplicates']} near-duplicates, offenders "
          f"{held['offenders']} {held['offenders_examples']}; profile: "
          f"{held['profile_lines']} lines, offenders {held['profile_offenders']} "
          f"{held['profile_offenders_examples']}")
    if "calibrated_floor" in report:
        print(f"calibrated floor: {report['calibrated_floor']} (keeps 95% of "
              f"{report['calibration_hits']} answer-holding hits)")


def load(path: Path, limit: int, types: set[str], per_type: int) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    rows = [r for r in rows if not types or r["question_type"] in types]
    if per_type:
        taken: Counter[str] = Counter()
        for row in rows:
            taken[row["question_type"]] += 1
            row["_rank"] = taken[row["question_type"]]
        rows = [r for r in rows if r["_rank"] <= per_type]
    return rows[:limit] if limit else rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(
        "../shared/data/longmemeval/longmemeval_s_dev.jsonl.gz"))
    parser.add_argument("--windows", default="8000,16000")
    parser.add_argument("--limit", type=int, default=0, help="the first N questions only")
    parser.add_argument("--types", default="", help="comma-separated question types")
    parser.add_argument("--per-type", type=int, default=0,
                        help="the first N questions of each type only")
    parser.add_argument("--embedder", default="local", help="local (default), hash or none")
    parser.add_argument("--store-dir", type=Path, default=None,
                        help="keep the ingested histories here and reuse them (compile only)")
    parser.add_argument("--calibrate", action="store_true",
                        help="report the score floor that keeps 95%% of answer-holding hits")
    parser.add_argument("--json", action="store_true", help="one JSON line per window")
    args = parser.parse_args(argv)
    data = args.data.resolve()
    if args.store_dir is not None:
        args.store_dir = args.store_dir.resolve()
        args.store_dir.mkdir(parents=True, exist_ok=True)
    if not data.is_file():
        print(f"no such file: {data}", file=sys.stderr)
        return 2
    rows = load(data, args.limit, {t for t in args.types.split(",") if t}, args.per_type)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="loci-lme-") as tmp:
        os.chdir(tmp)  # no workspace files of the caller's directory in the contexts
        reports = run(rows, [int(w) for w in args.windows.split(",")], Path(tmp), args.embedder,
                      args.store_dir, args.calibrate)
    for report in reports:
        if args.json:
            print(json.dumps(report))
        else:
            print_report(report)
    print(f"{len(rows)} questions, {round(time.perf_counter() - started)} s, {machine()}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
