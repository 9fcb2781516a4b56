"""Conversation memory on real dialogues: what the compiled context keeps of the answers.

Each LoCoMo conversation becomes ONE Loci session, ingested through the public API as a
chat agent would live it: speaker A's turns are user messages (``add``), speaker B's are
replies (``add_reply``, which applies the compaction policy), speaker names and
``dia_id`` in metadata, each LoCoMo session's date as the timestamps and as the
engine's clock; between LoCoMo sessions the clock jumps to the next date and the
policy is applied again (an agent's sleep time). Then, for every question of
categories 1-4, the context compiled for the question is measured:

- **coverage**: the share of the answer's content words (lowercased, stop words out,
  light stemming) found in the compiled messages, leaving out the question itself and
  Loci's own "Today is … User: …" line;
- its tokens, and whether the evidence turns are in ``search_conversation``'s top 10.

Baselines in the same run, same questions: **recency** (the last N tokens of the
``Speaker: text`` transcript with a date line per LoCoMo session, N = that context's
own token count) and **full** (the whole transcript).

    python benchmarks/conversation_memory.py --data ../shared/data/locomo/locomo_dev.json
        [--window 16000] [--samples conv-26] [--json]

The data is CC BY-NC 4.0 and is never shipped with Loci: pass its path.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from common import machine
from loci import Loci
from loci.search.query import STOPWORDS
from loci.tokens import token_counter
from locomo import Sample, load

CATEGORIES = ("1", "2", "3", "4")
_WORD = re.compile(r"[a-z0-9]+")
_DATE_LINE = re.compile(r"Today is [^\n]*?User: [^\n]*?\.")


def stem(word: str) -> str:
    for suffix in ("ing", "ies", "es", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def content_words(text: str) -> set[str]:
    return {stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def coverage(answer: str, haystack: set[str]) -> float | None:
    wanted = content_words(answer)
    return len(wanted & haystack) / len(wanted) if wanted else None


def answers(path: Path) -> dict[str, list[tuple[str, str, list[str], str]]]:
    """sample id → (question, answer, evidence, category) of categories 1-4."""
    out: dict[str, list[tuple[str, str, list[str], str]]] = {}
    for raw in json.loads(path.read_text(encoding="utf-8")):
        out[raw["sample_id"]] = [
            (qa["question"], str(qa["answer"]), qa.get("evidence") or [], str(qa["category"]))
            for qa in raw["qa"] if str(qa["category"]) in CATEGORIES and "answer" in qa]
    return out


def ingest(base: Loci, sample: Sample, clock: dict[str, Any]) -> tuple[Loci, dict[int, str]]:
    loci = base.for_scope(user=sample.sample_id)
    loci.clock = lambda: clock["now"]
    first = sample.sessions[0][1][0].speaker
    dia_of: dict[int, str] = {}
    for _, turns in sample.sessions:
        clock["now"] = turns[0].when
        loci.maybe_compact("conversation")  # the sleep between two sessions
        for turn in turns:
            metadata: dict[str, Any] = {"dia_id": turn.dia_id, "name": turn.speaker}
            if turn.caption:
                metadata["caption"] = turn.caption
            if turn.speaker == first:
                event = loci.add("conversation", "user", turn.text, **metadata)
            else:
                event, _ = loci.add_reply("conversation", turn.text, **metadata)
            dia_of[event.id] = turn.dia_id
    return loci, dia_of


def transcript(sample: Sample) -> list[str]:
    lines = []
    for _, turns in sample.sessions:
        lines.append(f"[{turns[0].when:%d %B %Y, %H:%M}]")
        for turn in turns:
            shared = f" (shared: {turn.caption})" if turn.caption else ""
            lines.append(f"{turn.speaker}: {turn.text}{shared}")
    return lines


def tail(lines: list[str], tokens: int, count: Any) -> str:
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = count(line) + 1
        if used + cost > tokens:
            break
        kept.append(line)
        used += cost
    return "\n".join(reversed(kept))


def compiled_text(compiled: Any) -> str:
    messages = compiled.to_openai()[:-1]  # the question left out
    text = "\n".join(str(m.get("content") or "") for m in messages)
    return _DATE_LINE.sub("", text)


def run(samples: list[Sample], qa: dict[str, list[tuple[str, str, list[str], str]]],
        window: int, home: Path) -> dict[str, Any]:
    model = f"chat-{window // 1000}k"
    base = Loci.open(home=str(home), store=f"sqlite:///{home}/conv-{window}.db", model=model,
                     models={model: window}, memory_mirror=False, workspace=str(home))
    counter = token_counter(model)
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    tokens: list[int] = []
    full_tokens: list[int] = []
    evidence_hits: list[float] = []
    compile_ms: list[float] = []
    for sample in samples:
        clock: dict[str, Any] = {}
        loci, dia_of = ingest(base, sample, clock)
        loci.wait_indexed()  # writes return before their vectors
        lines = transcript(sample)
        full = content_words("\n".join(lines))
        whole_tokens = counter.count("\n".join(lines))
        for question, answer, evidence, category in qa[sample.sample_id]:
            started = time.perf_counter()
            compiled = loci.compile("conversation", question)
            compile_ms.append((time.perf_counter() - started) * 1000)
            used = compiled.total_tokens
            recency = content_words(tail(lines, used, counter.count))
            for name, words in (("loci", content_words(compiled_text(compiled))),
                                ("recency", recency), ("full", full)):
                value = coverage(answer, words)
                if value is not None:
                    scores[name][category].append(value)
                    scores[name]["all"].append(value)
            tokens.append(used)
            full_tokens.append(whole_tokens)
            if evidence:
                hits = loci.search_conversation(question, "conversation", limit=10)
                found = {dia_of.get(int(h.id)) for h in hits}
                evidence_hits.append(len(found & set(evidence)) / len(set(evidence)))
    base.close()
    report: dict[str, Any] = {"window": window, "questions": len(tokens)}
    for name, table in scores.items():
        for key in (*CATEGORIES, "all"):
            report[f"{name}|{key}"] = round(statistics.mean(table[key]), 4) if table[key] else None
    report.update(
        tokens_mean=round(statistics.mean(tokens)),
        reduction=round(1 - sum(tokens) / sum(full_tokens), 3),
        evidence_in_top10=round(statistics.mean(evidence_hits), 4),
        compile_p50_ms=round(statistics.median(compile_ms), 2),
    )
    return report


def print_report(report: dict[str, Any]) -> None:
    print(f"\n== window {report['window']:,}: {report['questions']} questions, context "
          f"{report['tokens_mean']:,} tokens on average ({report['reduction']:.0%} smaller "
          f"than the transcript), evidence in search top 10 {report['evidence_in_top10']}, "
          f"compile p50 {report['compile_p50_ms']} ms")
    print(f"{'category':>9} {'loci':>8} {'recency':>8} {'full':>8}")
    for key in (*CATEGORIES, "all"):
        print(f"{key:>9} " + " ".join(f"{report[f'{n}|{key}']:>8}"
                                      for n in ("loci", "recency", "full")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path,
                        default=Path("../shared/data/locomo/locomo_dev.json"))
    parser.add_argument("--windows", default="16000,32000")
    parser.add_argument("--samples", default="", help="comma-separated sample ids")
    parser.add_argument("--json", action="store_true", help="one JSON line per window")
    args = parser.parse_args(argv)
    data = args.data.resolve()
    if not data.is_file():
        print(f"no such file: {data}", file=sys.stderr)
        return 2
    wanted = {s for s in args.samples.split(",") if s} or None
    samples, _ = load(data, wanted)
    qa = answers(data)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="loci-conv-") as tmp:
        os.chdir(tmp)  # no workspace files of the caller's directory in the contexts
        for window in (int(w) for w in args.windows.split(",")):
            report = run(samples, qa, window, Path(tmp))
            print(json.dumps(report) if args.json else "", end="\n" if args.json else "")
            if not args.json:
                print_report(report)
    print(f"{len(samples)} conversations, {round(time.perf_counter() - started)} s, "
          f"{machine()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
