"""Shared helpers for benchmarks: timing, percentiles, synthetic text, machine info."""

from __future__ import annotations

import itertools
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from loci.search.query import STOPWORDS

SYLLABLES = "ka lo mi ra te su vo ne pa di ro ma li tu se fa no bi ke zu".split()


def _vocabulary(size: int = 30_000) -> list[str]:
    rng = random.Random(42)
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4)))] = None
    return list(words)


VOCABULARY = _vocabulary()
FUNCTION_WORDS = sorted(STOPWORDS)
#: Zipf weights (s = 1) from rank 20 on: content words as in English once stop words are
#: set apart (the most frequent content word is in a few percent of sentences).
_WEIGHTS = list(itertools.accumulate(1.0 / rank for rank in range(20, len(VOCABULARY) + 20)))


def sentence(rng: random.Random, n: int = 18) -> str:
    """A synthetic sentence: half stop words, half Zipf-distributed content words."""
    content = rng.choices(VOCABULARY, cum_weights=_WEIGHTS, k=n - n // 2)
    function = rng.choices(FUNCTION_WORDS, k=n // 2)
    return " ".join(w for pair in itertools.zip_longest(content, function) for w in pair if w)


def query(rng: random.Random, n: int = 4) -> str:
    """A question-like query over the same distribution."""
    return "what did we say about " + " ".join(
        rng.choices(VOCABULARY, cum_weights=_WEIGHTS, k=n)) + "?"


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1], 3),
    }


def time_calls(fn: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def serve(port: int, options: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A ``loci serve`` process on ``port`` with ``options``, once its health answers."""
    import httpx

    process = subprocess.Popen([sys.executable, "-m", "loci", "serve", "--port", str(port),
                                *options], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health").status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the server did not start")
