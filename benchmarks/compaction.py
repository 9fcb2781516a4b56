"""Compaction benchmark: long sessions with planted facts and bulky tool outputs.

Usage: python benchmarks/compaction.py [--users 3] [--turns 250] [--json]

Each user has one long session: chit-chat, questions, bulky tool outputs (logs and file
dumps of 2-8 KB) and 25 planted facts ("needles": paths, dates, IPs, decisions,
preferences, budgets...). Automatic compaction runs as it would in production, on a
32k-token model, with the offline extractive summarizer, rule-based memory flush and the
bundled embedding model (``--embedding hash`` for a fast run).
Reported: the tokens the full log holds vs. the tokens left live (token reduction); the
share of needles present in the compiled context after compaction (summary + memories +
kept history); the share findable by `search_conversation` (must be 100%); compile
latency after compaction.
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
from common import machine, percentiles, sentence
from loci import Loci, load_settings

CITIES = ["Lisbon", "Porto", "Berlin", "Oslo", "Kyoto", "Lima", "Quito", "Accra"]
DBS = ["PostgreSQL", "SQLite", "Redis", "ClickHouse", "DuckDB"]
PEOPLE = ["Priya", "Rui", "Tomasz", "Amara", "Keiko", "Lars", "Ines", "Omar"]
CHITCHAT = ["ok thanks", "sounds good", "haha nice", "cool, let's continue",
            "what do you think about the weather today?", "got it", "hmm interesting",
            "can you say that again more simply?", "great, thank you!", "sure"]


class TickingClock:
    """Thirty seconds pass between two readings: a long session, deterministically."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=30)
        return self.now


def needle(rng: random.Random, n: int) -> tuple[str, str]:
    """(the user's statement, the exact value that must survive)."""
    kind = n % 8
    if kind == 0:
        value = f"secret/proj{rng.randrange(100, 999)}/deploy-{n}"
        return f"Remember that the deploy key is stored in vault path {value}.", value
    if kind == 1:
        value = f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
        return f"My flight to {rng.choice(CITIES)} is on {value} at 07:40.", value
    if kind == 2:
        value = f"{rng.choice(DBS)} for the billing-{n} service"
        return f"We decided to use {value}.", value
    if kind == 3:
        value = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}"
        return f"The staging server IP is {value}, please note it.", value
    if kind == 4:
        value = f"tabs over spaces in repo-{n}"
        return f"I prefer {value}.", value
    if kind == 5:
        value = f"${rng.randrange(10, 99)},{rng.randrange(100, 999)}"
        return f"The budget for project Falcon-{n} is {value}.", value
    if kind == 6:
        value = f"{rng.choice(PEOPLE)}-{n}"
        return f"Remember that my manager is {value}.", value
    value = f"OPS-{rng.randrange(1000, 9999)}"
    return f"Ticket {value} is blocked on the vendor API until next sprint.", value


def bulky(rng: random.Random) -> str:
    lines = [f"2026-03-0{rng.randrange(1, 9)} 12:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
             f" INFO worker-{rng.randrange(9)} {sentence(rng, 10)}"
             for _ in range(rng.randrange(25, 90))]
    return "\n".join(lines)


def run_user(loci: Loci, rng: random.Random, turns: int, needles: int) -> dict[str, object]:
    planted: list[tuple[str, str]] = []
    needle_turns = set(rng.sample(range(turns - 10), needles))
    total_tokens = 0
    for n in range(turns):
        if n in needle_turns:
            text, value = needle(rng, len(planted))
            planted.append((text, value))
        elif rng.random() < 0.5:
            text = rng.choice(CHITCHAT)
        else:
            text = sentence(rng, 16) + "?"
        total_tokens += loci.add("s", "user", text).tokens
        if rng.random() < 0.4:
            total_tokens += loci.add_event("s", type="tool_call", tool_name="read_logs",
                                           tool_call_id=f"c{n}", args={"n": n}).tokens
            total_tokens += loci.add_event("s", type="tool_result", tool_call_id=f"c{n}",
                                           content=bulky(rng)).tokens
        event, _ = loci.add_reply("s", f"Noted. {sentence(rng, 25)}.")
        total_tokens += event.tokens
    compiled = loci.compile("s", "Let's continue where we left off.")
    text = compiled.to_text()
    in_context = sum(1 for _, value in planted if value in text)
    recoverable = 0
    for statement, value in planted:
        hits = loci.search_conversation(statement, limit=10)
        recoverable += any(value in hit.text for hit in hits)
    samples = []
    for i in range(30):
        start = time.perf_counter()
        loci.compile("s", f"Question {i}: {sentence(rng, 8)}?")
        samples.append((time.perf_counter() - start) * 1000)
    return {
        "total_tokens": total_tokens,
        "live_tokens": loci.session("s").active_token_count,
        "needles": len(planted), "in_context": in_context, "recoverable": recoverable,
        "compactions": len(loci.compactions("s")), "compile_ms": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=3)
    parser.add_argument("--turns", type=int, default=250)
    parser.add_argument("--embedding", default="local",
                        help="embedding provider (local: the bundled model; hash: fast)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(17)
    results = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for user in range(args.users):
            settings = load_settings(store=f"sqlite:///{tmp / 'c.db'}", home=tmp,
                                     user=f"user{user}", model="bench-32k",
                                     models={"bench-32k": 32_000}, memory_mirror=False,
                                     embedding_provider=args.embedding)
            with Loci(settings, clock=TickingClock()) as loci:
                results.append(run_user(loci, rng, args.turns, 25))
    total = sum(int(r["total_tokens"]) for r in results)  # type: ignore[call-overload]
    live = sum(int(r["live_tokens"]) for r in results)  # type: ignore[call-overload]
    needles = sum(int(r["needles"]) for r in results)  # type: ignore[call-overload]
    report = {
        "token_reduction": round(1 - live / total, 4),
        "needles_in_context": round(sum(int(r["in_context"]) for r in results)  # type: ignore[call-overload]
                                    / needles, 4),
        "needles_recoverable": round(sum(int(r["recoverable"]) for r in results)  # type: ignore[call-overload]
                                     / needles, 4),
    }
    if args.json:
        print(json.dumps(report))
        return
    samples = [ms for r in results for ms in r["compile_ms"]]  # type: ignore[attr-defined]
    print(f"machine: {machine()}")
    print(f"{args.users} users x {args.turns} turns, {needles} needles, "
          f"{sum(int(r['compactions']) for r in results)} compactions, "  # type: ignore[call-overload]
          f"{time.perf_counter() - start:.0f} s")
    print(f"tokens in the full logs {total:,}, live after compaction {live:,}")
    print(json.dumps(report))
    print(f"compile after compaction: {percentiles(samples)}")


if __name__ == "__main__":
    main()
