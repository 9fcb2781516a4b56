"""Cache stability of compiled context, and compile latency.

Usage: python benchmarks/cache_stability.py [--turns 300] [--json]

1. A simulated 300-turn conversation with tool calls, occasional memory tags and
   automatic compactions (a 32k-token model so that compaction happens several times).
   Before each assistant reply the context is compiled for the incoming message, as an
   agent would; the prefix ratio of a request is the share of its tokens that equal a
   prefix of the previous request (what a provider's prompt cache can reuse).
2. The same kind of conversation as a client drives it through each face of the proxy
   (Chat Completions, Messages with and without extended thinking, Responses with a
   compaction every 100 turns) against the providers' published prompt-cache rules,
   beside a naive client (``provider_cache.py``): cache-hit rate over input tokens, cost
   against the whole history sent uncached, thinking signatures and tool pairs intact;
   and what recording a call in the usage ledger costs.
3. Compile latency p50/p95 with 10k memories and a 1,000-event session, for the bundled
   local embedding model (recall embeds each message) and for the hash embedder (the
   engine's own cost), with each embedder's time for one message measured alone.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import quicktok

sys.path.insert(0, str(Path(__file__).resolve().parent))
import provider_cache
from common import machine, percentiles, sentence
from loci import Loci, Memory, load_settings

ENCODING = quicktok.get_encoding("o200k_base")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def flatten(messages: list[dict[str, object]]) -> list[int]:
    text = "".join(f"<|{m['role']}|>{json.dumps(m, sort_keys=True)}" for m in messages)
    return list(ENCODING.encode(text))


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def simulate(tmp: Path, turns: int, rng: random.Random) -> dict[str, float]:
    clock = Clock()
    settings = load_settings(store=f"sqlite:///{tmp / 'conv.db'}", home=tmp, model="sim-32k",
                             models={"sim-32k": 32_000}, embedding_provider="hash",
                             memory_mirror=False)
    ratios, previous = [], None
    with Loci(settings, clock=clock) as loci:
        for n in range(turns):
            clock.now += timedelta(seconds=40)
            message = f"Turn {n}: {sentence(rng, 14)}?"
            request = flatten(loci.compile("chat", message).to_openai())
            if previous is not None:
                ratios.append(common_prefix(previous, request) / len(request))
            previous = request
            loci.add("chat", "user", message)
            if n % 3 == 0:
                loci.add_event("chat", type="tool_call", tool_name="search",
                               tool_call_id=f"t{n}", args={"q": message[:40]})
                loci.add_event("chat", type="tool_result", tool_call_id=f"t{n}",
                               content="\n".join(sentence(rng, 20) for _ in range(12)))
            tag = f" [MEMORY:project_context] fact {n}: {sentence(rng, 8)} [/MEMORY]" if (
                n % 25 == 0) else ""
            loci.add_reply("chat", f"Answer {n}: {sentence(rng, 30)}.{tag}")
        compactions = len(loci.compactions("chat"))
    return {"prefix_ratio": round(sum(ratios) / len(ratios), 4),
            "prefix_ratio_min": round(min(ratios), 4), "turns": turns,
            "compactions": compactions}


def latency(tmp: Path, provider: str, rng: random.Random) -> dict[str, float]:
    settings = load_settings(store=f"sqlite:///{tmp / f'lat-{provider}.db'}", home=tmp,
                             embedding_provider=provider, memory_mirror=False,
                             compaction_auto=False)
    with Loci(settings) as loci:
        now = datetime.now(UTC)
        texts = [sentence(rng, 12) for _ in range(10_000)]
        assert loci.indexer is not None
        for start in range(0, len(texts), 2_000):
            chunk = texts[start:start + 2_000]
            memories = [Memory(f"mem_{start + i:06d}", "project_context", t, (), now, now,
                               now + timedelta(days=30)) for i, t in enumerate(chunk)]
            loci.store.put_memories(loci.scope, memories, loci.indexer.vectors_for(chunk))
        events = []
        for i in range(250):
            events += [{"type": "message", "role": "user", "content": sentence(rng, 15)},
                       {"type": "tool_call", "tool_name": "read", "tool_call_id": f"c{i}"},
                       {"type": "tool_result", "tool_call_id": f"c{i}",
                        "content": sentence(rng, 40)},
                       {"type": "message", "role": "assistant", "content": sentence(rng, 25)}]
        loci.add_events("big", events)
        messages = [f"{sentence(rng, 10)}?" for _ in range(120)]
        loci.compile("big", messages[0])
        samples = []
        for message in messages[1:]:
            start = time.perf_counter()
            loci.compile("big", message)
            samples.append((time.perf_counter() - start) * 1000)
        # The embedder alone on other texts of the same shape (recall embeds each message
        # once; the compile above includes that).
        spare = random.Random(5)  # not rng: the next run builds the same corpus as before
        others = iter([f"{sentence(spare, 10)}?" for _ in range(len(samples))])
        embed = [time_one(lambda: loci.indexer.embedder.embed([next(others)]))  # type: ignore[union-attr]
                 for _ in samples]
    figures = {f"compile_{k}": v for k, v in percentiles(samples).items()}
    figures.update({f"query_embedding_{k}": v for k, v in percentiles(embed).items()})
    return figures


def time_one(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(3)
    # A worker thread may still be closing a store's files when the run ends.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as name:
        tmp = Path(name)
        sim = simulate(tmp, args.turns, rng)
        plan = provider_cache.script(args.turns, random.Random(3))
        cache = {face: provider_cache.drive(face, plan, tmp)
                 for face in provider_cache.FACES}
        recording = provider_cache.record_cost(tmp)
        local = latency(tmp, "local", rng)
        hashed = latency(tmp, "hash", rng)
    if args.json:
        print(json.dumps({"prefix_ratio": sim["prefix_ratio"],
                          "compile_p50_ms": local["compile_p50_ms"],
                          "compile_p95_ms": local["compile_p95_ms"],
                          "provider_cache": cache, **recording}))
        return
    print(f"machine: {machine()}")
    print(f"conversation: {sim}")
    for face, figures in cache.items():
        print(f"provider cache, {face}: {figures}")
    print(f"recording a call in the usage ledger: {recording}")
    print(f"compile, local model (10k memories, 1,000-event session): {local}")
    print(f"compile, hash embedder (engine cost alone): {hashed}")


if __name__ == "__main__":
    main()
